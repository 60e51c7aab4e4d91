/**
 * The `SessionHost` port decides where a session's actor runs. The in-process
 * host (`InProcessHost.layer`) keeps one actor per live session in this
 * process; a multi-worker PostgreSQL host can run the same actors elsewhere.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Duration from "effect/Duration"
import type * as Option from "effect/Option"
import type * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import { SessionBusy, StaleCallback, TurnMismatch } from "../schema/Errors.js"
import type { SessionEvent } from "../schema/Event.js"
import type { InputId, SessionId, TurnId } from "../schema/Ids.js"
import type { LogRecord, TurnEnded } from "../schema/Record.js"
import type { Message } from "../schema/Inbox.js"

/** What the actor did with an admitted command. */
export type Decision = Data.TaggedEnum<{
  /** A message started this turn; `cursor` is the seq of its `turn_started` record. */
  Started: { readonly turnId: TurnId; readonly cursor: number }
  /** A message waits behind the running turn. */
  Queued: {}
  /** Text was delivered to this running turn. */
  Steered: { readonly turnId: TurnId }
  /** An interrupt stopped this turn, or found it already ended. */
  Interrupted: { readonly turnId: TurnId; readonly outcome: "interrupted" | "already_ended" }
  /** A control command (rename, archive, close) or answer took effect. */
  Applied: {}
  /** Stored; no actor of this host drives the session right now (another worker holds its lease). */
  Admitted: {}
}>

/** Constructors for `Decision`. */
export const Decision = Data.taggedEnum<Decision>()

/**
 * Interest registered with the host in something an actor will do: wait for
 * it with `await` (at once if it already happened), and `withdraw` it when
 * no longer waiting (a no-op once it happened). Whoever registers one
 * withdraws it, whatever the outcome.
 */
export interface Interest<A, E = never> {
  readonly await: Effect.Effect<A, E>
  readonly withdraw: () => void
}

/** Interest in a turn's end (`SessionHost.turnEnded`). */
export interface TurnInterest extends Interest<Option.Option<TurnEnded>> {
  /**
   * Whether an actor of this host was running the turn (started, not ended) when the interest was
   * registered, or had just ended it (its last ended turn): either way `await` has its end.
   */
  readonly runningHere: boolean
}

/**
 * Runs `use` with an interest `register`ed first, and withdraws it however
 * `use` ends: success, failure or interruption (an `acquireUseRelease` in
 * fewer Effect steps, for the send path).
 */
export const interested = <I extends Interest<unknown, unknown>, A, E>(
  register: Effect.Effect<I>,
  use: (interest: I) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(register, (interest) =>
      Effect.matchCauseEffect(restore(use(interest)), {
        onFailure: (cause) => {
          interest.withdraw()
          return Effect.failCause(cause)
        },
        onSuccess: (value) => {
          interest.withdraw()
          return Effect.succeed(value)
        }
      })))

/**
 * What an actor may refuse, by the kind of command: a message under the
 * `reject` busy policy is `SessionBusy`, an interrupt of another turn
 * `TurnMismatch`, an answer that is not the one taking effect
 * `StaleCallback`; the other commands are never refused.
 */
export interface Refusals {
  readonly message: SessionBusy
  readonly steer: never
  readonly interrupt: TurnMismatch
  readonly callback_answer: StaleCallback
  readonly control: never
  readonly child_result: never
}

/** Any refusal. */
export type Refusal = Refusals[keyof Refusals]

/** A pending decision on one input of a command of kind `K`. */
export type Expectation<K extends keyof Refusals = keyof Refusals> = Interest<Decision, Refusals[K]>

/**
 * The decision on `inputId` that a log record states, if it states one: how a
 * process that did not decide learns what another process's actor decided.
 * A message waiting behind a running turn ("queued") leaves no record.
 */
