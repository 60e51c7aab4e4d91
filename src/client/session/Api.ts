/**
 * The typed API of `SessionClient`: what a client offers (`SessionClient`)
 * and the options and answers of its calls, as the `Messages` schemas
 * read them.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { ToolsetBinding } from "../../schema/Toolset.js"
import type * as Messages from "../../protocol/Messages.js"
import type { Budgets } from "../../schema/Budget.js"
import type { CallbackKind, Handler } from "../../schema/Callback.js"
import type { InvalidCallbackAnswer } from "../../schema/Errors.js"
import type { Snapshot } from "../../schema/Event.js"
import type { CallbackId, OperationId, SessionId, TurnId } from "../../schema/Ids.js"
import type { Principal } from "../../schema/Principal.js"
import type { Session } from "../../schema/Session.js"
import type * as AgentClient from "../AgentClient.js"
import type * as ForwardCompatible from "../ForwardCompatible.js"
import type { SessionClientError } from "./Errors.js"

/** One agent the daemon serves. */
export type AgentInfo = typeof Messages.AgentInfo.Type

/** What creating a session takes. */
export interface CreateOptions {
  /** The name of one of the daemon's agents (`agents`). */
  readonly agent: string
  readonly title?: string | undefined
  readonly idempotencyKey?: string | undefined
  readonly budgets?: Budgets | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
  /** Toolsets bound to the session beside its agent's, by name or id (only with `tools`, those of them). */
  readonly toolsets?: ReadonlyArray<ToolsetBinding> | undefined
}

/** Which sessions to list. */
export type ListOptions = typeof Messages.SessionList.Type

/** One page of sessions, newest first; pass `nextCursor` back as `cursor` for the next. */
export type SessionPage = typeof Messages.SessionPage.Type

/** A message to send. */
export interface SendOptions {
  readonly text: string
  /** `queue` (default): a new turn, after the running one if any; `steer`: into the running turn. */
  readonly mode?: "queue" | "steer" | undefined
  /** Idempotency key of this send (default: a fresh one); a retry with the same id and text is not sent twice. */
  readonly inputId?: string | undefined
  readonly source?: string | undefined
}

/** What the session did with a message. */
export type Accepted = typeof Messages.SessionAccepted.Type

/** How an interrupt ended. */
export type Interrupted = typeof Messages.SessionInterrupted.Type

/** Where an event subscription starts and what it carries. */
export interface EventOptions {
  /** The cursor of the last event the caller has (default 0: from the beginning). */
  readonly after?: number | undefined
  /** Include assistant deltas (default false). */
  readonly volatile?: boolean | undefined
  /** Keep following live events after the replay (default true). */
  readonly follow?: boolean | undefined
  /**
   * Called each time the stream subscribes again after a drop (a restarted
   * daemon, a cut connection, `slow_consumer`): durable events go on from the
   * last cursor, but the volatile deltas of the gap are gone, and a model call
   * in flight may be made again from its start.
   */
  readonly onResume?: (() => void) | undefined
}

/**
 * One event; `cursor` is set for durable events (resume with `after` = the
 * last one seen). An event this client cannot read (a newer daemon's) is a
 * `ForwardCompatible.Unknown` (docs/protocol.md, "Forward compatibility").
 */
export type EventFrame = ForwardCompatible.EventFrame

/** An answer to an open callback. */
export interface AnswerOptions {
  readonly callbackId: CallbackId
  /** For `approval`: `{ decision, reason? }`; for `client_tool`: `{ output, isError? }`. */
  readonly result: unknown
  readonly turnId?: TurnId | undefined
  readonly operationId?: OperationId | undefined
}

/** A page of a session's direct children (`nextCursor` continues it). */
export type ChildrenPage = typeof Messages.SessionChildrenPage.Type

/** A session and its whole subtree, parents before children. */
export type SessionTree = typeof Messages.SessionTree.Type

/** Which page of children to read: `cursor` from the previous page, `limit` 1 to 500. */
export interface ChildrenOptions {
  readonly cursor?: string | undefined
  readonly limit?: number | undefined
}

/** A provider's handler, typed by the kinds it serves (`Callback.Handler`). */
export type { Handler }

/**
 * What every transport offers, whatever it fails with: the socket client
 * (`SessionClient`) and the HTTP client (`HttpSessionClient`) both are one,
 * so a caller that only reads and drives sessions (the CLI's `sessions`
 * commands) takes this and leaves the choice of transport to one place.
 */
