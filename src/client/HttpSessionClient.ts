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
 * @since 0.3.0
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../http/Api.js"
import type * as Http from "../http/Api.js"
import type * as Messages from "../protocol/Messages.js"
import type { CallbackKind, PendingCallback } from "../schema/Callback.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { InvalidCallbackAnswer } from "../schema/Errors.js"
import type { ListScope, Session } from "../schema/Session.js"
import { type ApiFailure, type HttpSessionClientError, toClientError } from "./http/Errors.js"
import * as Callbacks from "./http/Callbacks.js"
import * as EventStream from "./http/EventStream.js"
import type { Handler, ListOptions, SessionsApi } from "./session/Api.js"
import { type ReconnectOptions, reconnectSchedule } from "./session/Reconnect.js"

export { type HttpSessionClientError } from "./http/Errors.js"

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

/** A list scope as the query string writes it. */
const scopeParam = (scope: ListScope | undefined): string | undefined =>
  scope === undefined || scope === "roots" ? scope : "children" in scope ? `children:${scope.children}` : `tree:${scope.tree}`

/** `http://HOST:PORT` without a trailing slash. */
const baseOf = (url: string): string => url.replace(/\/+$/, "")

/**
 * The client of the daemon at `url` (`http://HOST:PORT`). Building it sends
 * nothing; each call is one request (an event stream, one per connection).
 */
export const make = (url: string, options: HttpOptions = {}): Effect.Effect<HttpSessionClient> =>
  Effect.gen(function*() {
    const base = baseOf(url)
    const token = options.token
    const custom = options.fetch
    // The fetch is read from the context of each request: provided there, it is this client's alone.
    const http = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest(HttpClientRequest.prependUrl(base)),
      token === undefined ? (client) => client : HttpClient.mapRequest(HttpClientRequest.bearerToken(token)),
      custom === undefined ? (client) => client : HttpClient.transform((effect) => Effect.provideService(effect, FetchHttpClient.Fetch, custom))
    )
    const api = yield* HttpApiClient.makeWith(Api, { httpClient: http })
    const reconnect = options.reconnect === false ? undefined : reconnectSchedule(options.reconnect)
    /** A call of endpoint `name`, its failures as this client's errors. */
    const call = <A>(name: string, effect: Effect.Effect<A, ApiFailure>) =>
      Effect.mapError(effect, toClientError(base, name))
    const session = (name: string, effect: Effect.Effect<{ readonly session: Session }, ApiFailure>) =>
      Effect.map(call(name, effect), (answer) => answer.session)
    const update = (sessionId: SessionId, payload: UpdateOptions) =>
      session("update", api.sessions.update({ path: { id: sessionId }, payload }))

    const client: HttpSessionClient = {
      url: base,
      agents: Effect.map(call("agents", api.agents.list()), (page) => page.items),
      create: (o) =>
        session("create", api.sessions.create({
          payload: { agent: o.agent, title: o.title, budgets: o.budgets, metadata: o.metadata as typeof Messages.SessionCreate.Type["metadata"] },
          headers: { "idempotency-key": o.idempotencyKey }
        })),
      get: (sessionId) => session("get", api.sessions.get({ path: { id: sessionId } })),
      list: (o: ListOptions = {}) =>
        Effect.map(
          call("list", api.sessions.list({
            urlParams: { scope: scopeParam(o.scope), includeArchived: o.includeArchived, cursor: o.cursor, limit: o.limit }
          })),
          // The page as the socket gives it (HTTP adds summaries only when asked, and this does not ask).
          ({ summaries: _, ...page }) => page
        ),
      send: (sessionId, o) =>
        call("send", api.sessions.send({
          path: { id: sessionId },
          payload: { text: o.text, mode: o.mode, source: o.source },
          headers: { "idempotency-key": o.inputId }
        })),
      interrupt: (sessionId, expectedTurnId, reason) =>
        call("interrupt", api.sessions.interrupt({ path: { id: sessionId }, payload: { expectedTurnId, reason } })),
      update,
      rename: (sessionId, title) => update(sessionId, { title }),
      archive: (sessionId, archived) => update(sessionId, { archived }),
      close: (sessionId) => session("close", api.sessions.close({ path: { id: sessionId } })),
      children: (sessionId, o = {}) =>
        call("children", api.sessions.children({ path: { id: sessionId }, urlParams: { cursor: o.cursor, limit: o.limit } })),
      tree: (sessionId, o = {}) =>
        call("tree", api.sessions.tree({ path: { id: sessionId }, urlParams: { includeArchived: o.includeArchived } })),
      snapshot: (sessionId) =>
        Effect.map(call("snapshot", api.sessions.snapshot({ path: { id: sessionId } })), (answer) => answer.snapshot),
      awaitTurn: (sessionId, turnId, o = {}) =>
        call("turn", api.sessions.turn({ path: { id: sessionId, turnId }, urlParams: { wait: o.wait } })),
      callbacks: (sessionId) =>
        Effect.map(call("callbacks", api.callbacks.list({ path: { id: sessionId } })), (answer) => answer.items),
      answerCallback: (sessionId, answer) =>
        Effect.asVoid(call("answer", api.callbacks.answer({
          path: { id: sessionId, callbackId: answer.callbackId },
          payload: { result: answer.result as typeof Messages.JsonData.Type, turnId: answer.turnId, operationId: answer.operationId }
        }))),
      events: (sessionId, o = {}) => EventStream.events(http, base, sessionId, o, reconnect),
      provideCallbacks: (sessionId, kinds, handler) =>
        Callbacks.provide(http, base, sessionId, kinds, handler, client.answerCallback, reconnect)
    }
    return client
  }).pipe(Effect.provide(FetchHttpClient.layer))
