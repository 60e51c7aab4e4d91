/**
 * The HTTP API as code (HTTP.md): one `HttpApi` of groups and endpoints over
 * troupe's own schemas. The daemon's routes (`server/HttpRoutes`), the
 * OpenAPI 3.1 document at `/openapi.json` (`OpenApi.fromApi(Api)`) and the
 * typed client (`client/HttpSessionClient`) are all derived from it, so they
 * cannot drift apart.
 *
 * The two event streams (`events`, `callbacks/stream`) are declared here with
 * a `text/event-stream` answer; the server implements them with a streamed
 * body (`HttpEvents`), the client reads them with `Sse`.
 *
 * Like the client, this module knows only the schemas: nothing of the runtime.
 *
 * @since 0.3.0
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import * as Messages from "../protocol/Messages.js"
import { Usage } from "../schema/Budget.js"
import { PendingCallback } from "../schema/Callback.js"
import { CallbackId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import { Session } from "../schema/Session.js"
import * as Problem from "./Problem.js"

/** The principal a request acts for, provided by the `Authorization` middleware. */
export class CurrentPrincipal extends Context.Tag("troupe/http/CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/** Bearer-token authentication of every `/v1` endpoint (trusted-local listeners accept no token, see HTTP.md). */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("troupe/http/Authorization", {
  failure: Problem.Unauthorized,
  provides: CurrentPrincipal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/** `text/event-stream`: the answer of the two stream endpoints. */
export const EventStream = Schema.String.pipe(
  HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }),
  Schema.annotations({ description: "Server-Sent Events (HTTP.md, \"Event streams\")" })
)

const sessionPath = Schema.Struct({ id: SessionId })

/** `true`/`false` in a query string. */
const BooleanParam = Schema.optional(Schema.BooleanFromString)

/** The `Idempotency-Key` header (the `idempotencyKey` of a create, the `inputId` of a message). */
const IdempotencyHeaders = Schema.Struct({ "idempotency-key": Schema.optional(Schema.String) })

/** `{ session }`. */
export const SessionAnswer = Schema.Struct({ session: Session })

/** `POST /v1/sessions`; an `Idempotency-Key` header wins over `idempotencyKey` in the body. */
export const CreateBody = Messages.SessionCreate

/** `PATCH /v1/sessions/{id}`: metadata only. */
export const PatchBody = Schema.Struct({ title: Schema.optional(Schema.String), archived: Schema.optional(Schema.Boolean) })

/** `POST /v1/sessions/{id}/messages`. */
export const MessageBody = Schema.Struct({
  text: Schema.String,
  mode: Schema.optional(Schema.Literal("queue", "steer")),
  source: Schema.optional(Schema.String)
})

/** `POST /v1/sessions/{id}/interrupt`. */
export const InterruptBody = Schema.Struct({ expectedTurnId: TurnId, reason: Schema.optional(Schema.String) })

/** `POST /v1/sessions/{id}/callbacks/{callbackId}/answer`. */
export const AnswerBody = Schema.Struct({
  result: Messages.JsonData,
  turnId: Schema.optional(TurnId),
  operationId: Schema.optional(OperationId)
})

/** A turn that ended, however it ended. */
export const TurnView = Schema.Struct({
  sessionId: SessionId,
  turnId: TurnId,
  outcome: Schema.Literal("completed", "failed", "interrupted"),
  output: Schema.optional(Schema.String),
  publicFinalMessage: Schema.optional(Schema.String),
  failureCode: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String),
  usage: Schema.optional(Usage),
  /** The typed failure (`BudgetExhausted { dimension, limit, observed }`, …), when it failed. */
  failure: Schema.optional(Schema.Unknown)
})

/** `200 { turn }`: the turn ended. */
export const TurnEnded = Schema.Struct({ turn: TurnView })

/** `202 { status: "running" }`: still running when the wait ended. */
export const TurnRunning = Schema.Struct({ status: Schema.Literal("running") }).annotations(
  HttpApiSchema.annotations({ status: 202 })
)

/** `{ items }`: a session's pending callbacks. */
export const CallbackList = Schema.Struct({ items: Schema.Array(PendingCallback) })

/** `{ accepted: true }`. */
export const AnswerAccepted = Schema.Struct({ accepted: Schema.Literal(true) })

/** `{ ok: true }`. */
export const Ok = Schema.Struct({ ok: Schema.Literal(true) })

/** `?scope=roots|children:<id>|tree:<id>&includeArchived&cursor&limit&summaries`. */
export const ListParams = Schema.Struct({
  scope: Schema.optional(Schema.String.annotations({ description: "roots (default), children:<id> or tree:<id>" })),
  includeArchived: BooleanParam,
  cursor: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000))),
  summaries: Schema.optional(Schema.BooleanFromString.annotations({ description: "true: each listed session's summary too" }))
})

/** What a listing with `summaries=true` adds for each session: counted from its log up to its `headSeq`. */
export const SessionSummary = Schema.Struct({
  /** The turns it started. */
  turns: Schema.Number,
  /** The tokens its ended turns used. */
  totalTokens: Schema.Number,
  /** Its callbacks still open. */
  pendingCallbacks: Schema.Number
})

/** `GET /v1/sessions`: a page; with `summaries=true`, each listed session's summary by id. */
export const SessionListPage = Schema.Struct({
  ...Messages.SessionPage.fields,
  summaries: Schema.optional(Schema.Record({ key: SessionId, value: SessionSummary }))
})

