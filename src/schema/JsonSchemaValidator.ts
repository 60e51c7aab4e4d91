/**
 * A small JSON Schema validator for the draft-07 subset that Effect's
 * `JSONSchema.make` writes: `type` (with `integer`), `const`, `enum`,
 * `anyOf`/`oneOf`/`allOf`, `$ref` into `$defs`, object `properties`,
 * `required`, `additionalProperties`, `patternProperties`, `propertyNames`,
 * array `items` (one schema or a tuple), `additionalItems`, `minItems`,
 * `maxItems`, string `pattern`, `minLength`, `maxLength`, number `minimum`,
 * `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`. A keyword
 * outside that subset fails validation loudly (`unsupported keyword`), so a
 * schema this cannot check is never passed by accident. No npm validator is
 * installed in this project. It checks an agent's structured output against
 * the JSON Schema its agent declares (the runtime holds only the JSON Schema:
 * the agent definition is frozen as data), and the protocol schema test uses
 * it too.
 *
 * @since 0.1.0
 */

/** A JSON Schema: an object of keywords, or `true` (anything) / `false` (nothing). */
export type Schema = boolean | { readonly [key: string]: unknown }

const KNOWN = new Set([
  "$schema", "$id", "$defs", "$ref", "$comment", "title", "description", "default", "examples", "format", "identifier",
  "type", "const", "enum", "anyOf", "oneOf", "allOf",
  "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
  "items", "prefixItems", "additionalItems", "minItems", "maxItems",
  "pattern", "minLength", "maxLength",
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"
])

const typeMatches = (type: string, value: unknown): boolean => {
  switch (type) {
    case "null":
      return value === null
    case "boolean":
      return typeof value === "boolean"
    case "string":
      return typeof value === "string"
    case "number":
      return (typeof value === "number" && Number.isFinite(value)) || typeof value === "bigint"
    case "integer":
      return (typeof value === "number" && Number.isInteger(value)) || typeof value === "bigint"
    case "array":
      return Array.isArray(value)
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array)
    default:
      return false
  }
}

/** JSON text of a value, with bigints (CBOR's large integers) as their digits. */
export const show = (value: unknown): string =>
  JSON.stringify(value, (_, field) => (typeof field === "bigint" ? field.toString() : field)) ?? String(value)

const equal = (a: unknown, b: unknown): boolean => show(a) === show(b)

/** The `$defs` entry a `$ref` names (a JSON Pointer: `~1` is `/`, `~0` is `~`). */
const resolve = (root: Schema, ref: string): Schema => {
  if (!ref.startsWith("#/$defs/")) return { not: ref }
  const key = decodeURIComponent(ref.slice("#/$defs/".length)).replace(/~1/g, "/").replace(/~0/g, "~")
  const defs = (typeof root === "object" ? root["$defs"] : undefined) as Record<string, Schema> | undefined
  const found = defs?.[key]
  // An unknown keyword: validation fails loudly rather than passing what it cannot check.
  return found ?? { unresolved: ref }
}

