/**
 * How sessions are printed: aligned tables of one-line summaries, or JSON
 * lines with `--json`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type { Session } from "../../schema/Session.js"
import * as Output from "../Output.js"

/** The encoders of `--json` (`WireForms`), loaded when a command prints JSON. */
export const wireForms = Effect.promise(() => import("./WireForms.js"))

/** A time as `YYYY-MM-DD HH:MM:SS` (UTC). */
export const date = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace("T", " ")

/** Columns padded to their widest cell; the last column is not padded. */
export const table = (rows: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> => {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? []
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join("  ").trimEnd())
}

/** A session's one-line summary values. */
export const summaryRow = (session: Session): ReadonlyArray<string> => [
  session.id,
  session.status + (session.archived ? " (archived)" : ""),
  date(session.updatedAt),
  session.agent.name,
  session.title ?? ""
]

/** Prints a session after a control command. */
export const printSession = (o: { readonly json: boolean }, session: Session) =>
  Effect.gen(function*() {
    const out = yield* Output.make({ json: o.json })
    if (o.json) return yield* out.jsonLine((yield* wireForms).session(session))
    for (const row of table([summaryRow(session)])) yield* out.line(row)
  }).pipe(Effect.scoped)
