/**
 * JSON values and their canonical text. Canonical text (keys sorted, no
 * whitespace) is how idempotent commands compare "the same bytes".
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** Any JSON value (object, array, string, number, boolean, null). */
export const Json: Schema.Schema<unknown> = Schema.Unknown.annotations({ identifier: "Json" })

/** A JSON object with string keys. */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
/** @since 0.1.0 */
export type JsonObject = typeof JsonObject.Type

/** Canonical JSON text: object keys sorted, `undefined` members dropped. */
export const canonical = (value: unknown): string => JSON.stringify(sortKeys(value))

const sortKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key]
      if (v !== undefined) out[key] = sortKeys(v)
    }
    return out
  }
  return value
}
