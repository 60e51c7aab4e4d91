/**
 * The Promise API of `SessionClient`, for plain TypeScript: the one edge where
 * troupe runs an Effect for its caller. `await PromiseClient.connect(path)`
 * (or `connectTcp`, `connectNamed`) resolves with a `PromiseClient` whose
 * methods return promises, whose `events` is an async iterator and whose
 * `provideCallbacks` takes an async handler. It is the Effect client
 * underneath (`client`), so it reconnects and resumes the same way; a call
 * rejects with the typed error itself (`ServerError`, `Closed`,
 * `InvalidInput`, …), never a wrapper.
 *
 * Like `SessionClient`, this module speaks the wire only.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type * as Messages from "../protocol/Messages.js"
import type { Principal } from "../schema/Principal.js"
import { PromiseSessions, runPromise } from "./PromiseSessions.js"
import * as SessionClient from "./SessionClient.js"
import type { ConnectOptions, SessionClientError } from "./SessionClient.js"

export { CallbackProvider, EventIterator, type PromiseHandler } from "./PromiseSessions.js"

/**
 * The Promise API of `SessionClient`, for plain TypeScript: the same
 * operations returning promises, `events` as an async iterator, and
 * `provideCallbacks` with an async handler. It reconnects as the Effect API
 * does. `disconnect()` when done (a session is closed with `close(sessionId)`).
 */
export class PromiseClient extends PromiseSessions<SessionClientError, SessionClient.SessionClient> {
  /** @internal */
  static open<E>(effect: Effect.Effect<SessionClient.SessionClient, E, Scope.Scope>): Promise<PromiseClient> {
    return runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const client = yield* Scope.extend(effect, scope).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
      return new PromiseClient(client, scope)
    }))
  }

  /** Where it is connected now (`unix:<path>` or `tcp:<host>:<port>`). */
  get address(): string {
    return this.client.connection.address
  }

  /** Authenticates the connection (`auth.hello`); `connect` does it when given a token. */
  hello(options: typeof Messages.AuthHello.Type = {}): Promise<Principal> {
    return runPromise(this.client.hello(options))
  }

  ping(): Promise<void> {
    return runPromise(this.client.ping)
  }
}

/** Connects to a unix socket; see `SessionClient.connect`. */
export const connect = (path: string, options?: ConnectOptions): Promise<PromiseClient> =>
  PromiseClient.open(SessionClient.connect(path, options))

/** Connects over TCP; see `SessionClient.connectTcp`. */
export const connectTcp = (host: string, port: number, options?: ConnectOptions): Promise<PromiseClient> =>
  PromiseClient.open(SessionClient.connectTcp(host, port, options))

/** Connects to the daemon named `name` (see `Naming.socketPath`); see `SessionClient.connectNamed`. */
export const connectNamed = (name: string, options?: ConnectOptions): Promise<PromiseClient> =>
  PromiseClient.open(SessionClient.connectNamed(name, options))
