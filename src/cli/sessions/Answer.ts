/**
 * `troupe sessions answer`: answers an open callback (an approval, or a client tool's result).
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { CallbackId } from "../../schema/Ids.js"
import * as Connect from "../Connect.js"
import * as ExitCode from "../ExitCode.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import { idArg, json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"

/** `sessions answer`: answers an open callback, an approval or a client tool's result. */
export const answer = Command.make(
  "answer",
  {
    ...Connect.options,
    json,
    session: sessionId,
    callback: idArg("CALLBACK", CallbackId, "The callback's id (cb_…; see `troupe sessions show`)."),
    approve: Options.boolean("approve").pipe(Options.withDescription("Approve this tool call.")),
    approveSession: Options.boolean("approve-session").pipe(
      Options.withDescription("Approve this call and every later call of the same tool in the session.")
    ),
    deny: Options.boolean("deny").pipe(Options.withDescription("Deny this tool call.")),
    reason: Options.text("reason").pipe(Options.withPseudoName("TEXT"), Options.withDescription("Why (shown to the model with a denial)."), Options.optional),
    output: Options.text("output").pipe(
      Options.withPseudoName("JSON"),
      Options.withDescription("A client tool's result: JSON, or plain text (sent as a string)."),
      Options.optional
    ),
    error: Options.boolean("error").pipe(Options.withDescription("With --output: the client tool failed."))
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const chosen = [o.approve, o.approveSession, o.deny, Option.isSome(o.output)].filter(Boolean).length
        if (chosen !== 1) {
          return yield* Effect.fail(ExitCode.usage("give exactly one of --approve, --approve-session, --deny and --output"))
        }
        const reason = Option.isSome(o.reason) ? { reason: o.reason.value } : {}
        const result = Option.isSome(o.output)
          ? { output: parseOutput(o.output.value), ...(o.error ? { isError: true } : {}) }
          : { decision: o.approve ? "approve" : o.approveSession ? "approve_session" : "deny", ...reason }
        yield* client.answerCallback(o.session, { callbackId: o.callback, result })
        const out = yield* Output.make({ json: o.json })
        if (o.json) return yield* out.jsonLine({ accepted: true, callbackId: o.callback })
        yield* out.line(`accepted ${o.callback}`)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Answer an open callback: an approval, or a client tool's result.",
  [
    ["troupe sessions answer ses_01J\u2026 cb_01J\u2026 --approve", "approve one tool call (the ids are in `troupe sessions show`)"],
    ["troupe sessions answer ses_01J\u2026 cb_01J\u2026 --output '{\"size\": 12}'", "give a client tool's result"]
  ]
)))

/** `--output` text as JSON, or as a string when it is not JSON. */
const parseOutput = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
