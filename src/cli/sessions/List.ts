/**
 * `troupe sessions list`: the newest root sessions, as a table.
 *
 * @since 0.1.0
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Connect from "../Connect.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import { json } from "./Arguments.js"
import { collect, withClient } from "./Client.js"
import { summaryRow, table, wireForms } from "./Table.js"

/** `sessions list`: the newest root sessions, as a table or JSON lines. */
export const list = Command.make(
  "list",
  {
    ...Connect.options,
    json,
    all: Options.boolean("all").pipe(Options.withDescription("Include archived sessions.")),
    limit: Options.integer("limit").pipe(
      Options.withPseudoName("N"),
      Options.withDescription("At most this many sessions, from 1 to 1000 (default 50)."),
      Options.withDefault(50),
      Options.mapEffect((n) =>
        n >= 1 && n <= 1000 ? Effect.succeed(n) : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--limit: ${n} is not from 1 to 1000`)))
      )
    )
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const sessions = yield* collect(o.limit, 500, (limit, cursor) =>
          client.list({ scope: "roots", includeArchived: o.all, limit, ...(cursor === undefined ? {} : { cursor }) }))
        if (o.json) {
          const encode = yield* wireForms
          for (const session of sessions) yield* out.jsonLine(encode.session(session))
          return
        }
        if (sessions.length === 0) return yield* out.note("no sessions")
        for (const row of table([["ID", "STATUS", "UPDATED", "AGENT", "TITLE"], ...sessions.map(summaryRow)])) {
          yield* out.line(row)
        }
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "List the newest root sessions.",
  [
    ["troupe sessions list", "the 50 newest sessions of the default daemon"],
    ["troupe sessions list --all --limit 5 --json", "the 5 newest, archived ones too, as JSON lines"]
  ]
)))
