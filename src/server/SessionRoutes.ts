/**
 * The routes of troupe's own message types (PROTOCOL.md, "Message types"):
 * every one maps onto the `Sessions` API, on behalf of the peer's principal.
 *
 * Each handler decodes its payload with the `Messages` schema (a payload that
 * does not fit is `invalid_payload`, naming the field), calls `Sessions`, and
 * answers with the payload encoded by the `Messages` schema, so class
 * instances leave as plain CBOR-able data. Domain errors become `core.error`
 * kinds; a foreign session is `not_found` exactly like an unknown one, and no
 * message carries a stack or a store's error.
 *
 * `session.events` replays, then follows. History is sent at the client's
 * pace; live events pass through a bounded buffer, and a subscriber that
 * lets it fill is ended with `slow_consumer` and the cursor of the last
 * durable event it was sent, from which it resumes without gap or duplicate.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { refsOf } from "../schema/Toolset.js"
import * as Cbor from "../protocol/Cbor.js"
import { MAX_BODY_SIZE } from "../protocol/Frame.js"
import * as Messages from "../protocol/Messages.js"
import type { ErrorKind } from "../protocol/ProtocolError.js"
import type {
  ChildControlForbidden,
  Conflict,
  InvalidInput,
  SessionBusy,
  SessionClosed,
  SessionNotFound,
  StaleCallback,
  StoreUnavailable,
  TurnMismatch
} from "../schema/Errors.js"
import type { SessionEvent } from "../schema/Event.js"
import type { SessionId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import { Sessions } from "../services/Sessions.js"
import { AgentCatalog } from "../services/AgentCatalog.js"
import { type Exchange, type Outgoing, type Route, Router, WireError } from "./Router.js"

const { Type } = Messages

/** Tuning of the routes. */
export interface Options {
  /**
   * How many live events a `session.events` subscriber may fall behind before
   * it is ended with `slow_consumer` (default 1024).
   */
  readonly eventBuffer?: number | undefined
}

/** Every domain error a `Sessions` method can fail with here. */
export type DomainError =
  | SessionNotFound
  | Conflict
  | StaleCallback
  | TurnMismatch
  | SessionClosed
  | SessionBusy
  | InvalidInput
  | StoreUnavailable
  | ChildControlForbidden

