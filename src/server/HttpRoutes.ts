/**
 * The handlers of the HTTP API (`http/Api`): every endpoint maps onto the
 * `Sessions` API on behalf of the request's principal, as the socket's
 * routes do (`SessionRoutes`): the same calls, the same error kinds
 * (`SessionRoutes.toWireError`, then the status HTTP.md gives each kind), so
 * nothing behaves differently because a command came over HTTP.
 *
 * @since 0.3.0
 */
import { HttpApiBuilder } from "@effect/platform"
import { refsOf } from "../schema/Toolset.js"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { Api, Authorization, CurrentPrincipal, openApi } from "../http/Api.js"
import type * as Http from "../http/Api.js"
import * as Problem from "../http/Problem.js"
import type { CallbackKind } from "../schema/Callback.js"
import type { BudgetExhausted, TurnFailed, TurnInterrupted, TurnNotFound } from "../schema/Errors.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import type { ListScope } from "../schema/Session.js"
import { SessionId as SessionIdSchema } from "../schema/Ids.js"
import type { SessionStore } from "../services/SessionStore.js"
import type { Authenticator } from "./Authenticator.js"
import type { Streams } from "./HttpEvents.js"
import * as SessionSummaries from "./SessionSummaries.js"
import { type DomainError, type Deps, toWireError } from "./SessionRoutes.js"

/** A domain error as the problem the socket's kind maps to. */
export const problemOf = (error: DomainError): Problem.Problem => {
  const wire = toWireError(error)
  return Problem.ofKind(wire.kind, wire.message, { retryable: wire.retryable, details: wire.details })
}

/** Runs a `Sessions` call; its domain errors become problems. */
const call = <A, E extends DomainError | Problem.Problem>(effect: Effect.Effect<A, E>): Effect.Effect<A, Problem.Problem> =>
  Effect.mapError(effect, (error) => (Problem.isProblem(error) ? error : problemOf(error as DomainError)))

const decodeSessionId = Schema.decodeUnknownEither(SessionIdSchema)

/** `roots` | `children:<id>` | `tree:<id>` as a list scope. */
const scopeOf = (text: string | undefined): Effect.Effect<ListScope, Problem.Problem> => {
  if (text === undefined || text === "roots") return Effect.succeed("roots")
  const at = text.indexOf(":")
  const kind = text.slice(0, at)
  const id = decodeSessionId(text.slice(at + 1))
  if (at > 0 && (kind === "children" || kind === "tree") && id._tag === "Right") {
    return Effect.succeed(kind === "children" ? { children: id.right } : { tree: id.right })
  }
  return Effect.fail(Problem.make(400, "invalid_payload", "scope: expected roots, children:<session id> or tree:<session id>"))
}

const kindsOf = (text: string | undefined): Effect.Effect<ReadonlyArray<CallbackKind>, Problem.Problem> => {
  if (text === undefined || text.trim() === "") return Effect.succeed(["approval", "client_tool"])
  const kinds = text.split(",").map((kind) => kind.trim())
  return kinds.every((kind): kind is CallbackKind => kind === "approval" || kind === "client_tool")
    ? Effect.succeed(kinds)
    : Effect.fail(Problem.make(400, "invalid_payload", "kinds: expected a comma-separated list of approval, client_tool"))
}

/** A turn's end as the `turn` answer. */
type Ended = TurnFailed | TurnInterrupted | BudgetExhausted

const endedView = (error: Ended): typeof Http.TurnView.Type => {
  switch (error._tag) {
    case "TurnFailed":
      return { sessionId: error.sessionId, turnId: error.turnId, outcome: "failed", failureCode: error.failureCode, failure: error.failure, usage: error.usage }
    case "BudgetExhausted": {
      const { _tag, sessionId, turnId, ...failure } = error
      return { sessionId, turnId, outcome: "failed", failureCode: "budget_exhausted", failure: { _tag, ...failure } }
    }
    case "TurnInterrupted":
      return { sessionId: error.sessionId, turnId: error.turnId, outcome: "interrupted", reason: error.reason }
  }
}