/** `?after&volatile&follow` of the event stream (a `Last-Event-ID` header wins over `after`). */
export const EventParams = Schema.Struct({
  after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())),
  volatile: BooleanParam,
  follow: BooleanParam
})

/** The health and meta endpoints: no token needed. */
export class Meta extends HttpApiGroup.make("meta")
  .add(HttpApiEndpoint.get("healthz", "/healthz").addSuccess(Ok))
  .add(HttpApiEndpoint.get("readyz", "/readyz").addSuccess(Ok))
  .add(HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(Schema.Unknown.annotations({ description: "This document" })))
{}

/** The agents this daemon serves. */
export class Agents extends HttpApiGroup.make("agents")
  .add(HttpApiEndpoint.get("list", "/v1/agents").addSuccess(Messages.AgentPage))
  .middleware(Authorization)
{}

/** Sessions: the catalog, metadata, messages, turns and reads. */
export class Sessions extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/sessions")
      .setPayload(CreateBody)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(SessionAnswer, { status: 201 })
  )
  .add(HttpApiEndpoint.get("list", "/v1/sessions").setUrlParams(ListParams).addSuccess(SessionListPage))
  .add(HttpApiEndpoint.get("get", "/v1/sessions/:id").setPath(sessionPath).addSuccess(SessionAnswer))
  .add(HttpApiEndpoint.patch("update", "/v1/sessions/:id").setPath(sessionPath).setPayload(PatchBody).addSuccess(SessionAnswer))
  .add(HttpApiEndpoint.post("close", "/v1/sessions/:id/close").setPath(sessionPath).addSuccess(SessionAnswer))
  .add(
    HttpApiEndpoint.post("send", "/v1/sessions/:id/messages")
      .setPath(sessionPath)
      .setPayload(MessageBody)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Messages.SessionAccepted, { status: 202 })
  )
  .add(
    HttpApiEndpoint.post("interrupt", "/v1/sessions/:id/interrupt")
      .setPath(sessionPath)
      .setPayload(InterruptBody)
      .addSuccess(Messages.SessionInterrupted)
  )
  .add(
    HttpApiEndpoint.get("turn", "/v1/sessions/:id/turns/:turnId")
      .setPath(Schema.Struct({ id: SessionId, turnId: TurnId }))
      .setUrlParams(Schema.Struct({ wait: Schema.optional(Schema.NumberFromString.pipe(Schema.between(0, 60))) }))
      .addSuccess(TurnEnded)
      .addSuccess(TurnRunning)
  )
  .add(HttpApiEndpoint.get("snapshot", "/v1/sessions/:id/snapshot").setPath(sessionPath).addSuccess(Messages.SessionSnapshot))
  .add(
    HttpApiEndpoint.get("children", "/v1/sessions/:id/children")
      .setPath(sessionPath)
      .setUrlParams(Schema.Struct({
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 500)))
      }))
      .addSuccess(Messages.SessionChildrenPage)
  )
  .add(
    HttpApiEndpoint.get("tree", "/v1/sessions/:id/tree")
      .setPath(sessionPath)
      .setUrlParams(Schema.Struct({ includeArchived: BooleanParam }))
      .addSuccess(Messages.SessionTree)
  )
  .middleware(Authorization)
{}

/** Callbacks: pending ones, answers, and the provider stream. */
export class Callbacks extends HttpApiGroup.make("callbacks")
  .add(HttpApiEndpoint.get("list", "/v1/sessions/:id/callbacks").setPath(sessionPath).addSuccess(CallbackList))
  .add(
    HttpApiEndpoint.post("answer", "/v1/sessions/:id/callbacks/:callbackId/answer")
      .setPath(Schema.Struct({ id: SessionId, callbackId: CallbackId }))
      .setPayload(AnswerBody)
      .addSuccess(AnswerAccepted)
  )
  .add(
    HttpApiEndpoint.get("stream", "/v1/sessions/:id/callbacks/stream")
      .setPath(sessionPath)
      .setUrlParams(Schema.Struct({ kinds: Schema.optional(Schema.String.annotations({ description: "approval,client_tool" })) }))
      .addSuccess(EventStream)
  )
  .middleware(Authorization)
{}

/** A session's events as Server-Sent Events. */
export class Events extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("events", "/v1/sessions/:id/events")
      .setPath(sessionPath)
      .setUrlParams(EventParams)
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(Schema.String) }))
      .addSuccess(EventStream)
  )
  .middleware(Authorization)
{}

/** The whole API, version 1. Every endpoint may answer any of the problem statuses. */
export class Api extends HttpApi.make("troupe")
  .add(Meta)
  .add(Agents)
  .add(Sessions)
  .add(Callbacks)
  .add(Events)
  .addError(Problem.BadRequest)
  .addError(Problem.Unauthorized)
  .addError(Problem.Forbidden)
  .addError(Problem.NotFound)
  .addError(Problem.MethodNotAllowed)
  .addError(Problem.Conflict)
  .addError(Problem.PayloadTooLarge)
  .addError(Problem.UnsupportedMediaType)
  .addError(Problem.TooManyRequests)
  .addError(Problem.Internal)
  .addError(Problem.Unavailable)
  .annotate(OpenApi.Title, "troupe")
  .annotate(OpenApi.Version, "1")
  .annotate(OpenApi.Description, "The sessions API of a troupe daemon (HTTP.md).")
{}

/** The OpenAPI 3.1 document of `Api`. */
export const openApi = (): OpenApi.OpenAPISpec => OpenApi.fromApi(Api)
