/**
 * What the Promise clients share (`PromiseClient` over the socket,
 * `HttpPromiseClient` over HTTP): running an Effect for the caller, events as
 * an async iterator, callback providers with an async handler, and the
 * sessions API as promises over any transport's `SessionsApi`.
 *
 * @since 0.3.0
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { AnswerOf, CallbackKind, CallbackOf } from "../schema/Callback.js"
import type { Snapshot } from "../schema/Event.js"
import type { InvalidCallbackAnswer } from "../schema/Errors.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { Session } from "../schema/Session.js"
import type {
  Accepted,
  AgentInfo,
  AnswerOptions,
  ChildrenOptions,
  ChildrenPage,
  CreateOptions,
  EventFrame,
  EventOptions,
  Handler,
  Interrupted,
  ListOptions,
  SendOptions,
  SessionsApi,
  SessionPage,
  SessionTree
} from "./session/Api.js"
import * as LazyStream from "./LazyStream.js"
import type { SessionClientError } from "./session/Errors.js"

/** Runs an effect for the Promise API, rejecting with the typed error itself rather than a wrapper. */
export const runPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  })

/**
 * A callback handler for the Promise API, typed by the kinds it serves: an
 * answer of the callback's kind answers, `undefined` leaves the callback to
 * others; an answer of the wrong shape rejects the provider's `done` with
 * `InvalidCallbackAnswer`.
 */
export type PromiseHandler<K extends CallbackKind = CallbackKind> = (
  callback: CallbackOf<K>
) => AnswerOf<K> | undefined | Promise<AnswerOf<K> | undefined>

/**
 * An event subscription of the Promise API: an async iterator of `EventFrame`
 * that resumes by itself as `events` does. Leaving early (`break`, `close()`)
 * sends `session.events.cancel`.
 */
export class EventIterator<E = SessionClientError> implements AsyncIterableIterator<EventFrame> {
  private buffer: ReadonlyArray<EventFrame> = []
  private index = 0
  private finished = false

  /** @internal */
  constructor(
    private readonly pull: Effect.Effect<Chunk.Chunk<EventFrame>, Option.Option<E>>,
    private readonly scope: Scope.CloseableScope
  ) {}

  /** The next event; rejects with the stream's error (`ServerError`, `Closed`, …). */
  async next(): Promise<IteratorResult<EventFrame>> {
    while (this.index >= this.buffer.length) {
      if (this.finished) return { done: true, value: undefined }
      const exit = await Effect.runPromiseExit(this.pull)
      if (Exit.isSuccess(exit)) {
        this.buffer = Chunk.toReadonlyArray(exit.value)
        this.index = 0
        continue
      }
      await this.close()
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure)) {
        if (Option.isNone(failure.value)) return { done: true, value: undefined }
        throw failure.value.value
      }
      throw Cause.squash(exit.cause)
    }
    return { done: false, value: this.buffer[this.index++]! }
  }

  /** Stops the iteration (a `break` out of `for await` calls this). */
  async return(): Promise<IteratorResult<EventFrame>> {
    await this.close()
    return { done: true, value: undefined }
  }

  /** Ends the subscription. Idempotent. */
  close(): Promise<void> {
    this.finished = true
    this.buffer = []
    this.index = 0
    return runPromise(Scope.close(this.scope, Exit.void))
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<EventFrame> {
    return this
  }
}

/** A callback provider of the Promise API. */
export class CallbackProvider {
  /** Settles when the provider stops: resolves after `stop()` or when the server ends it, rejects with its error. */
  readonly done: Promise<void>

  /** @internal */
  constructor(private readonly fiber: Fiber.RuntimeFiber<void, unknown>) {
    this.done = runPromise(Effect.flatMap(Fiber.await(fiber), (exit) =>
      Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause) ? Effect.failCause(exit.cause) : Effect.void
    ))
  }

  /** Withdraws the provider (`callback.provide.cancel`). */
  stop(): Promise<void> {
    return runPromise(Effect.asVoid(Fiber.interrupt(this.fiber)))
  }
}

/** A transport's sessions API with its callback provider: what a Promise client wraps. */
export interface Wrapped<E> extends SessionsApi<E> {
  readonly provideCallbacks: <H, K extends CallbackKind = CallbackKind>(
    sessionId: SessionId,
    kinds: ReadonlyArray<K>,
    handler: Handler<H, K>
  ) => Effect.Effect<void, H | InvalidCallbackAnswer | E>
}

