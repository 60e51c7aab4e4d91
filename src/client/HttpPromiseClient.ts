/**
 * The Promise API of `HttpSessionClient`, for plain TypeScript, beside
 * `PromiseClient` (the socket's): `await HttpPromiseClient.connect(url)`
 * resolves with a client whose methods return promises and whose `events`
 * is an async iterator (`PromiseClient.EventIterator`) that resumes by
 * itself after a drop, as the Effect client's stream does. A call rejects
 * with the typed error itself (`ServerError` of a kind, `ConnectError`, …),
 * never a wrapper.
 *
 * Like the Effect client, it runs on `fetch` and knows nothing of the
 * server or the runtime.
 *
 * @since 0.3.0
 */
import { Cause, Effect, ExecutionStrategy, Exit, Option, Scope, Stream } from "effect"
import type { CallbackKind, PendingCallback } from "../schema/Callback.js"
import type { Snapshot } from "../schema/Event.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { Session } from "../schema/Session.js"
import type { HttpSessionClientError } from "./http/Errors.js"
import * as HttpSessionClient from "./HttpSessionClient.js"
import { CallbackProvider, EventIterator, type PromiseHandler } from "./PromiseClient.js"
import type {
  Accepted,
  AgentInfo,
  AnswerOptions,
  ChildrenOptions,
  ChildrenPage,
  CreateOptions,
  EventOptions,
  Interrupted,
  ListOptions,
  SendOptions,
  SessionPage,
  SessionTree
} from "./SessionClient.js"

/** Runs an effect for the Promise API, rejecting with the typed error itself rather than a wrapper. */
const runPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  })

/**
 * The Promise API of the HTTP client: the same operations as
 * `PromiseClient` where both have them, and `update`, `awaitTurn` and
 * `callbacks`. `disconnect()` ends every open event iterator and provider.
 */
export class HttpPromiseClient {
  private constructor(
    /** The Effect API of this same client. */
    readonly client: HttpSessionClient.HttpSessionClient,
    private readonly scope: Scope.CloseableScope
  ) {}

  /** @internal */
  static open(url: string, options: HttpSessionClient.HttpOptions): Promise<HttpPromiseClient> {
    return runPromise(Effect.gen(function*() {
      const client = yield* HttpSessionClient.make(url, options)
      return new HttpPromiseClient(client, yield* Scope.make())
    }))
  }

  /** The daemon's base URL. */
  get url(): string {
    return this.client.url
  }

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

  /** Sets the title, archived, or both. */
  update(sessionId: SessionId, options: HttpSessionClient.UpdateOptions): Promise<Session> {
    return runPromise(this.client.update(sessionId, options))
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

  /** Waits up to `wait` seconds (0 to 60) for the turn to end: its end, or `{ status: "running" }`. */
  awaitTurn(sessionId: SessionId, turnId: TurnId, options?: { readonly wait?: number | undefined }): Promise<HttpSessionClient.TurnAnswer> {
    return runPromise(this.client.awaitTurn(sessionId, turnId, options))
  }

  /** The session's pending callbacks. */
  callbacks(sessionId: SessionId): Promise<ReadonlyArray<PendingCallback>> {
    return runPromise(this.client.callbacks(sessionId))
  }

  answerCallback(sessionId: SessionId, answer: AnswerOptions): Promise<void> {
    return runPromise(this.client.answerCallback(sessionId, answer))
  }

  /** The session's events after `options.after`, then live ones, as an async iterator that resumes after a drop. */
  events(sessionId: SessionId, options?: EventOptions): Promise<EventIterator<HttpSessionClientError>> {
    const stream = this.client.events(sessionId, options)
    return runPromise(Effect.gen(this, function*() {
      const scope = yield* Scope.fork(this.scope, ExecutionStrategy.sequential)
      const pull = yield* Scope.extend(Stream.toPull(stream), scope)
      return new EventIterator(pull, scope)
    }))
  }

  /** Serves callbacks of `kinds` in the session's tree with `handler` until `stop()`. */
  provideCallbacks(sessionId: SessionId, kinds: ReadonlyArray<CallbackKind>, handler: PromiseHandler): CallbackProvider {
    const provider = this.client.provideCallbacks(sessionId, kinds, (callback) =>
      Effect.tryPromise({ try: async () => handler(callback), catch: (error) => error }).pipe(
        Effect.map((result) => (result === undefined ? Option.none() : Option.some(result)))
      ))
    return new CallbackProvider(Effect.runSync(Effect.forkIn(provider, this.scope)))
  }

  /** Ends every event iterator and callback provider of this client. Idempotent. */
  disconnect(): Promise<void> {
    return runPromise(Scope.close(this.scope, Exit.void))
  }
}

/** The Promise client of the daemon at `url` (`http://HOST:PORT`); see `HttpSessionClient.make`. */
export const connect = (url: string, options: HttpSessionClient.HttpOptions = {}): Promise<HttpPromiseClient> =>
  HttpPromiseClient.open(url, options)
