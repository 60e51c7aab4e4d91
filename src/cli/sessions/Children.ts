/**
 * `troupe sessions children`: a session's direct children, newest first, archived included.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Connect from "../Connect.js"
import * as Output from "../Output.js"
import { json, sessionId } from "./Arguments.js"
import { collect, withClient } from "./Client.js"
import { summaryRow, table, wireForms } from "./Table.js"

/** `sessions children`: a session's direct children, newest first, archived included. */
export const children = Command.make(
  "children",
  {
    ...Connect.options,
    json,
    session: sessionId,
    limit: Options.integer("limit").pipe(
      Options.withDescription("At most this many children (default 50)."),
      Options.withDefault(50)
    )
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const items = yield* collect(o.limit, 500, (limit, cursor) =>
          client.children(o.session, { limit, ...(cursor === undefined ? {} : { cursor }) }))
        if (o.json) {
          const encode = yield* wireForms
          for (const item of items) yield* out.jsonLine(encode.childItem(item))
          return
        }
        if (items.length === 0) return yield* out.note("no children")
        const rows = items.map((item) => [item.alias ?? "-", ...summaryRow(item.session)])
        for (const row of table([["ALIAS", "ID", "STATUS", "UPDATED", "AGENT", "TITLE"], ...rows])) yield* out.line(row)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription("List a session's direct children, newest first (archived ones included)."))