/** `GET …/turns/{turnId}?wait`: the turn's end, or `running` when the wait ends first. */
const awaitTurn = (deps: Deps, principal: Principal, sessionId: SessionId, turnId: TurnId, wait: number) =>
  Effect.gen(function*() {
    const session = yield* call(deps.sessions.get(principal, sessionId))
    const running = { status: "running" as const }
    if (wait === 0 && session.activeTurnId === turnId) return running
    const ended = deps.sessions.awaitTurn(principal, sessionId, turnId).pipe(
      Effect.map((result): typeof Http.TurnEnded.Type | typeof running => ({
        turn: {
          sessionId,
          turnId,
          outcome: "completed",
          output: result.output,
          publicFinalMessage: result.publicFinalMessage,
          usage: result.usage
        }
      })),
      Effect.catchTags({
        TurnFailed: (error) => Effect.succeed({ turn: endedView(error) }),
        TurnInterrupted: (error) => Effect.succeed({ turn: endedView(error) }),
        BudgetExhausted: (error) => Effect.succeed({ turn: endedView(error) }),
        TurnNotFound: (error: TurnNotFound) => Effect.fail(Problem.make(404, "not_found", error.message))
      }),
      Effect.mapError((error) => (Problem.isProblem(error) ? error : problemOf(error)))
    )
    if (wait === 0) return yield* ended
    return yield* Effect.map(Effect.timeout(ended, Duration.seconds(wait)), (answer) => answer).pipe(
      Effect.catchTag("TimeoutException", () => Effect.succeed(running))
    )
  })

const principal = CurrentPrincipal

