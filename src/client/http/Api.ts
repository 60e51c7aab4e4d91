/**
 * What the HTTP client is (`HttpSessionClient`): its options and its API,
 * apart from its implementation (`http/Client`), which loads when a client is
 * made.
 *
 * @since 0.3.0
 */
import type * as Effect from "effect/Effect"
import type * as Http from "../../http/Api.js"
import type { CallbackKind, PendingCallback } from "../../schema/Callback.js"
import type { InvalidCallbackAnswer } from "../../schema/Errors.js"
import type { SessionId, TurnId } from "../../schema/Ids.js"
import type { Session } from "../../schema/Session.js"
import type { HttpSessionClientError } from "./Errors.js"
import type { Handler, SessionsApi } from "../session/Api.js"
import type { ReconnectOptions } from "../session/Reconnect.js"

export type { HttpSessionClientError } from "./Errors.js"

/** How to reach the daemon. */
export interface HttpOptions {
  /** A bearer token (none: the listener must be trusted-local). */
  readonly token?: string | undefined
  /** How an event stream reconnects after a drop (`false`: never; the default: `reconnectDefaults`). */
  readonly reconnect?: ReconnectOptions | false | undefined
  /** The `fetch` to use (default: the global one), for a proxy agent or a test. */
  readonly fetch?: typeof globalThis.fetch | undefined
}

/** `PATCH /v1/sessions/{id}`: the title, archived, or both. */
export type UpdateOptions = typeof Http.PatchBody.Type

/** A turn that ended, however it ended (`outcome`, `output`, `failure`, …). */
export type TurnView = typeof Http.TurnView.Type

/** What `awaitTurn` answers: the turn's end, or `running` when the wait ended first. */
export type TurnAnswer = typeof Http.TurnEnded.Type | typeof Http.TurnRunning.Type

/** The HTTP client: the socket client's `SessionsApi`, and what only HTTP offers. */
export interface HttpSessionClient extends SessionsApi<HttpSessionClientError> {
  /** The daemon's base URL (`http://127.0.0.1:7070`). */
  readonly url: string
  /** Sets the title, archived, or both (`PATCH`). */
  readonly update: (sessionId: SessionId, options: UpdateOptions) => Effect.Effect<Session, HttpSessionClientError>
  /** Waits up to `wait` seconds (0 to 60, default 0) for the turn to end. */
  readonly awaitTurn: (
    sessionId: SessionId,
    turnId: TurnId,
    options?: { readonly wait?: number | undefined }
  ) => Effect.Effect<TurnAnswer, HttpSessionClientError>
  /** The session's pending callbacks. */
  readonly callbacks: (sessionId: SessionId) => Effect.Effect<ReadonlyArray<PendingCallback>, HttpSessionClientError>
  /** Serves callbacks of `kinds` in the session's tree until interrupted, or until the server ends it (`callbacks/stream`). */
  readonly provideCallbacks: <E, K extends CallbackKind = CallbackKind>(
    sessionId: SessionId,
    kinds: ReadonlyArray<K>,
    handler: Handler<E, K>
  ) => Effect.Effect<void, E | InvalidCallbackAnswer | HttpSessionClientError>
}

