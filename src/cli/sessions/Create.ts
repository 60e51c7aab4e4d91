/**
 * `troupe sessions create`: a new session; prints its id.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Connect from "../Connect.js"
import * as ExitCode from "../ExitCode.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import { json } from "./Arguments.js"
import { withClient } from "./Client.js"
import { wireForms } from "./Table.js"

/** `sessions create`: a session of one of the daemon's agents; prints its id. */
export const create = Command.make(
  "create",
  {
    ...Connect.options,
    json,
    agent: Options.text("agent").pipe(
      Options.withPseudoName("NAME"),
      Options.withDescription("One of the daemon's agents (`troupe agents`; default: its first)."),
      Options.optional
    ),
    title: Options.text("title").pipe(Options.withPseudoName("TEXT"), Options.withDescription("The session's title (default: none)."), Options.optional)
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const agent = Option.isSome(o.agent)
          ? o.agent.value
          : yield* Effect.flatMap(client.agents, (agents) =>
            agents.length === 0
              ? Effect.fail(ExitCode.refused("the daemon serves no agents"))
              : Effect.succeed(agents[0]!.name))
        const session = yield* client.create({ agent, ...(Option.isSome(o.title) ? { title: o.title.value } : {}) })
        if (o.json) return yield* out.jsonLine((yield* wireForms).session(session))
        yield* out.line(session.id)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Create a session of one of the daemon's agents and print its id.",
  [
    ["troupe sessions create --agent helper --title \"Release notes\"", "a session of the agent helper; prints ses_\u2026"],
    ["troupe sessions create --tcp 127.0.0.1:7000 --token \"$TOKEN\"", "on a daemon over TCP, with its first agent"]
  ]
)))
