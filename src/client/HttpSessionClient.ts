/**
 * The typed HTTP client of a troupe daemon (HTTP.md), in the Effect form:
 * the `Sessions` API over `/v1`, derived from the same `HttpApi`
 * declarations the daemon serves (`HttpApiClient.make(Api)`), so the two
 * cannot drift apart.
 *
 * It offers what the socket client offers, under the same names and with
 * the same error kinds (`SessionsApi`: `create`, `list`, `get`, `send`,
 * `interrupt`, `rename`, `archive`, `close`, `children`, `tree`, `snapshot`,
 * `events`, `answerCallback`, `agents`), and what only HTTP has: `update`
 * (title and archived at once), `awaitTurn` (a bounded long-poll),
 * `callbacks` (a session's pending callbacks) and `provideCallbacks` (the
 * provider stream, as the socket client's).
 *
 * - Errors: a problem+json answer is a `ServerError` of its `kind`, as a
 *   `core.error` is on the socket; a daemon that cannot be reached is a
 *   `ConnectError` (`http/Errors`).
 * - `events` reads the Server-Sent Events and resumes by itself after a
 *   drop from the last cursor (`Last-Event-ID`), as `reconnectSchedule`
 *   allows; a record kind or field this client does not know passes through
 *   as `ForwardCompatible.Unknown` (`http/EventStream`).
 * - A send's `inputId` and a create's `idempotencyKey` go as the
 *   `Idempotency-Key` header, so a retried call does nothing twice.
 *
 * It runs on `fetch` (`FetchHttpClient`): nothing of Node's HTTP server or
 * of the runtime, so it works wherever `fetch` does. The Promise form is
 * `HttpPromiseClient`.
 *
 * The implementation (`http/Client`, with `@effect/platform`'s HTTP client
 * and the API's declarations) loads when `make` runs, so importing the
 * package or `troupe/client` does not pay for it.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import type { HttpOptions, HttpSessionClient } from "./http/Api.js"

export type { HttpOptions, HttpSessionClient, TurnAnswer, TurnView, UpdateOptions } from "./http/Api.js"
export type { HttpSessionClientError } from "./http/Errors.js"

/**
 * The client of the daemon at `url` (`http://HOST:PORT`). Building it sends
 * nothing; each call is one request (an event stream, one per connection).
 */
export const make = (url: string, options: HttpOptions = {}): Effect.Effect<HttpSessionClient> =>
  Effect.flatMap(Effect.promise(() => import("./http/Client.js")), (Client) => Client.make(url, options))