/** The problems of `value` against `schema` (none: it is valid), each as `path: what`. */
export const validate = (schema: Schema, value: unknown, root: Schema = schema, path = "$"): ReadonlyArray<string> => {
  if (schema === true) return []
  if (schema === false) return [`${path}: no value is allowed here`]
  const problems: Array<string> = []
  const fail = (what: string) => void problems.push(`${path}: ${what}`)
  for (const key of Object.keys(schema)) if (!KNOWN.has(key)) fail(`unsupported keyword ${key}`)
  const s = schema

  if (typeof s["$ref"] === "string") problems.push(...validate(resolve(root, s["$ref"]), value, root, path))
  if ("const" in s && !equal(s["const"], value)) fail(`expected ${JSON.stringify(s["const"])}, got ${show(value)}`)
  if (Array.isArray(s["enum"]) && !s["enum"].some((option) => equal(option, value))) {
    fail(`expected one of ${JSON.stringify(s["enum"])}, got ${show(value)}`)
  }
  if (s["type"] !== undefined) {
    const types = Array.isArray(s["type"]) ? s["type"] as ReadonlyArray<string> : [s["type"] as string]
    if (!types.some((type) => typeMatches(type, value))) {
      fail(`expected ${types.join(" or ")}, got ${value === null ? "null" : Array.isArray(value) ? "array" : typeof value}`)
      return problems
    }
  }
  if (Array.isArray(s["allOf"])) for (const member of s["allOf"] as ReadonlyArray<Schema>) problems.push(...validate(member, value, root, path))
  for (const key of ["anyOf", "oneOf"] as const) {
    if (!Array.isArray(s[key])) continue
    const results = (s[key] as ReadonlyArray<Schema>).map((member) => validate(member, value, root, path))
    const passing = results.filter((result) => result.length === 0).length
    if (passing === 0) {
      // The closest member's problems say most.
      const closest = [...results].sort((a, b) => a.length - b.length)[0] ?? []
      fail(`matches none of ${key} (closest: ${closest.join("; ")})`)
    } else if (key === "oneOf" && passing > 1) fail(`matches ${passing} members of oneOf`)
  }

  if (typeof value === "string") {
    if (typeof s["pattern"] === "string" && !new RegExp(s["pattern"] as string, "u").test(value)) fail(`does not match ${s["pattern"]}`)
    if (typeof s["minLength"] === "number" && [...value].length < (s["minLength"] as number)) fail(`shorter than ${s["minLength"]}`)
    if (typeof s["maxLength"] === "number" && [...value].length > (s["maxLength"] as number)) fail(`longer than ${s["maxLength"]}`)
  }
  if (typeof value === "number" || typeof value === "bigint") {
    const n = Number(value)
    if (typeof s["minimum"] === "number" && n < (s["minimum"] as number)) fail(`below ${s["minimum"]}`)
    if (typeof s["maximum"] === "number" && n > (s["maximum"] as number)) fail(`above ${s["maximum"]}`)
    if (typeof s["exclusiveMinimum"] === "number" && n <= (s["exclusiveMinimum"] as number)) fail(`not above ${s["exclusiveMinimum"]}`)
    if (typeof s["exclusiveMaximum"] === "number" && n >= (s["exclusiveMaximum"] as number)) fail(`not below ${s["exclusiveMaximum"]}`)
    if (typeof s["multipleOf"] === "number" && !Number.isInteger(n / (s["multipleOf"] as number))) fail(`not a multiple of ${s["multipleOf"]}`)
  }
  if (Array.isArray(value)) {
    if (typeof s["minItems"] === "number" && value.length < (s["minItems"] as number)) fail(`fewer than ${s["minItems"]} items`)
    if (typeof s["maxItems"] === "number" && value.length > (s["maxItems"] as number)) fail(`more than ${s["maxItems"]} items`)
    // A tuple is `items: [...]` + `additionalItems` up to 2019-09, `prefixItems: [...]` + `items` from 2020-12.
    const tuple2020 = Array.isArray(s["prefixItems"])
    const items = tuple2020 ? s["prefixItems"] : s["items"]
    if (Array.isArray(items)) {
      items.forEach((item, i) => {
        if (i < value.length) problems.push(...validate(item as Schema, value[i], root, `${path}[${i}]`))
      })
      const rest = tuple2020 ? s["items"] : s["additionalItems"]
      for (let i = items.length; i < value.length; i++) {
        if (rest !== undefined) problems.push(...validate(rest as Schema, value[i], root, `${path}[${i}]`))
      }
    } else if (items !== undefined) {
      value.forEach((item, i) => problems.push(...validate(items as Schema, item, root, `${path}[${i}]`)))
    }
  }
  if (typeMatches("object", value)) {
    const object = value as Record<string, unknown>
    const properties = (s["properties"] ?? {}) as Record<string, Schema>
    for (const name of (s["required"] ?? []) as ReadonlyArray<string>) {
      if (!(name in object) || object[name] === undefined) fail(`missing ${name}`)
    }
    const patterns = Object.entries((s["patternProperties"] ?? {}) as Record<string, Schema>)
    for (const [name, field] of Object.entries(object)) {
      if (field === undefined) continue // an absent member, as CBOR and JSON have it
      if (s["propertyNames"] !== undefined) problems.push(...validate(s["propertyNames"] as Schema, name, root, `${path}.${name} (name)`))
      let matched = false
      if (name in properties) {
        matched = true
        problems.push(...validate(properties[name]!, field, root, `${path}.${name}`))
      }
      for (const [pattern, schema] of patterns) {
        if (new RegExp(pattern, "u").test(name)) {
          matched = true
          problems.push(...validate(schema, field, root, `${path}.${name}`))
        }
      }
      if (!matched && s["additionalProperties"] !== undefined) {
        problems.push(...validate(s["additionalProperties"] as Schema, field, root, `${path}.${name}`))
      }
    }
  }
  return problems
}
