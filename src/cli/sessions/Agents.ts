/**
 * `troupe agents`: the agents a running daemon serves.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Connect from "../Connect.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import { json } from "./Arguments.js"
import { withClient } from "./Client.js"
import { table } from "./Table.js"

/** The `agents` command: the agents a daemon serves. */
export const agents = Command.make(
  "agents",
  { ...Connect.options, json },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const items = yield* client.agents
        if (o.json) {
          for (const item of items) yield* out.jsonLine(item)
          return
        }
        for (const row of table([["NAME", "DESCRIPTION"], ...items.map((item) => [item.name, item.description])])) {
          yield* out.line(row)
        }
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "List the agents a running daemon serves.",
  [
    ["troupe agents", "the names and descriptions"],
    ["troupe agents --socket /run/troupe.sock --json", "of the daemon on that socket, as JSON lines"]
  ]
)))
