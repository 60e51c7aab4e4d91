/**
 * The typed client tier: the `Sessions` API of a remote daemon, over an
 * `AgentClient` connection. Requests and answers are the `Messages` schemas
 * (PROTOCOL.md, "Message types"); a `core.error` answer is a `ServerError`
 * with its kind, so callers match on `kind` (`not_found`, `stale_callback`,
 * `turn_mismatch`, …) rather than on text.
 *
 * - `events` is an Effect `Stream` of `session.event` frames. It resumes by
 *   itself from the server's cursor when the server ends it as a slow
 *   consumer, and it ends when the replay is done (`follow: false`) or the
 *   session closes. Stopping it early sends `session.events.cancel`.
 * - `provideCallbacks` serves callbacks until interrupted (it then sends
 *   `callback.provide.cancel`): each `callback.open` goes to the handler, and
 *   a `Some` result is sent with `callback.answer` (an answer someone else
 *   beat is dropped, as an in-process provider's is).
 *
 * A client made by `connect` (or `connectTcp`, `connectNamed`) owns its
 * connection and knows how to open another: same address, same hello. When
 * the connection drops, event streams subscribe again on a new connection
 * with `after` = the last durable cursor they delivered (no gap, no
 * duplicate), providers register again, and the next request reconnects;
 * attempts follow `reconnectSchedule` (exponential, capped, bounded). A
 * request caught by the drop is sent again on the new connection when that
 * is harmless (reads, `rename`, `archive`, `send` under its input id,
 * `create` with an idempotency key); `create` without one, `close`,
 * `interrupt` and `answerCallback` fail with `Closed` instead, since they may
 * or may not have taken effect. A client made by `make` over a caller's
 * connection never reconnects.
 *
 * A client whose own telemetry is off says so in its `auth.hello`
 * (`excludeFromAnalytics`): `telemetryEnabled` in the options, read from
 * `TROUPE_TELEMETRY_ENABLED` when not given.
 *
 * The Promise API, for plain TypeScript, is `PromiseClient` (its own module:
 * the one place where an Effect is run for the caller).
 *
 * Like the raw tier, this module speaks the wire only: it imports the codec
 * and the schemas, never the runtime (test/Layout.test.ts).
 *
 * The parts live in `session/`, one module per concern: the API's types
 * (`Api`), its errors (`Errors`), the wire (`Codec`), connections and their
 * replacement (`Link`, `Reconnect`), requests (`Requests`), stream exchanges
 * (`Streams`), event streams (`Events`) and callbacks (`Callbacks`), put
 * together by `Client`. This module is their public face.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Naming from "../protocol/Naming.js"
import type { InvalidName } from "../protocol/ProtocolError.js"
import * as AgentClient from "./AgentClient.js"
import type { SessionClient } from "./session/Api.js"
import type { SessionClientError } from "./session/Errors.js"
import { type ConnectOptions, connectWith } from "./session/Reconnect.js"

// Re-exported from the parts, each documented where it is declared.
export type {
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
  SessionClient,
  SessionPage,
  SessionsApi,
  SessionTree
} from "./session/Api.js"
export { make } from "./session/Client.js"
export { ServerError, type SessionClientError, UnexpectedAnswer } from "./session/Errors.js"
export {
  type ConnectOptions,
  reconnectDefaults,
  type ReconnectOptions,
  reconnectSchedule,
  telemetryEnabled
} from "./session/Reconnect.js"

/**
 * Connects to a unix socket and authenticates when given a token: a scoped
 * `SessionClient`. When the connection drops, the next call (and every open
 * event stream or callback provider) connects again with the same options,
 * retrying with `reconnectSchedule`.
 */
export const connect = (
  path: string,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  connectWith(AgentClient.make(path, options), options)

/** `connect` over TCP. */
export const connectTcp = (
  host: string,
  port: number,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  connectWith(AgentClient.makeTcp(host, port, options), options)

/** `connect` to the daemon named `name` (see `Naming.socketPath`). */
export const connectNamed = (
  name: string,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | InvalidName | SessionClientError, Scope.Scope> =>
  Effect.flatMap(
    Naming.socketPath(name).pipe(
      Effect.catchTag("ConfigError", (error) => Effect.fail(new AgentClient.ConnectError({ address: name, reason: error.message })))
    ),
    (path) => connect(path, options)
  )