export const decisionOf = (
  record: LogRecord,
  inputId: InputId
): Exit.Exit<Decision, Refusal> | undefined => {
  const body = record.body
  if (body._tag === "turn_started") {
    return body.inputId === inputId ? Exit.succeed(Decision.Started({ turnId: body.turnId, cursor: record.seq })) : undefined
  }
  if (body._tag !== "input_applied" || body.inputId !== inputId) return undefined
  const detail = body.detail
  switch (body.kind) {
    case "steer":
      return body.turnId === undefined ? Exit.succeed(Decision.Applied()) : Exit.succeed(Decision.Steered({ turnId: body.turnId }))
    case "interrupt": {
      const outcome = detail !== undefined && "outcome" in detail ? detail.outcome : "interrupted"
      if (outcome !== "turn_mismatch") return Exit.succeed(Decision.Interrupted({ turnId: body.turnId!, outcome }))
      // The running turn is not named by the record; the refusal says none is known.
      return Exit.fail(new TurnMismatch({ sessionId: record.sessionId, expectedTurnId: body.turnId!, activeTurnId: null }))
    }
    case "callback_answer":
      return detail !== undefined && "stale" in detail
        ? Exit.fail(new StaleCallback({ sessionId: record.sessionId, callbackId: detail.callbackId, reason: detail.stale }))
        : Exit.succeed(Decision.Applied())
    case "message":
      return detail !== undefined && "rejected" in detail
        ? Exit.fail(new SessionBusy({ sessionId: record.sessionId, activeTurnId: body.turnId! }))
        : Exit.succeed(Decision.Applied())
    default:
      return Exit.succeed(Decision.Applied())
  }
}

/** The port. */
export class SessionHost extends Context.Tag("troupe/SessionHost")<
  SessionHost,
  {
    /**
     * Registers interest in the decision on `inputId` before the command is
     * pushed (so a fast actor cannot decide before anyone listens).
     */
    readonly expect: <K extends keyof Refusals>(sessionId: SessionId, inputId: InputId, kind: K) => Effect.Effect<Expectation<K>>
    /** Wakes the session's actor, starting one if none runs here. */
    readonly wake: (sessionId: SessionId) => Effect.Effect<void>
    /**
     * Hands `message` to the session's actor here, when it waits idle and caught
     * up with its inbox and the message starts a turn: the actor admits it into
     * the inbox and records the turn's start in one commit (no push), and this
     * is that `Started` decision. `None` when no actor here takes it (none live,
     * busy, behind its inbox, a refusal, or the store saw a push first): nothing
     * of it was written, and the caller pushes it as usual.
     */
    readonly offer: (sessionId: SessionId, message: Message) => Effect.Effect<Option.Option<Decision>>
    /** Live events of the session from now on, as this host's actors publish them. */
    readonly live: (sessionId: SessionId) => Effect.Effect<Queue.Dequeue<SessionEvent>, never, Scope.Scope>
    /**
     * Registers interest in the end of `turnId` of `sessionId` before the caller
     * looks for it in the log (so an end in between is not missed): the
     * `turn_ended` record an actor of this host commits, or `None` when the
     * session's actor here stops first (its lease lost, its session handed
     * over): the turn's end is then committed elsewhere, and is in the log.
     * `runningHere`: an actor of this host had started the turn and not ended
     * it when the interest was registered, so its end is announced to it
     * (or `None`): the caller need not look in the log.
     */
    readonly turnEnded: (sessionId: SessionId, turnId: TurnId) => Effect.Effect<TurnInterest>
    /**
     * The end of `turnId` when it is the last turn the session's actor here ended (while that
     * actor lives), read at once: no interest to register and withdraw; else undefined.
     */
    readonly endedHere: (sessionId: SessionId, turnId: TurnId) => TurnEnded | undefined
    /**
     * Hands this host's sessions over, waiting at most `grace`: while it
     * runs, no actor starts here and each one stops (releasing its lease) as
     * soon as its turn is not busy (finished, or parked on a callback or on
     * the user). A daemon shutting down calls it after it stops accepting
     * work, then closes the host: another worker, or the next start, takes
     * the sessions up. True if every actor stopped in time.
     */
    readonly drain: (grace: Duration.DurationInput) => Effect.Effect<boolean>
    /** The sessions whose actors run here now. */
    readonly running: Effect.Effect<ReadonlyArray<SessionId>>
    /** Whether an actor for `sessionId` runs here (`running` includes it), in O(1). */
    readonly drives: (sessionId: SessionId) => Effect.Effect<boolean>
  }
>() {}