/** The handlers of every group, over `deps` and the streams. */
export const layer = (deps: Deps, streams: Streams, readiness: Effect.Effect<boolean>, store: SessionStore["Type"]) => {
  // Each listed session's turns, tokens and open callbacks, counted once per record over the listener's life.
  const summaries = SessionSummaries.make(store)
  const meta = HttpApiBuilder.group(Api, "meta", (handlers) =>
    handlers
      .handle("healthz", () => Effect.succeed({ ok: true as const }))
      .handle("readyz", () =>
        Effect.flatMap(readiness, (ready) =>
          ready
            ? Effect.succeed({ ok: true as const })
            : Effect.fail(Problem.make(503, "internal", "the session store does not answer", { retryable: true }))))
      .handle("openapi", () => Effect.sync(openApiDocument)))

  const agents = HttpApiBuilder.group(Api, "agents", (handlers) =>
    handlers.handle("list", () =>
      Effect.succeed({ items: deps.catalog.list.map((agent) => ({ name: agent.name, description: agent.description })) })))

  const sessions = HttpApiBuilder.group(Api, "sessions", (handlers) =>
    handlers
      .handle("create", ({ headers, payload }) =>
        Effect.gen(function*() {
          const who = yield* principal
          const agent = yield* Option.match(deps.catalog.get(payload.agent), {
            onNone: () => Effect.fail(Problem.make(404, "not_found", `unknown agent ${Problem.clip(payload.agent.slice(0, 64))}`)),
            onSome: Effect.succeed
          })
          const session = yield* call(deps.sessions.create(who, {
            agent,
            title: payload.title,
            idempotencyKey: headers["idempotency-key"] ?? payload.idempotencyKey,
            budgets: payload.budgets,
            metadata: payload.metadata,
            toolsets: refsOf(payload.toolsets)
          }))
          return { session }
        }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const scope = yield* scopeOf(urlParams.scope)
          const who = yield* principal
          const page = yield* call(deps.sessions.list(who, {
            scope,
            includeArchived: urlParams.includeArchived,
            cursor: urlParams.cursor,
            limit: urlParams.limit
          }))
          if (urlParams.summaries !== true) return page
          return { ...page, summaries: yield* call(summaries.of(page.items)) }
        }))
      .handle("get", ({ path }) => Effect.map(Effect.flatMap(principal, (who) => call(deps.sessions.get(who, path.id))), (session) => ({ session })))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const who = yield* principal
          let session = yield* call(deps.sessions.get(who, path.id))
          if (payload.title !== undefined) session = yield* call(deps.sessions.rename(who, path.id, payload.title))
          if (payload.archived !== undefined) session = yield* call(deps.sessions.archive(who, path.id, payload.archived))
          return { session }
        }))
      .handle("close", ({ path }) => Effect.map(Effect.flatMap(principal, (who) => call(deps.sessions.close(who, path.id))), (session) => ({ session })))
      .handle("send", ({ headers, path, payload }) =>
        Effect.flatMap(principal, (who) =>
          call(deps.sessions.send(who, path.id, {
            text: payload.text,
            mode: payload.mode,
            source: payload.source,
            inputId: headers["idempotency-key"]
          }))))
      .handle("interrupt", ({ path, payload }) =>
        Effect.flatMap(principal, (who) => call(deps.sessions.interrupt(who, path.id, payload.expectedTurnId, payload.reason))))
      .handle("turn", ({ path, urlParams }) =>
        Effect.flatMap(principal, (who) => awaitTurn(deps, who, path.id, path.turnId, urlParams.wait ?? 0)))
      .handle("snapshot", ({ path }) =>
        Effect.map(Effect.flatMap(principal, (who) => call(deps.sessions.snapshot(who, path.id))), (snapshot) => ({ snapshot, cursor: snapshot.cursor })))
      .handle("children", ({ path, urlParams }) =>
        Effect.flatMap(principal, (who) => call(deps.sessions.children(who, path.id, urlParams))))
      .handle("tree", ({ path, urlParams }) =>
        Effect.flatMap(principal, (who) => call(deps.sessions.tree(who, path.id, { includeArchived: urlParams.includeArchived })))))

  const callbacks = HttpApiBuilder.group(Api, "callbacks", (handlers) =>
    handlers
      .handle("list", ({ path }) => Effect.map(Effect.flatMap(principal, (who) => call(deps.sessions.callbacks(who, path.id))), (items) => ({ items })))
      .handle("answer", ({ path, payload }) =>
        Effect.flatMap(principal, (who) =>
          Effect.as(
            call(deps.sessions.answerCallback(who, path.id, {
              callbackId: path.callbackId,
              result: payload.result,
              turnId: payload.turnId,
              operationId: payload.operationId
            })),
            { accepted: true as const }
          )))
      .handleRaw("stream", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const kinds = yield* kindsOf(urlParams.kinds)
          return yield* streams.callbacks(yield* principal, path.id, kinds)
        })))

  const events = HttpApiBuilder.group(Api, "events", (handlers) =>
    handlers.handleRaw("events", ({ headers, path, urlParams }) =>
      Effect.gen(function*() {
        const lastEventId = headers["last-event-id"]
        let after = urlParams.after ?? 0
        if (lastEventId !== undefined) {
          // Last-Event-ID wins over `after`: it is what a reconnecting EventSource sends.
          if (!/^\d{1,15}$/.test(lastEventId.trim())) {
            return yield* Effect.fail(Problem.make(400, "invalid_payload", "Last-Event-ID: expected the cursor of an event of this stream"))
          }
          after = Number(lastEventId.trim())
        }
        return yield* streams.events(yield* principal, {
          sessionId: path.id,
          after,
          volatile: urlParams.volatile ?? false,
          follow: urlParams.follow ?? true
        })
      })))

  return Layer.mergeAll(meta, agents, sessions, callbacks, events)
}

/** The OpenAPI document, generated once, on first request. */
let document: unknown
const openApiDocument = () => (document ??= openApi())

/**
 * The `Authorization` middleware: a bearer token through `auth`; on a
 * trusted-local listener a request without one is the authenticator's
 * trusted-local peer (the local principal, `Authenticator.trustedLocal`).
 */
export const authorization = (auth: Authenticator["Type"], trustLocal: boolean) =>
  Layer.succeed(
    Authorization,
    Authorization.of({
      bearer: (token) => {
        const value = Redacted.value(token)
        return auth.authenticate(value === "" ? undefined : value, { listener: "tcp", trustedLocal: trustLocal && value === "" }).pipe(
          Effect.mapError((error) => Problem.make(401, "unauthenticated", error.message) as Problem.Unauthorized)
        )
      }
    })
  )