/**
 * The sessions API as promises over `client`; what a transport adds (hello,
 * awaitTurn, …) its Promise client adds. Event iterators and providers live in
 * `scope`, which `disconnect()` closes.
 */
export abstract class PromiseSessions<E, C extends Wrapped<E> = Wrapped<E>> {
  /** @internal */
  protected constructor(
    /** The Effect API of this same client. */
    readonly client: C,
    /** @internal */
    protected readonly scope: Scope.CloseableScope
  ) {}

  /** The agents the daemon serves. */
  agents(): Promise<ReadonlyArray<AgentInfo>> {
    return runPromise(this.client.agents)
  }

  create(options: CreateOptions): Promise<Session> {
    return runPromise(this.client.create(options))
  }

  get(sessionId: SessionId): Promise<Session> {
    return runPromise(this.client.get(sessionId))
  }

  list(options?: ListOptions): Promise<SessionPage> {
    return runPromise(this.client.list(options))
  }

  send(sessionId: SessionId, options: SendOptions): Promise<Accepted> {
    return runPromise(this.client.send(sessionId, options))
  }

  /** Interrupts exactly `expectedTurnId`; another running turn is `turn_mismatch`. */
  interrupt(sessionId: SessionId, expectedTurnId: TurnId, reason?: string): Promise<Interrupted> {
    return runPromise(this.client.interrupt(sessionId, expectedTurnId, reason))
  }

  rename(sessionId: SessionId, title: string): Promise<Session> {
    return runPromise(this.client.rename(sessionId, title))
  }

  archive(sessionId: SessionId, archived: boolean): Promise<Session> {
    return runPromise(this.client.archive(sessionId, archived))
  }

  /** Closes the session (not the client: that is `disconnect`). */
  close(sessionId: SessionId): Promise<Session> {
    return runPromise(this.client.close(sessionId))
  }

  /** The session's direct children, newest first, archived included. */
  children(sessionId: SessionId, options?: ChildrenOptions): Promise<ChildrenPage> {
    return runPromise(this.client.children(sessionId, options))
  }

  /** The session and every session below it, at most 10,000. */
  tree(sessionId: SessionId, options?: { readonly includeArchived?: boolean | undefined }): Promise<SessionTree> {
    return runPromise(this.client.tree(sessionId, options))
  }

  /** The session with its cursor and pending work. */
  snapshot(sessionId: SessionId): Promise<Snapshot> {
    return runPromise(this.client.snapshot(sessionId))
  }

  /** The session's events after `options.after`, then live ones, as an async iterator that resumes after a drop. */
  events(sessionId: SessionId, options?: EventOptions): Promise<EventIterator<E>> {
    const stream = this.client.events(sessionId, options)
    return runPromise(Effect.gen(this, function*() {
      const scope = yield* Scope.fork(this.scope, ExecutionStrategy.sequential)
      const Stream = yield* LazyStream.load
      const pull = yield* Scope.extend(Stream.toPull(stream), scope)
      return new EventIterator<E>(pull, scope)
    }))
  }

  answerCallback(sessionId: SessionId, answer: AnswerOptions): Promise<void> {
    return runPromise(this.client.answerCallback(sessionId, answer))
  }

  /** Serves callbacks of `kinds` in the session's tree with `handler` until `stop()`. */
  provideCallbacks<K extends CallbackKind>(sessionId: SessionId, kinds: ReadonlyArray<K>, handler: PromiseHandler<K>): CallbackProvider {
    const provider = this.client.provideCallbacks<unknown, K>(sessionId, kinds, (callback) =>
      Effect.tryPromise({ try: async () => handler(callback), catch: (error) => error }).pipe(
        Effect.map((result) => (result === undefined ? Option.none() : Option.some(result)))
      ))
    return new CallbackProvider(Effect.runSync(Effect.forkIn(provider, this.scope)))
  }

  /** Ends every event iterator and callback provider of this client (and the socket client's connection). Idempotent. */
  disconnect(): Promise<void> {
    return runPromise(Scope.close(this.scope, Exit.void))
  }
}
