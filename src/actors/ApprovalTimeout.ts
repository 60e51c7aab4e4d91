/**
 * Approval expiry. An approval opened under a timeout carries its deadline in
 * its `callback_opened` record (`expiresAt`), so whichever actor waits for it
 * (the one that opened it, or one that resumed the turn after a restart)
 * expires it at the same moment. At the deadline the turn admits its own
 * answer through the store's one-answer rule (`SessionStore.admitAnswer`), so
 * an answer and the expiry race fairly: the first admitted wins, the other is
 * stale. The actor applies the expiry like any answer, recording
 * `callback_resolved` with resolution `expired`, and the model sees a refusal.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { ExpiredApproval } from "../schema/Callback.js"
import type { CallbackId, InputId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import { CallbackAnswer } from "../schema/Inbox.js"
import type { SessionStore } from "../services/SessionStore.js"
import type { ToolOutcome } from "../services/Tool.js"

/** The result an expired approval resumes its turn with. */
export type Expired = ExpiredApproval

/** True for the result of an expired approval (an answer a person gave is an `ApprovalAnswer`, which never has `expired`). */
export const isExpired: (result: unknown) => result is Expired = Schema.is(ExpiredApproval)

/** What the model sees for a call whose approval expired: a refusal; nothing ran. */
export const expiredOutcome: ToolOutcome = {
  output: { error: "approval_expired: nobody answered the approval in time; the call did not run", code: "approval_expired" },
  isError: true
}

/** The callback an expiry closes. */
export interface Target {
  readonly sessionId: SessionId
  readonly callbackId: CallbackId
  readonly turnId: TurnId
  readonly operationId: OperationId
  readonly expiresAt: number
}

/** The turn's own answer at the deadline: one per callback (its input id is derived from it). */
export const expiryAnswer = (target: Target): CallbackAnswer =>
  new CallbackAnswer({
    inputId: `expire:${target.callbackId}` as InputId,
    callbackId: target.callbackId,
    turnId: target.turnId,
    operationId: target.operationId,
    result: { expired: true, expiresAt: target.expiresAt },
    expired: true
  }, true)

/**
 * Admits the expiry once the deadline is reached, then wakes the actor to
 * apply it. A stale refusal means a real answer was admitted first: that one
 * resumes the turn. A store that is unavailable is tried again.
 */
export const expireAt = (
  target: Target,
  store: SessionStore["Type"],
  wake: Effect.Effect<void>
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (target.expiresAt > now) yield* Effect.sleep(Duration.millis(target.expiresAt - now))
    yield* store.admitAnswer(target.sessionId, expiryAnswer(target)).pipe(
      Effect.retry({ while: (error) => error._tag === "StoreUnavailable", schedule: Schedule.exponential("100 millis").pipe(Schedule.upTo("1 minute")) }),
      Effect.catchAll((error) =>
        error._tag === "StaleCallback" || error._tag === "SessionClosed"
          ? Effect.void
          : Effect.logWarning("an approval's expiry was not admitted", error).pipe(
            Effect.annotateLogs({ sessionId: target.sessionId, callbackId: target.callbackId })
          )
      )
    )
    yield* wake
  })

/**
 * Waits for `answer`; with a deadline, the expiry is admitted when it comes
 * and the wait goes on until the actor applies whichever answer won.
 */
export const awaitAnswer = (
  answer: Effect.Effect<unknown>,
  expiry: Effect.Effect<void> | undefined
): Effect.Effect<unknown> =>
  expiry === undefined ? answer : Effect.race(answer, Effect.zipRight(expiry, Effect.never))