export interface SessionsApi<E> {
  /** The agents the daemon serves. */
  readonly agents: Effect.Effect<ReadonlyArray<AgentInfo>, E>
  readonly create: (options: CreateOptions) => Effect.Effect<Session, E>
  readonly get: (sessionId: SessionId) => Effect.Effect<Session, E>
  readonly list: (options?: ListOptions) => Effect.Effect<SessionPage, E>
  readonly send: (sessionId: SessionId, options: SendOptions) => Effect.Effect<Accepted, E>
  /** Interrupts exactly `expectedTurnId`; another running turn is `turn_mismatch`. */
  readonly interrupt: (sessionId: SessionId, expectedTurnId: TurnId, reason?: string) => Effect.Effect<Interrupted, E>
  readonly rename: (sessionId: SessionId, title: string) => Effect.Effect<Session, E>
  readonly archive: (sessionId: SessionId, archived: boolean) => Effect.Effect<Session, E>
  readonly close: (sessionId: SessionId) => Effect.Effect<Session, E>
  /** The session's direct children, newest first, archived included. */
  readonly children: (sessionId: SessionId, options?: ChildrenOptions) => Effect.Effect<ChildrenPage, E>
  /** The session and every session below it, at most 10,000. */
  readonly tree: (sessionId: SessionId, options?: { readonly includeArchived?: boolean | undefined }) => Effect.Effect<SessionTree, E>
  /** The session with its cursor and pending work. */
  readonly snapshot: (sessionId: SessionId) => Effect.Effect<Snapshot, E>
  /** The session's events after `after`, then live ones, resumed by itself after a drop. */
  readonly events: (sessionId: SessionId, options?: EventOptions) => Stream.Stream<EventFrame, E>
  readonly answerCallback: (sessionId: SessionId, answer: AnswerOptions) => Effect.Effect<void, E>
}

/** The typed API of one connection. */
export interface SessionClient {
  /** The raw connection underneath. */
  readonly connection: AgentClient.Connection
  /** Authenticates the connection (`auth.hello`); not needed on a trusted-local listener. */
  readonly hello: (options?: typeof Messages.AuthHello.Type) => Effect.Effect<Principal, SessionClientError>
  readonly ping: Effect.Effect<void, SessionClientError>
  /** The agents the daemon serves. */
  readonly agents: Effect.Effect<ReadonlyArray<AgentInfo>, SessionClientError>
  readonly create: (options: CreateOptions) => Effect.Effect<Session, SessionClientError>
  readonly get: (sessionId: SessionId) => Effect.Effect<Session, SessionClientError>
  readonly list: (options?: ListOptions) => Effect.Effect<SessionPage, SessionClientError>
  readonly send: (sessionId: SessionId, options: SendOptions) => Effect.Effect<Accepted, SessionClientError>
  /** Interrupts exactly `expectedTurnId`; another running turn is `turn_mismatch`. */
  readonly interrupt: (
    sessionId: SessionId,
    expectedTurnId: TurnId,
    reason?: string
  ) => Effect.Effect<Interrupted, SessionClientError>
  readonly rename: (sessionId: SessionId, title: string) => Effect.Effect<Session, SessionClientError>
  readonly archive: (sessionId: SessionId, archived: boolean) => Effect.Effect<Session, SessionClientError>
  readonly close: (sessionId: SessionId) => Effect.Effect<Session, SessionClientError>
  /** The session's direct children, newest first, archived included (`session.children`). */
  readonly children: (sessionId: SessionId, options?: ChildrenOptions) => Effect.Effect<ChildrenPage, SessionClientError>
  /** The session and every session below it, at most 10,000 (`session.tree`). */
  readonly tree: (
    sessionId: SessionId,
    options?: { readonly includeArchived?: boolean | undefined }
  ) => Effect.Effect<SessionTree, SessionClientError>
  /** The session with its cursor and pending work. */
  readonly snapshot: (sessionId: SessionId) => Effect.Effect<Snapshot, SessionClientError>
  /** The session's events after `after`, then live ones; see the module doc for how it ends. */
  readonly events: (sessionId: SessionId, options?: EventOptions) => Stream.Stream<EventFrame, SessionClientError>
  readonly answerCallback: (sessionId: SessionId, answer: AnswerOptions) => Effect.Effect<void, SessionClientError>
  /**
   * Serves callbacks of `kinds` in the session's tree until interrupted, or
   * until the server ends it; an answer of the wrong shape for its kind ends
   * it with `InvalidCallbackAnswer` (nothing is sent: the callback stays open).
   */
  readonly provideCallbacks: <E, K extends CallbackKind = CallbackKind>(
    sessionId: SessionId,
    kinds: ReadonlyArray<K>,
    handler: Handler<E, K>
  ) => Effect.Effect<void, E | InvalidCallbackAnswer | SessionClientError>
}
