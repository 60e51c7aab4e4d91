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
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import type { PendingCallback } from "../schema/Callback.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { Session } from "../schema/Session.js"
import type { HttpSessionClientError } from "./http/Errors.js"
import * as HttpSessionClient from "./HttpSessionClient.js"
import { PromiseSessions, runPromise } from "./PromiseSessions.js"

/**
 * The Promise API of the HTTP client: the same operations as
 * `PromiseClient` where both have them, and `update`, `awaitTurn` and
 * `callbacks`. `disconnect()` ends every open event iterator and provider.
 */
export class HttpPromiseClient extends PromiseSessions<HttpSessionClientError, HttpSessionClient.HttpSessionClient> {
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

  /** Sets the title, archived, or both. */
  update(sessionId: SessionId, options: HttpSessionClient.UpdateOptions): Promise<Session> {
    return runPromise(this.client.update(sessionId, options))
  }

  /** Waits up to `wait` seconds (0 to 60) for the turn to end: its end, or `{ status: "running" }`. */
  awaitTurn(sessionId: SessionId, turnId: TurnId, options?: { readonly wait?: number | undefined }): Promise<HttpSessionClient.TurnAnswer> {
    return runPromise(this.client.awaitTurn(sessionId, turnId, options))
  }

  /** The session's pending callbacks. */
  callbacks(sessionId: SessionId): Promise<ReadonlyArray<PendingCallback>> {
    return runPromise(this.client.callbacks(sessionId))
  }
}

/** The Promise client of the daemon at `url` (`http://HOST:PORT`); see `HttpSessionClient.make`. */
export const connect = (url: string, options: HttpSessionClient.HttpOptions = {}): Promise<HttpPromiseClient> =>
  HttpPromiseClient.open(url, options)
