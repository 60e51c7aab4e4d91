/**
 * One call to get an answer: `Sessions.prompt` sends a message and waits for
 * the turn it starts (its output typed when an output schema is given, its
 * usage beside), and `Sessions.promptStream` yields that turn's events and
 * then its result. Both are built on the other `Sessions` methods: the send,
 * the event stream and the wait for a turn's end, so they behave as those do
 * on every store and host.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as Scope from "effect/Scope"
import type { Usage } from "../schema/Budget.js"
import {
  type BudgetExhausted,
  type ChildControlForbidden,
  type Conflict,
  type InvalidInput,
  InvalidOutput,
  type SessionBusy,
  type SessionClosed,
  type SessionNotFound,
  type StoreUnavailable,
  type TurnFailed,
  type TurnInterrupted,
  type TurnNotFound
} from "../schema/Errors.js"
import type { Accepted, SessionEvent, TurnResult } from "../schema/Event.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import type { TurnEnded } from "../schema/Record.js"
import type { Session } from "../schema/Session.js"

/** The message of a prompt: its text, or the text with the options of a queued `send`. */
export type Input = string | {
  readonly text: string
  /** Idempotency key of this send; a retry with the same id and text is not sent twice. */
  readonly inputId?: string | undefined
  readonly source?: string | undefined
  /** Overrides for the turn this message starts: permissions, model settings, budgets. */
  readonly run?: unknown
}

/** How a prompt reads its turn's output and what its stream carries. */
export interface Options<A = string, I = string> {
  /**
   * The agent's output schema (the one given to `Agent.outputOf`): the output
   * is decoded with it, typed; one that does not decode is `InvalidOutput`.
   */
  readonly output?: Schema.Schema<A, I> | undefined
  /** `promptStream` only: include the streamed assistant text (default true). */
  readonly volatile?: boolean | undefined
}

/** A completed turn's answer: `output` typed by the prompt's schema, or the turn's text. */
export interface Result<A = string> {
  readonly _tag: "prompt_result"
  readonly sessionId: SessionId
  /** The turn the message started. */
  readonly turnId: TurnId
  readonly output: A
  /** The final output as the turn recorded it (JSON text for a structured output). */
  readonly text: string
  /** What a user is shown (the output of a terminal tool may differ from it). */
  readonly publicFinalMessage: string
  readonly usage: Usage
}

/** Why a prompt found no answer: the send's refusals, then the turn's. */
export type Error =
  | SessionNotFound
  | StoreUnavailable
  | SessionClosed
  | SessionBusy
  | Conflict
  | InvalidInput
  | ChildControlForbidden
  | TurnNotFound
  | TurnFailed
  | TurnInterrupted
  | BudgetExhausted
  | InvalidOutput

/** An element of `promptStream`: one of the turn's events, and last its result. */
export type Item<A = string> = SessionEvent | Result<A>

/** What the prompts are built on: the `Sessions` methods they use. */
export interface Parts {
  readonly get: (principal: Principal, sessionId: SessionId) => Effect.Effect<Session, SessionNotFound | StoreUnavailable>
  readonly send: (
    principal: Principal,
    sessionId: SessionId,
    options: { readonly text: string; readonly inputId?: string | undefined; readonly source?: string | undefined; readonly run?: any }
  ) => Effect.Effect<Accepted, Error>
  /** The session's events after `after`, subscribed when this runs (nothing published later is missed). */
  readonly subscribe: (
    principal: Principal,
    sessionId: SessionId,
    options: { readonly after: number; readonly volatile: boolean; readonly liveOnly?: boolean }
  ) => Effect.Effect<Stream.Stream<SessionEvent, SessionNotFound | StoreUnavailable>, SessionNotFound | StoreUnavailable, Scope.Scope>
  readonly awaitTurn: (
    principal: Principal,
    sessionId: SessionId,
    turnId: TurnId,
    options: { readonly after: number }
  ) => Effect.Effect<TurnResult, Error>
  /** A turn's result from its `turn_ended` record: the turn's failure, interruption or exhausted budget as errors. */
  readonly resultOf: (sessionId: SessionId, ended: TurnEnded) => Effect.Effect<TurnResult, TurnFailed | TurnInterrupted | BudgetExhausted>
}

const messageOf = (input: Input) => (typeof input === "string" ? { text: input } : input)

/** The turn's output decoded with `schema`, or its text when there is none. */
const decoded = <A, I>(result: TurnResult, schema: Schema.Schema<A, I> | undefined): Effect.Effect<A, InvalidOutput> => {
  if (schema === undefined) return Effect.succeed(result.output as A)
  return Effect.try({ try: () => JSON.parse(result.output) as unknown, catch: (error) => String(error) }).pipe(
    Effect.flatMap((json) => Effect.mapError(Schema.decodeUnknown(schema)(json), (error) => error.message)),
    Effect.mapError((reason) => new InvalidOutput({ sessionId: result.sessionId, turnId: result.turnId, reason }))
  )
}

