/**
 * One callback offered to a client's provider, served the same way over
 * every transport (the socket's `callback.provide`, HTTP's callback stream):
 * a callback this client cannot read is left open for one that can; the
 * handler's answer is checked against the callback's kind where the handler
 * is, then sent; an answer that comes too late (another provider or a manual
 * answer won, or the turn ended) is no longer this provider's concern.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { CallbackKind } from "../schema/Callback.js"
import * as CallbackHandlers from "../schema/CallbackHandlers.js"
import type { InvalidCallbackAnswer } from "../schema/Errors.js"
import type { SessionId } from "../schema/Ids.js"
import * as ForwardCompatible from "./ForwardCompatible.js"
import type { AnswerOptions, Handler } from "./session/Api.js"
import { ServerError } from "./session/Errors.js"

/** A failure of the handler (or of its answer's shape), kept apart from the client's own errors and never retried. */
export class HandlerFailure<E> {
  readonly _tag = "HandlerFailure"
  constructor(readonly error: E) {}
}

/** Serves `callback` with `handler`, sending the checked answer with `answer`. */
export const serve = <E, K extends CallbackKind, A>(
  callback: ForwardCompatible.ClientCallback,
  handler: Handler<E, K>,
  answer: (sessionId: SessionId, answer: AnswerOptions) => Effect.Effect<void, A>
): Effect.Effect<void, HandlerFailure<E | InvalidCallbackAnswer> | A> =>
  Effect.gen(function*() {
    if (ForwardCompatible.isUnknown(callback)) {
      // A newer daemon's callback this client cannot read: left open for one that can (or a manual answer).
      return yield* Effect.logWarning("a callback this client cannot read was left open").pipe(
        Effect.annotateLogs({ kind: callback.kind })
      )
    }
    // The server offers only the kinds asked for, so the callback is one of `K`.
    const result = yield* Effect.mapError(handler(callback as Parameters<typeof handler>[0]), (error) => new HandlerFailure(error))
    if (Option.isNone(result)) return
    // Checked here, where the handler is: a wrong shape ends this provider instead of becoming the server's `invalid_input`.
    const checked = CallbackHandlers.check(callback, result.value)
    if (checked._tag === "Left") return yield* Effect.fail(new HandlerFailure(checked.left))
    yield* answer(callback.sessionId, {
      callbackId: callback.callbackId,
      result: checked.right,
      turnId: callback.turnId,
      operationId: callback.operationId
    }).pipe(
      // Another provider or a manual answer came first, or the turn ended: the callback is no longer ours.
      Effect.catchIf(
        (error) => error instanceof ServerError && (error.kind === "stale_callback" || error.kind === "session_closed"),
        () => Effect.void
      )
    )
  })
