/**
 * The implementation of `HttpSessionClient.make`: the client derived from the
 * API's declarations (`HttpApiClient.make(Api)`) on `fetch`. Loaded when a
 * client is made (`HttpSessionClient` holds the types).
 *
 * @since 0.3.0
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import * as Effect from "effect/Effect"
import { Api } from "../../http/Api.js"
import type * as Messages from "../../protocol/Messages.js"
import type { SessionId } from "../../schema/Ids.js"
import type { ListScope, Session } from "../../schema/Session.js"
import type { ListOptions } from "../session/Api.js"
import { reconnectSchedule } from "../session/Reconnect.js"
import type { HttpOptions, HttpSessionClient, UpdateOptions } from "./Api.js"
import * as Callbacks from "./Callbacks.js"
import { type ApiFailure, toClientError } from "./Errors.js"
import * as EventStream from "./EventStream.js"

/** A list scope as the query string writes it. */
const scopeParam = (scope: ListScope | undefined): string | undefined =>
  scope === undefined || scope === "roots" ? scope : "children" in scope ? `children:${scope.children}` : `tree:${scope.tree}`

/** `http://HOST:PORT` without a trailing slash. */
const baseOf = (url: string): string => url.replace(/\/+$/, "")

/** The client of the daemon at `url`: see `HttpSessionClient.make`. */
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
