/**
 * `troupe sessions show`: the session, its active turn and open callbacks.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Connect from "../Connect.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import { json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"
import { date, table, wireForms } from "./Table.js"

/** `sessions show`: a session, its active turn, cursor, pending inputs and open callbacks. */
export const show = Command.make(
  "show",
  { ...Connect.options, json, session: sessionId },
  (o) =>
    withClient(o, ({ client, flags }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const snapshot = yield* client.snapshot(o.session)
        // Loaded here: --help needs neither the event formats nor the wire forms.
        const { callbackLine, openCallbacks } = yield* Effect.promise(() => import("./Callbacks.js"))
        const callbacks = snapshot.openCallbacks > 0 ? yield* openCallbacks(client, o.session) : []
        if (o.json) {
          return yield* out.jsonLine({ ...(yield* wireForms).snapshot(snapshot), callbacks })
        }
        const s = snapshot.session
        const rows: Array<[string, string]> = [
          ["session", s.id],
          ["title", s.title ?? "(none)"],
          ["agent", `${s.agent.name} (model ${s.agent.model.name})`],
          ["status", s.status + (s.archived ? ", archived" : "")],
          ["turn", s.activeTurnId ?? "(none active)"],
          ["events", `${snapshot.cursor} (the last cursor)`],
          ["inbox", `${snapshot.pendingInputs} pending`],
          ["callbacks", `${snapshot.openCallbacks} open`],
          ["created", date(s.createdAt)],
          ["updated", date(s.updatedAt)]
        ]
        if (s.parentId !== null) rows.splice(1, 0, ["parent", s.parentId])
        for (const row of table(rows)) yield* out.line(row)
        for (const callback of callbacks) yield* out.line(`  ${callbackLine(s.id, callback, flags)}`)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Show a session: status, active turn, cursor, pending inputs and open callbacks.",
  [
    ["troupe sessions show ses_01J\u2026", "the session, and how to answer each open callback"],
    ["troupe sessions show ses_01J\u2026 --json", "the same as one JSON line"]
  ]
)))