/** The answer of a completed turn. */
export const answer = <A, I>(
  result: TurnResult,
  schema: Schema.Schema<A, I> | undefined
): Effect.Effect<Result<A>, InvalidOutput> =>
  Effect.map(decoded(result, schema), (output) => ({
    _tag: "prompt_result" as const,
    sessionId: result.sessionId,
    turnId: result.turnId,
    output,
    text: result.output,
    publicFinalMessage: result.publicFinalMessage,
    usage: result.usage
  }))

/** Whether an event is the end of `turnId`. */
const endOf = (event: SessionEvent, turnId: TurnId | undefined): event is SessionEvent & { readonly record: TurnEnded } =>
  event._tag === "durable" && event.record._tag === "turn_ended" && event.record.turnId === turnId

/** Marks the end of the turn in `turnOf`'s stream: its result is read from `ended`. */
interface Done {
  readonly _tag: "done"
  readonly ended: TurnEnded
}

/**
 * The turn that the message `inputId` started, and the events it made: the
 * events after its `turn_started` (those of a turn running before it dropped),
 * up to and with its `turn_ended`, then `Done`; the assistant text of that turn only.
 */
const turnOf = (events: Stream.Stream<SessionEvent, SessionNotFound | StoreUnavailable>, inputId: string) => {
  let turnId: TurnId | undefined
  return events.pipe(
    Stream.mapConcat((event): ReadonlyArray<SessionEvent | Done> => {
      if (event._tag === "assistant_delta") return turnId !== undefined && event.turnId === turnId ? [event] : []
      if (turnId === undefined) {
        if (event.record._tag !== "turn_started" || event.record.inputId !== inputId) return []
        turnId = event.record.turnId
      }
      return endOf(event, turnId) ? [event, { _tag: "done", ended: event.record }] : [event]
    }),
    Stream.takeUntil((item) => item._tag === "done")
  )
}

/** Builds `prompt` and `promptStream` over the parts of a `Sessions`. */
export const make = (parts: Parts) => {
  const prompt = <A = string, I = string>(
    principal: Principal,
    sessionId: SessionId,
    input: Input,
    options: Options<A, I> = {}
  ): Effect.Effect<Result<A>, Error> =>
    Effect.gen(function*() {
      const before = yield* parts.get(principal, sessionId)
      const accepted = yield* Effect.scoped(Effect.gen(function*() {
        // Subscribed before the send: a message queued behind a running turn starts its own turn later.
        const events = yield* parts.subscribe(principal, sessionId, { after: before.headSeq, volatile: false })
        const accepted = yield* parts.send(principal, sessionId, messageOf(input))
        if (accepted.disposition === "started" && accepted.turnId !== undefined && accepted.cursor !== undefined) {
          return { turnId: accepted.turnId, cursor: accepted.cursor }
        }
        const started = yield* events.pipe(
          Stream.filterMap((event) =>
            event._tag === "durable" && event.record._tag === "turn_started" && event.record.inputId === accepted.inputId
              ? Option.some({ turnId: event.record.turnId, cursor: event.cursor })
              : Option.none()
          ),
          Stream.runHead
        )
        // The event stream follows until the session's events end, which they never do while it lives.
        return yield* Option.match(started, { onNone: () => Effect.dieMessage("event stream ended"), onSome: Effect.succeed })
      }))
      const result = yield* parts.awaitTurn(principal, sessionId, accepted.turnId, { after: accepted.cursor - 1 })
      return yield* answer(result, options.output)
    })

  const promptStream = <A = string, I = string>(
    principal: Principal,
    sessionId: SessionId,
    input: Input,
    options: Options<A, I> = {}
  ): Stream.Stream<Item<A>, Error> =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const before = yield* parts.get(principal, sessionId)
      const events = yield* parts.subscribe(principal, sessionId, {
        after: before.headSeq,
        volatile: options.volatile ?? true,
        liveOnly: true
      })
      const accepted = yield* parts.send(principal, sessionId, messageOf(input))
      return turnOf(events, accepted.inputId).pipe(
        Stream.mapEffect((item): Effect.Effect<Item<A>, Error> =>
          item._tag === "done"
            ? Effect.flatMap(parts.resultOf(sessionId, item.ended), (result) => answer(result, options.output))
            : Effect.succeed(item)
        )
      )
    }))

  return { prompt, promptStream }
}
