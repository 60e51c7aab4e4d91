/**
 * `troupe sessions interrupt`: stops exactly one turn (default: the active one).
 *
 * @since 0.1.0
 */
import { Args, Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { TurnId } from "../../schema/Ids.js"
import * as Connect from "../Connect.js"
import * as ExitCode from "../ExitCode.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import { idArg, json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"

/** `sessions interrupt`: stops exactly one turn (default: the session's active turn). */
export const interrupt = Command.make(
  "interrupt",
  {
    ...Connect.options,
    json,
    session: sessionId,
    turn: idArg("TURN", TurnId, "The turn to stop (default: the session's active turn).").pipe(Args.optional),
    reason: Options.text("reason").pipe(Options.withPseudoName("TEXT"), Options.withDescription("Why (recorded with the turn)."), Options.optional)
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const turn = Option.isSome(o.turn)
          ? o.turn.value
          : yield* Effect.flatMap(client.get(o.session), (session) =>
            session.activeTurnId === null
              ? Effect.fail(ExitCode.refused(`${o.session} has no active turn`))
              : Effect.succeed(session.activeTurnId))
        const outcome = yield* client.interrupt(o.session, turn, Option.getOrUndefined(o.reason))
        if (o.json) return yield* out.jsonLine(outcome)
        yield* out.line(`${outcome.outcome} ${outcome.turnId ?? turn}`)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Interrupt exactly one turn of a session (default: its active turn).",
  [
    ["troupe sessions interrupt ses_01J\u2026", "stop the active turn"],
    ["troupe sessions interrupt ses_01J\u2026 turn_01J\u2026 --reason \"wrong file\"", "stop exactly that turn, saying why"]
  ]
)))
