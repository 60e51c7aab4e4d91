/**
 * `troupe sessions send`: a message; `--wait` shows the turn it starts until it ends.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Connect from "../Connect.js"
import * as ExitCode from "../ExitCode.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import * as Signals from "../Signals.js"
import * as Words from "../Words.js"
import { json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"

/** `sessions send`: a message; `--wait` shows the turn it starts until it ends or waits for a reply. */
export const send = Command.make(
  "send",
  {
    ...Connect.options,
    json,
    session: sessionId,
    text: Words.args("TEXT", "The message: one quoted argument, or several words joined with spaces."),
    steer: Options.boolean("steer").pipe(Options.withDescription("Steer the running turn instead of queueing a new one.")),
    wait: Options.boolean("wait").pipe(
      Options.withAlias("w"),
      Options.withDescription("Show the turn the message starts (or steers) until it ends or waits for your reply; exit 1 if it fails.")
    )
  },
  (o) =>
    withClient(o, ({ client, flags }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const mode = o.steer ? "steer" as const : "queue" as const
        if (!o.wait) {
          const accepted = yield* client.send(o.session, { text: o.text, mode })
          if (o.json) return yield* out.jsonLine(accepted)
          return yield* out.line(
            `${accepted.disposition ?? "accepted"}${accepted.turnId === undefined ? "" : ` ${accepted.turnId}`}`
          )
        }
        // Loaded here: --help and a send without --wait do not need the turn's view.
        const [TurnView, { callbackLine }] = yield* Effect.promise(() => Promise.all([import("../TurnView.js"), import("./Callbacks.js")]))
        const signal = yield* Signals.listen
        const snapshot = yield* client.snapshot(o.session)
        const inputId = `cli-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`
        const view = TurnView.make(
          out,
          { _tag: "input", inputId, running: o.steer ? snapshot.session.activeTurnId ?? undefined : undefined },
          {
            onCallback: (opened) => Option.some(`? waiting: ${callbackLine(o.session, opened, flags)}`),
            waitsForUser: snapshot.session.agent.noToolPolicy === "wait_user"
          }
        )
        // Subscribed before sending, from the last event on: the first event (that one, replayed)
        // says the subscription is live, and the message's events all come after it.
        const subscribed = yield* Deferred.make<void>()
        // After a drop (a restarted daemon), a model call in flight is made again: the view prints its reply once.
        const ending = yield* client.events(o.session, { after: Math.max(0, snapshot.cursor - 1), volatile: !o.json, onResume: view.resumed }).pipe(
          Stream.tap(() => Deferred.succeed(subscribed, undefined)),
          Stream.filter((frame) => frame.cursor === undefined || frame.cursor > snapshot.cursor),
          Stream.mapEffect((frame) => view.onEvent(frame.event)),
          Stream.filterMap((end) => end),
          Stream.runHead,
          // A stream that fails before its first event must not leave the sender waiting.
          Effect.ensuring(Deferred.succeed(subscribed, undefined)),
          Effect.forkScoped
        )
        yield* Deferred.await(subscribed)
        yield* client.send(o.session, { text: o.text, mode, inputId })
        const ended = Fiber.join(ending)
        const first = yield* Effect.raceFirst(Effect.map(ended, Either.right), Effect.map(signal, Either.left))
        if (Either.isLeft(first)) {
          return yield* Effect.fail(new ExitCode.CliFailure({
            code: ExitCode.ExitCode.Interrupted,
            message: "stopped waiting (the turn goes on; `troupe sessions interrupt` stops it)"
          }))
        }
        if (Option.isNone(first.right)) return yield* Effect.fail(ExitCode.refused("the session closed"))
        const step = first.right.value
        if (step._tag === "WaitingForUser") {
          // The turn is not over: the agent asked for more, and the next message answers it.
          if (!o.json) yield* out.note(`? waiting for your reply: troupe sessions send ${o.session} "…"`)
          return
        }
        if (step.record.outcome !== "completed") return yield* Effect.fail(ExitCode.turnFailed(""))
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Send a message to a session (--wait shows the turn until it ends).",
  [
    ["troupe sessions send ses_01J\u2026 \"What changed?\"", "queue a message; prints how it was accepted"],
    ["troupe sessions send --wait ses_01J\u2026 what changed since yesterday", "send, then show the turn until it ends (exit 1 if it fails)"]
  ]
)))