// Messages echo ids and keys the client sent; this keeps an echoed string from growing a frame.
const MAX_MESSAGE = 512
const clip = (text: string) => (text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 1)}…`)

const wireError = (kind: ErrorKind, message: string, extra: { retryable?: boolean; details?: unknown } = {}) =>
  new WireError({ kind, message: clip(message), ...extra })

/** The `core.error` a domain error is answered with. Messages hold only what the caller sent or may see. */
export const toWireError = (error: DomainError): WireError => {
  switch (error._tag) {
    case "SessionNotFound":
      return wireError("not_found", error.message)
    case "Conflict":
      return wireError("conflict", error.message, { details: { entity: error.entity, key: error.key } })
    case "StaleCallback":
      return wireError("stale_callback", error.message, {
        details: { callbackId: error.callbackId, reason: error.reason }
      })
    case "TurnMismatch":
      return wireError("turn_mismatch", error.message, {
        details: { expectedTurnId: error.expectedTurnId, activeTurnId: error.activeTurnId }
      })
    case "SessionClosed":
      return wireError("session_closed", error.message)
    case "SessionBusy":
      return wireError("busy", error.message, { details: { activeTurnId: error.activeTurnId } })
    case "InvalidInput":
      return wireError("invalid_payload", error.message)
    case "ChildControlForbidden":
      return wireError("forbidden", error.message, { details: { parentId: error.parentId, action: error.action } })
    case "StoreUnavailable":
      // The cause is the driver's error: it stays in the server's log.
      return wireError("internal", "the session store is unavailable; try again", { retryable: true })
  }
}

const internal = wireError("internal", "internal error")

/** The first issue of a payload that does not fit its schema, as `field: problem`. */
const invalidPayload = (type: string, error: ParseResult.ParseError) => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  const where = issue === undefined || issue.path.length === 0 ? "" : `${issue.path.map(String).join(".")}: `
  return wireError("invalid_payload", `invalid ${type} payload: ${where}${issue?.message ?? "does not fit"}`)
}

const decoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(schema)
  return (exchange: Exchange) =>
    decode(exchange.payload).pipe(Effect.mapError((error) => invalidPayload(exchange.type, error)))
}

/**
 * A copy without members whose value is `undefined`. Encoding keeps an optional
 * field that was set to `undefined` (as records built in memory have them), and
 * CBOR would carry it as simple value 23, which a peer's `Option` need not read;
 * the SQL stores drop such fields, so this also makes the answer the same on every store.
 */
const withoutUndefined = (value: unknown): unknown => {
  if (typeof value !== "object" || value === null || value instanceof Uint8Array) return value
  if (Array.isArray(value)) {
    // Copied only if an element changes: most answers have nothing to drop, and this runs once per streamed event.
    let copy: Array<unknown> | undefined
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      const cleaned = withoutUndefined(item)
      if (cleaned !== item && copy === undefined) copy = value.slice(0, i)
      if (copy !== undefined) copy.push(cleaned)
    }
    return copy ?? value
  }
  const proto = Object.getPrototypeOf(value)
  let copy: Record<string, unknown> | undefined = proto === Object.prototype || proto === null ? undefined : {}
  const keys = Object.keys(value)
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    const item: unknown = (value as Record<string, unknown>)[key]
    const cleaned = item === undefined ? undefined : withoutUndefined(item)
    if (copy === undefined && (item === undefined || cleaned !== item)) {
      copy = {}
      for (let j = 0; j < i; j++) define(copy, keys[j]!, (value as Record<string, unknown>)[keys[j]!])
    }
    if (copy !== undefined && item !== undefined) define(copy, key, cleaned)
  }
  return copy ?? value
}

// A plain assignment to `__proto__` would set the prototype: that key is defined as a property, as `fromEntries` does.
const define = (target: Record<string, unknown>, key: string, value: unknown): void => {
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

/**
 * The payload of a `session.event` frame: `Messages.SessionEventFrame` encoded,
 * without the schema walk. Events and record bodies are plain JSON data (no
 * transformations: `Record.toJsonText` relies on the same, and
 * test/schema.test.ts holds every record type to it), so their own fields are
 * their encoded form; `withoutUndefined` turns the class instances into plain
 * objects. test/server/SessionRoutes.test.ts holds this equal to the schema's
 * encoding for every event kind. A replay sends one per event.
 */
export const eventFramePayload = (event: SessionEvent): unknown =>
  withoutUndefined(event._tag === "durable" ? { cursor: event.cursor, event } : { event })

/** The answer `type` with `value` encoded by its schema; a value our own code built always encodes. */
const answerer = <A, I>(type: string, schema: Schema.Schema<A, I>) => {
  // The synchronous encoder: no Effect per answer, which counts once per event on a replay.
  const encode = Schema.encodeEither(schema)
  return (value: A): Effect.Effect<Outgoing> => {
    const payload = encode(value)
    return Either.isRight(payload)
      ? Effect.succeed({ type, payload: withoutUndefined(payload.right) })
      : Effect.die(payload.left)
  }
}

const principalOf = (exchange: Exchange): Effect.Effect<Principal, WireError> =>
  Option.match(exchange.peer.principal, {
    onNone: () => Effect.fail(wireError("unauthenticated", "authenticate with auth.hello first")),
    onSome: Effect.succeed
  })

/** Runs a route body: domain errors become their kinds, defects become `internal` (logged, never sent). */
const guard = (
  type: string,
  body: (exchange: Exchange) => Effect.Effect<Outgoing, DomainError | WireError>
) =>
(exchange: Exchange): Effect.Effect<Outgoing, WireError> =>
  body(exchange).pipe(
    Effect.mapError((error) => (error._tag === "WireError" ? error : toWireError(error))),
    Effect.catchAllDefect((defect) =>
      Effect.zipRight(
        Effect.logError("a session route failed").pipe(Effect.annotateLogs({ type, defect })),
        Effect.fail(internal)
      )
    ),
    Effect.withSpan(`SessionRoutes ${type}`, { attributes: { "troupe.exchange": exchange.id } })
  )

/** What ends an event stream early, whatever is still buffered. */
export type Stop = "cancelled" | "slow_consumer"

/** What the producer of an event stream hands the emitter, in order. */
export type Item =
  | { readonly _tag: "event"; readonly event: SessionEvent }
  | { readonly _tag: "end"; readonly reason: "done" | "closed" }
  | { readonly _tag: "failed"; readonly error: DomainError }
  | { readonly _tag: "died" }

/** Sets `stop` when the client sends `cancelType` on this exchange; other follow-ups are ignored. */
const watchCancel = <A>(exchange: Exchange, cancelType: string, stop: Deferred.Deferred<A>, value: A) =>
  Effect.forkScoped(Effect.gen(function*() {
    for (;;) {
      const frame = yield* Queue.take(exchange.followUps)
      if (frame.type === cancelType) return yield* Deferred.succeed(stop, value)
    }
  }))

/** What the routes act on. */
export interface Deps {
  readonly sessions: Sessions["Type"]
  readonly catalog: AgentCatalog["Type"]
  /** Live events a `session.events` subscriber may fall behind by. */
  readonly eventBuffer: number
}

/** What a route does with its decoded payload, on behalf of the peer's principal. */
type Act<A> = (deps: Deps, principal: Principal, request: A, exchange: Exchange) => Effect.Effect<Outgoing, DomainError | WireError>

/** One row of the table: a message type, how it is exchanged, and its route body once bound to the deps. */
interface RouteSpec {
  readonly type: string
  readonly kind: Route["kind"]
  readonly bind: (deps: Deps) => (exchange: Exchange) => Effect.Effect<Outgoing, DomainError | WireError>
}

/** A row: the peer must be authenticated, then the payload is decoded with `schema` and handed to `act`. */
const route = <A, I>(type: string, kind: Route["kind"], schema: Schema.Schema<A, I>, act: Act<A>): RouteSpec => {
  const decode = decoder(schema)
  return {
    type,
    kind,
    bind: (deps) => (exchange) =>
      Effect.flatMap(principalOf(exchange), (principal) =>
        Effect.flatMap(decode(exchange), (request) => act(deps, principal, request, exchange)))
  }
}

// The answers, each encoded by its schema.
const agentPage = answerer(Type.agentPage, Messages.AgentPage)
const created = answerer(Type.sessionCreated, Messages.SessionCreated)
const summary = answerer(Type.sessionSummary, Messages.SessionSummary)
const page = answerer(Type.sessionPage, Messages.SessionPage)
const accepted = answerer(Type.sessionAccepted, Messages.SessionAccepted)
const interrupted = answerer(Type.sessionInterrupted, Messages.SessionInterrupted)
const snapshot = answerer(Type.sessionSnapshot, Messages.SessionSnapshot)
const eventsEnd = answerer(Type.sessionEventsEnd, Messages.SessionEventsEnd)
const callbackOpen = answerer(Type.callbackOpen, Messages.CallbackOpen)
const provideEnd = answerer(Type.callbackProvideEnd, Messages.CallbackProvideEnd)
const callbackAccepted = answerer(Type.callbackAccepted, Messages.Empty)
const childrenPage = answerer(Type.sessionChildrenPage, Messages.SessionChildrenPage)
const treeAnswer = answerer(Type.sessionTree, Messages.SessionTree)

/** A request whose payload names a session and whose answer is its summary. */
const control = <A extends { readonly sessionId: SessionId }>(
  act: (sessions: Sessions["Type"], principal: Principal, request: A) => ReturnType<Sessions["Type"]["close"]>
): Act<A> =>
(deps, principal, request) => Effect.flatMap(act(deps.sessions, principal, request), (session) => summary({ session }))

const createSession: Act<typeof Messages.SessionCreate.Type> = ({ catalog, sessions }, principal, request) =>
  Effect.gen(function*() {
    const agent = yield* Option.match(catalog.get(request.agent), {
      onNone: () => Effect.fail(wireError("not_found", `unknown agent ${request.agent}`)),
      onSome: Effect.succeed
    })
    const session = yield* sessions.create(principal, {
      agent,
      title: request.title,
      idempotencyKey: request.idempotencyKey,
      budgets: request.budgets,
      metadata: request.metadata,
      toolsets: refsOf(request.toolsets)
    })
    return yield* created({ session })
  })

const sessionTree: Act<typeof Messages.SessionTreeRequest.Type> = ({ sessions }, principal, request) =>
  Effect.gen(function*() {
    const tree = yield* sessions.tree(principal, request.sessionId, { includeArchived: request.includeArchived })
    const answer = yield* treeAnswer(tree)
    // Up to 10,000 nodes may not fit one frame: say so, rather than build a frame no peer can take.
    const bytes = Cbor.encode(answer.payload)
    if (Either.isLeft(bytes) || bytes.right.length > MAX_BODY_SIZE - 1024) {
      return yield* Effect.fail(wireError(
        "invalid_payload",
        `the tree below ${request.sessionId} (${tree.nodes.length} sessions) does not fit one frame: page it with session.list { scope: { tree } }`
      ))
    }
    return answer
  })

/**
 * The producer of a `session.events` stream: reads the session's events into
 * `items`, history first (at the client's pace), then live ones (which never
 * wait: one that finds the buffer full sets `stop` to `slow_consumer`), and
 * ends with an `end`, `failed` or `died` item.
 */
export const produceEvents = (
  { eventBuffer, sessions }: Deps,
  principal: Principal,
  request: typeof Messages.SessionEvents.Type,
  items: Queue.Queue<Item>,
  stop: Deferred.Deferred<Stop>
): Effect.Effect<void> => {
  const sessionId = request.sessionId
  // The last durable cursor queued.
  let produced = request.after ?? 0
  const queue = (event: SessionEvent) => {
    if (event._tag === "durable") produced = event.cursor
    return Queue.offer(items, { _tag: "event", event })
  }
  // History waits for room: the client reads it at its own pace, holding nothing live meanwhile.
  // A page of the log at a time: one offer per chunk, not per event.
  const replay = Effect.suspend(() =>
    Stream.runForEachChunk(
      sessions.events(principal, sessionId, { after: produced, follow: false }),
      (chunk) => {
        const batch: Array<Item> = []
        for (const event of chunk) {
          if (event._tag === "durable") produced = event.cursor
          batch.push({ _tag: "event", event })
        }
        return Queue.offerAll(items, batch)
      }
    )
  )
  let closed = false
  // Live events never wait: one that finds the buffer full ends the subscriber.
  const follow = Effect.suspend(() =>
    Stream.runForEachWhile(
      sessions.events(principal, sessionId, { after: produced, follow: true, volatile: request.volatile ?? false }),
      (event) =>
        Effect.gen(function*() {
          if ((yield* Queue.size(items)) >= eventBuffer) {
            yield* Deferred.succeed(stop, "slow_consumer")
            return false
          }
          yield* queue(event)
          closed = event._tag === "durable" && event.record._tag === "closed"
          return !closed
        })
    )
  )
  return Effect.gen(function*() {
    yield* replay
    if (request.follow === false) return yield* Queue.offer(items, { _tag: "end", reason: "done" })
    if ((yield* sessions.get(principal, sessionId)).status !== "closed") yield* follow
    else closed = true
    if (!closed) return
    // A closed session writes nothing more, bar the records committed with or just after the close.
    yield* replay
    yield* Queue.offer(items, { _tag: "end", reason: "closed" })
  }).pipe(
    Effect.catchAll((error) => Queue.offer(items, { _tag: "failed", error })),
    Effect.catchAllDefect((defect) =>
      Effect.zipRight(
        Effect.logError("a session event stream failed").pipe(Effect.annotateLogs({ sessionId, defect })),
        Queue.offer(items, { _tag: "died" })
      )
    ),
    Effect.asVoid
  )
}

/**
 * The emitter of a `session.events` stream: sends what the producer queued
 * until an `end` item or `stop`, and answers `session.events.end` with the
 * cursor of the last durable event actually sent.
 */
const emitEvents = (
  exchange: Exchange,
  after: number,
  items: Queue.Queue<Item>,
  stop: Deferred.Deferred<Stop>
): Effect.Effect<Outgoing, DomainError | WireError> =>
  Effect.gen(function*() {
    let emitted = after
    const end = (reason: typeof Messages.EventsEndReason.Type) => eventsEnd({ reason, cursor: emitted })
    for (;;) {
      // Everything buffered is taken at once; only an empty buffer is waited on, racing `stop`
      // (a race forks two fibers: too dear per event on a replay).
      let batch = yield* Queue.takeAll(items)
      if (Chunk.isEmpty(batch)) {
        if (yield* Deferred.isDone(stop)) return yield* end(yield* Deferred.await(stop))
        const next = yield* Effect.raceFirst(
          Effect.map(Queue.take(items), Either.right),
          Effect.map(Deferred.await(stop), Either.left)
        )
        // An item taken as `stop` won is dropped, which is fine: the stream ends with the cursor actually sent.
        if (Either.isLeft(next)) return yield* end(next.left)
        batch = Chunk.of(next.right)
      }
      for (const item of batch) {
        // A stop preempts what is still buffered: checked before every frame, as an emit may have waited.
        if (yield* Deferred.isDone(stop)) return yield* end(yield* Deferred.await(stop))
        switch (item._tag) {
          case "event": {
            const event = item.event
            yield* exchange.emit({ type: Type.sessionEvent, payload: eventFramePayload(event) })
            if (event._tag === "durable") emitted = event.cursor
            break
          }
          case "end":
            return yield* end(item.reason)
          case "failed":
            return yield* Effect.fail(item.error)
          case "died":
            return yield* Effect.fail(internal)
        }
      }
    }
  })

/** `session.events`: a producer fiber fills a bounded buffer, the emitter sends it (see the module doc). */
const events: Act<typeof Messages.SessionEvents.Type> = (deps, principal, request, exchange) =>
  Effect.scoped(Effect.gen(function*() {
    const items = yield* Queue.bounded<Item>(deps.eventBuffer)
    const stop = yield* Deferred.make<Stop>()
    yield* watchCancel(exchange, Type.sessionEventsCancel, stop, "cancelled" as const)
    yield* Effect.forkScoped(produceEvents(deps, principal, request, items, stop))
    return yield* emitEvents(exchange, request.after ?? 0, items, stop)
  }))

/** `callback.provide`: offers the session tree's callbacks on this stream until the client cancels. */
const provide: Act<typeof Messages.CallbackProvide.Type> = ({ sessions }, principal, request, exchange) =>
  Effect.scoped(Effect.gen(function*() {
    const cancelled = yield* Deferred.make<void>()
    yield* watchCancel(exchange, Type.callbackProvideCancel, cancelled, undefined)
    // The client answers with `callback.answer`, a request of its own; `None` leaves the callback open
    // (and offers it to providers further up the session tree).
    const provider = yield* Effect.forkScoped(
      sessions.provideCallbacks(principal, request.sessionId, request.kinds, (callback) =>
        Effect.flatMap(callbackOpen({ callback }), exchange.emit).pipe(Effect.as(Option.none())))
        // This handler never answers (the client does, with `callback.answer`): no answer of its can be of the wrong shape.
        .pipe(Effect.catchTag("InvalidCallbackAnswer", Effect.die))
    )
    // The provider runs until it fails (an unknown session) or the client cancels; the scope withdraws it.
    yield* Effect.raceFirst(Fiber.join(provider), Deferred.await(cancelled))
    return yield* provideEnd({ reason: "cancelled" })
  }))

/** The table: message type → kind → payload schema → what it does. */
const routes: ReadonlyArray<RouteSpec> = [
  route(Type.agentList, "request", Messages.Empty, ({ catalog }) =>
    agentPage({ items: catalog.list.map((agent) => ({ name: agent.name, description: agent.description })) })),
  route(Type.sessionCreate, "request", Messages.SessionCreate, createSession),
  route(Type.sessionGet, "request", Messages.SessionRef, control((sessions, principal, r) => sessions.get(principal, r.sessionId))),
  route(Type.sessionList, "request", Messages.SessionList, ({ sessions }, principal, request) =>
    Effect.flatMap(sessions.list(principal, request), page)),
  route(Type.sessionSend, "request", Messages.SessionSend, ({ sessions }, principal, request) =>
    Effect.flatMap(sessions.send(principal, request.sessionId, request), accepted)),
  route(Type.sessionInterrupt, "request", Messages.SessionInterrupt, ({ sessions }, principal, request) =>
    Effect.flatMap(sessions.interrupt(principal, request.sessionId, request.expectedTurnId, request.reason), interrupted)),
  route(
    Type.sessionRename,
    "request",
    Messages.SessionRename,
    control((sessions, principal, r) => sessions.rename(principal, r.sessionId, r.title))
  ),
  route(
    Type.sessionArchive,
    "request",
    Messages.SessionArchive,
    control((sessions, principal, r) => sessions.archive(principal, r.sessionId, r.archived))
  ),
  route(Type.sessionClose, "request", Messages.SessionRef, control((sessions, principal, r) => sessions.close(principal, r.sessionId))),
  route(Type.sessionSnapshot, "request", Messages.SessionRef, ({ sessions }, principal, request) =>
    Effect.flatMap(sessions.snapshot(principal, request.sessionId), (current) => snapshot({ snapshot: current, cursor: current.cursor }))),
  route(Type.sessionEvents, "stream", Messages.SessionEvents, events),
  route(Type.callbackProvide, "stream", Messages.CallbackProvide, provide),
  route(Type.callbackAnswer, "request", Messages.CallbackAnswer, ({ sessions }, principal, request) =>
    Effect.andThen(sessions.answerCallback(principal, request.sessionId, request), () => callbackAccepted({}))),
  route(Type.sessionChildren, "request", Messages.SessionChildren, ({ sessions }, principal, request) =>
    Effect.flatMap(sessions.children(principal, request.sessionId, request), childrenPage)),
  route(Type.sessionTree, "request", Messages.SessionTreeRequest, sessionTree)
]

/** Builds the routes over the `Sessions` and `AgentCatalog` in context. */
export const make = (options: Options = {}): Effect.Effect<Router["Type"], never, Sessions | AgentCatalog> =>
  Effect.gen(function*() {
    const deps: Deps = {
      sessions: yield* Sessions,
      catalog: yield* AgentCatalog,
      eventBuffer: Math.max(1, options.eventBuffer ?? 1024)
    }
    // A Map, not an object: a type such as "constructor" must not find a route on a prototype.
    const table = new Map<string, Route>(
      routes.map((spec) => [spec.type, { kind: spec.kind, handler: guard(spec.type, spec.bind(deps)) }])
    )
    return Router.of({ route: (type) => table.get(type) })
  })

/** The routes with the default tuning. */
export const layer: Layer.Layer<Router, never, Sessions | AgentCatalog> = Layer.effect(Router, make())

/** The routes with the given tuning. */
export const layerWith = (options: Options): Layer.Layer<Router, never, Sessions | AgentCatalog> =>
  Layer.effect(Router, make(options))
