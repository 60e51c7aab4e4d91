/**
 * The session routes, driven through the `Router` with exchanges built here
 * over a real `Sessions` (the test runtime with scripted models): every route's
 * answer and its errors, tenancy (a foreign session is exactly an unknown
 * one), event streams (replay and follow, `done`, `cancelled`, `closed`,
 * `slow_consumer` and resuming from its cursor), and callbacks served over a
 * `callback.provide` stream and answered with `callback.answer`. Every answer
 * and error crosses the CBOR codec before it is checked. The spec is
 * PROTOCOL.md, "Message types".
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Layer, Option, Queue, Ref, Schema, Stream, TestClock } from "effect"
import * as MemorySessionStore from "../../src/layers/MemorySessionStore.js"
import type * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Envelope from "../../src/protocol/Envelope.js"
import * as Messages from "../../src/protocol/Messages.js"
import * as ProtocolError from "../../src/protocol/ProtocolError.js"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import {
  ChildControlForbidden,
  Conflict,
  InvalidInput,
  SessionBusy,
  SessionClosed,
  SessionNotFound,
  StaleCallback,
  StoreUnavailable,
  TurnMismatch
} from "../../src/schema/Errors.js"
import { Usage } from "../../src/schema/Budget.js"
import { ApprovalRequest } from "../../src/schema/Callback.js"
import { AssistantDelta, Durable, type SessionEvent } from "../../src/schema/Event.js"
import { InputId, makeCallbackId, makeOperationId, makeSessionId, makeTurnId, type SessionId } from "../../src/schema/Ids.js"
import * as Record from "../../src/schema/Record.js"
import { RecordBody } from "../../src/schema/Record.js"
import { RunOptions } from "../../src/schema/Run.js"
import { Principal } from "../../src/schema/Principal.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import { type Exchange, type Outgoing, Router, WireError } from "../../src/server/Router.js"
import * as SessionRoutes from "../../src/server/SessionRoutes.js"
import { Sessions } from "../../src/services/Sessions.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"
import { eventually, logOf } from "../support/actors.js"
import { deployCall, deployingAgent, deployTool } from "../support/deploy.js"
import { principal } from "../support/fixtures.js"

const { Type } = Messages

// ---- agents, tools, runtime ----

const assistant = new Agent({
  name: "assistant",
  description: "Answers briefly.",
  instructions: "Be brief.",
  model: new ModelRef({ name: "scripted" })
})

const worker = deployingAgent("worker", "Deploys, with approval.")

/** `worker` calls `deploy` (an approval) and finishes, in each of two turns; `assistant` echoes. */
const SCRIPTS: ScriptedModel.Scripts = {
  agents: { worker: [deployCall("c1"), "done", deployCall("c2"), "done again"] }
}

/** 2026-01-01T00:00:00.123Z: timestamps beyond 2^32, as on a real clock. */
const NOW = 1_767_225_600_123

interface RuntimeOptions {
  readonly routes?: SessionRoutes.Options
  /** Replaces the store (default: a fresh memory store). */
  readonly store?: Layer.Layer<SessionStore>
}

/**
 * Runs `body` with the routes over a fresh runtime whose `deploy` handler
 * counts into `runs`, the test clock set to `NOW`.
 */
const withRoutes = <A, E>(
  body: (runs: Ref.Ref<number>) => Effect.Effect<A, E, Router | Troupe.Services>,
  options: RuntimeOptions = {}
) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(NOW)
    const runs = yield* Ref.make(0)
    const runtime = Troupe.layer(options.store ?? MemorySessionStore.layer, {
      scripts: SCRIPTS,
      tools: Toolkit.layer([deployTool(runs)])
    })
    const routes = Layer.effect(Router, SessionRoutes.make(options.routes)).pipe(
      Layer.provide(AgentCatalog.layer([assistant, worker]))
    )
    return yield* body(runs).pipe(Effect.provide(Layer.provideMerge(routes, runtime)))
  })

// ---- exchanges ----

const peerOf = (who: Principal | undefined) => ({
  principal: Option.fromNullable(who),
  excludeFromAnalytics: false,
  listener: "unix" as const
})

/** A payload as a peer reads it: through the CBOR envelope both ways, unchanged, then its schema. */
const overTheWire = <A, I>(message: Outgoing, schema: Schema.Schema<A, I>): A => {
  const bytes = Either.getOrThrow(Envelope.encodeBody(message.type, message.payload))
  const body = Either.getOrThrow(Envelope.decodeBody(bytes))
  assert.strictEqual(body.t, message.type)
  assert.deepStrictEqual(body.payload, message.payload, `${message.type} changed over CBOR`)
  assertPlain(message.payload, message.type)
  return Schema.decodeUnknownSync(schema)(body.payload)
}

/** Plain data only: no `undefined` (CBOR's simple value 23, which peers need not read), no class instances. */
const assertPlain = (value: unknown, where: string): void => {
  assert.notStrictEqual(value, undefined, `undefined at ${where}`)
  if (typeof value !== "object" || value === null) return
  if (Array.isArray(value)) return value.forEach((item, i) => assertPlain(item, `${where}.${i}`))
  assert.strictEqual(Object.getPrototypeOf(value), Object.prototype, `a class instance at ${where}`)
  for (const [key, item] of Object.entries(value)) assertPlain(item, `${where}.${key}`)
}

/** The `core.error` a refusal becomes, read back as a peer reads it. */
const errorOverTheWire = (error: WireError, offendingType: string) => {
  const payload: ProtocolError.ErrorPayload = {
    kind: error.kind,
    message: error.message,
    offending_type: offendingType,
    ...(error.retryable === undefined ? {} : { retryable: error.retryable }),
    ...(error.details === undefined ? {} : { details: error.details })
  }
  return overTheWire({ type: Type.error, payload }, ProtocolError.ErrorPayload)
}

const exchangeOf = (
  type: string,
  payload: unknown,
  who: Principal | undefined,
  emit: Exchange["emit"],
  followUps: Queue.Dequeue<Outgoing>
): Exchange => ({ id: 7, type, payload, peer: peerOf(who), emit, followUps })

const routeOf = (type: string, kind: "request" | "stream") =>
  Effect.map(Router, (router) => {
    const route = router.route(type)
    assert.isDefined(route, `no route for ${type}`)
    assert.strictEqual(route!.kind, kind, `${type} is a ${kind}`)
    return route!
  })

/** Runs a request route; its answer must be `answerType`, read through CBOR with `schema`. */
const call = <A, I>(
  type: string,
  payload: unknown,
  who: Principal | undefined,
  answerType: string,
  schema: Schema.Schema<A, I>
) =>
  Effect.gen(function*() {
    const route = yield* routeOf(type, "request")
    const followUps = yield* Queue.unbounded<Outgoing>()
    const emit = () => Effect.dieMessage(`a ${type} request emitted a frame`)
    const answer = yield* route.handler(exchangeOf(type, payload, who, emit, followUps))
    assert.strictEqual(answer.type, answerType)
    return overTheWire(answer, schema)
  })

/** Runs a route expecting a refusal; returns the error, checked to cross the wire as `core.error`. */
const refused = (type: string, payload: unknown, who: Principal | undefined) =>
  Effect.gen(function*() {
    const router = yield* Router
    const route = router.route(type)!
    const followUps = yield* Queue.unbounded<Outgoing>()
    const exit = yield* route.handler(exchangeOf(type, payload, who, () => Effect.void, followUps)).pipe(Effect.exit)
    if (exit._tag === "Success") return assert.fail(`${type} answered ${JSON.stringify(exit.value)}`)
    const error = yield* Effect.flip(exit)
    assert.instanceOf(error, WireError)
    const read = errorOverTheWire(error, type)
    assert.notMatch(read.message, /\n\s+at /, "no stack in a message")
    assert.isAtMost(read.message.length, 512)
    return error
  })

interface OpenStream {
  /** Frames emitted so far, in order. */
  readonly frames: Array<Outgoing>
  readonly fiber: Fiber.RuntimeFiber<Outgoing, WireError>
  /** While closed, `emit` waits (a socket whose write buffer is full). */
  readonly gate: Effect.Latch
  /** Sends a follow-up frame on the exchange. */
  readonly send: (type: string) => Effect.Effect<void>
}

/** Opens a stream route; `gate: false` starts with emits blocked. */
const openStream = (type: string, payload: unknown, who: Principal | undefined, options: { gate?: boolean } = {}) =>
  Effect.gen(function*() {
    const route = yield* routeOf(type, "stream")
    const followUps = yield* Queue.unbounded<Outgoing>()
    const gate = yield* Effect.makeLatch(options.gate ?? true)
    const frames: Array<Outgoing> = []
    const emit = (message: Outgoing) => Effect.zipRight(gate.await, Effect.sync(() => frames.push(message)))
    const fiber = yield* Effect.fork(route.handler(exchangeOf(type, payload, who, emit, followUps)))
    return {
      frames,
      fiber,
      gate,
      send: (followUp: string) => Queue.offer(followUps, { type: followUp, payload: {} }).pipe(Effect.asVoid)
    } satisfies OpenStream
  })

/** The events of `session.event` frames, read through CBOR, with their cursors. */
const eventsOf = (frames: ReadonlyArray<Outgoing>) =>
  frames.map((frame) => {
    assert.strictEqual(frame.type, Type.sessionEvent)
    return overTheWire(frame, Messages.SessionEventFrame)
  })

const durableCursors = (frames: ReadonlyArray<Outgoing>) =>
  eventsOf(frames).flatMap(({ cursor, event }) => {
    if (event._tag === "assistant_delta") {
      assert.isUndefined(cursor, "a delta has no cursor")
      return []
    }
    assert.strictEqual(cursor, event.cursor)
    return [event.cursor]
  })

/** A value as JSON data: records from the memory store carry unset optional fields, the wire drops them. */
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i)

/** The end frame of a finished stream, read through CBOR. */
const endOf = <A, I>(stream: OpenStream, type: string, schema: Schema.Schema<A, I>) =>
  Effect.map(Fiber.join(stream.fiber), (end) => {
    assert.strictEqual(end.type, type)
    return overTheWire(end, schema)
  })

const eventsEnd = (stream: OpenStream) => endOf(stream, Type.sessionEventsEnd, Messages.SessionEventsEnd)

/** Lets background fibers run for a while without moving the clock. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 2000; i++) yield* Effect.yieldNow()
})

const headOf = (who: Principal, sessionId: SessionId) =>
  Effect.map(Effect.flatMap(Sessions, (s) => s.get(who, sessionId)), (session) => session.headSeq)

// ---- domain helpers over the routes ----

const create = (who: Principal, agent = "assistant", extra: Record<string, unknown> = {}) =>
  Effect.map(
    call(Type.sessionCreate, { agent, ...extra }, who, Type.sessionCreated, Messages.SessionCreated),
    ({ session }) => session
  )

let inputs = 0
const send = (who: Principal, sessionId: SessionId, text = "hi", extra: Record<string, unknown> = {}) =>
  call(
    Type.sessionSend,
    { sessionId, inputId: `in-${++inputs}`, text, ...extra },
    who,
    Type.sessionAccepted,
    Messages.SessionAccepted
  )

/** Sends `text` and waits for the turn it starts to end. */
const turn = (who: Principal, sessionId: SessionId, text = "hi") =>
  Effect.gen(function*() {
    const accepted = yield* send(who, sessionId, text)
    assert.strictEqual(accepted.disposition, "started")
    const sessions = yield* Sessions
    return yield* sessions.awaitTurn(who, sessionId, accepted.turnId!, { after: accepted.cursor! - 1 })
  })

/** Starts a `worker` turn, which parks on an approval callback; returns its id. */
const parkedTurn = (who: Principal, sessionId: SessionId) =>
  Effect.gen(function*() {
    const accepted = yield* send(who, sessionId, "ship it")
    assert.strictEqual(accepted.disposition, "started")
    const sessions = yield* Sessions
    yield* eventually(
      Effect.map(sessions.callbacks(who, sessionId), (open) => open.length > 0),
      "an open approval callback"
    )
    return accepted.turnId!
  })

/** A refusal of a foreign session must read exactly like that of an id nobody has. */
const assertLikeUnknown = (foreign: WireError, foreignId: string, unknown: WireError, unknownId: string) => {
  assert.strictEqual(foreign.kind, "not_found")
  assert.strictEqual(unknown.kind, "not_found")
  assert.strictEqual(foreign.message.replaceAll(foreignId, "<id>"), unknown.message.replaceAll(unknownId, "<id>"))
  assert.deepStrictEqual(foreign.retryable, unknown.retryable)
  assert.deepStrictEqual(foreign.details, unknown.details)
}

const ROUTES = {
  [Type.agentList]: "request",
  [Type.sessionCreate]: "request",
  [Type.sessionGet]: "request",
  [Type.sessionList]: "request",
  [Type.sessionSend]: "request",
  [Type.sessionInterrupt]: "request",
  [Type.sessionRename]: "request",
  [Type.sessionArchive]: "request",
  [Type.sessionClose]: "request",
  [Type.sessionSnapshot]: "request",
  [Type.sessionEvents]: "stream",
  [Type.callbackProvide]: "stream",
  [Type.callbackAnswer]: "request",
  [Type.sessionChildren]: "request",
  [Type.sessionTree]: "request"
} as const

describe("SessionRoutes", () => {
  it.effect("routes every non-core message type of PROTOCOL.md, with its kind, and nothing else", () =>
    withRoutes(() =>
      Effect.gen(function*() {
        const router = yield* Router
        for (const [type, kind] of Object.entries(ROUTES)) assert.strictEqual(router.route(type)?.kind, kind, type)
        for (const type of [Type.ping, Type.hello, Type.sessionEvent, Type.sessionEventsCancel, "constructor", "__proto__", "toString", ""]) {
          assert.isUndefined(router.route(type), type)
        }
      })
    ))

  it.effect("every route refuses a peer without a principal as unauthenticated", () =>
    withRoutes(() =>
      Effect.gen(function*() {
        const sessionId = yield* makeSessionId
        for (const type of Object.keys(ROUTES)) {
          const error = yield* refused(type, { sessionId, agent: "assistant" }, undefined)
          assert.strictEqual(error.kind, "unauthenticated", type)
        }
      })
    ))

  it.effect("maps every domain error to its kind, with safe messages and useful details", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const turnId = yield* makeTurnId
      const callbackId = yield* makeCallbackId
      const cases = [
        [new SessionNotFound({ sessionId }), "not_found", undefined],
        [
          new Conflict({ entity: "session", key: "k1", reason: "idempotency key reused with a different request" }),
          "conflict",
          { entity: "session", key: "k1" }
        ],
        [new StaleCallback({ sessionId, callbackId, reason: "answered" }), "stale_callback", { callbackId, reason: "answered" }],
        [
          new TurnMismatch({ sessionId, expectedTurnId: turnId, activeTurnId: null }),
          "turn_mismatch",
          { expectedTurnId: turnId, activeTurnId: null }
        ],
        [new SessionClosed({ sessionId }), "session_closed", undefined],
        [new SessionBusy({ sessionId, activeTurnId: turnId }), "busy", { activeTurnId: turnId }],
        [new InvalidInput({ what: "cursor", reason: "not a cursor" }), "invalid_payload", undefined],
        [
          new ChildControlForbidden({ sessionId, parentId: sessionId, action: "close" }),
          "forbidden",
          { parentId: sessionId, action: "close" }
        ]
      ] as const
      for (const [error, kind, details] of cases) {
        const wire = SessionRoutes.toWireError(error)
        assert.strictEqual(wire.kind, kind)
        assert.strictEqual(wire.message, error.message)
        assert.deepStrictEqual(wire.details, details)
        assert.isUndefined(wire.retryable)
        errorOverTheWire(wire, "x")
      }
      const unavailable = SessionRoutes.toWireError(
        new StoreUnavailable({ operation: "get", cause: new Error("connect ECONNREFUSED db.internal:5432 password=hunter2") })
      )
      assert.strictEqual(unavailable.kind, "internal")
      assert.isTrue(unavailable.retryable)
      assert.notInclude(unavailable.message, "hunter2")
      assert.notInclude(unavailable.message, "db.internal")
    }))

  describe("payloads", () => {
    it.effect("a payload that does not fit is invalid_payload, naming the field, without a stack", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          const sessionId = session.id
          const callbackId = yield* makeCallbackId
          const cases: ReadonlyArray<readonly [string, unknown, string]> = [
            [Type.agentList, null, ""],
            [Type.sessionCreate, {}, "agent"],
            [Type.sessionCreate, { agent: 5 }, "agent"],
            [Type.sessionCreate, { agent: "assistant", title: 5 }, "title"],
            [Type.sessionCreate, { agent: "assistant", budgets: { totalTokens: -1 } }, "budgets.totalTokens"],
            // CBOR carries what JSON cannot: a uint64 beyond 2^53 (a bigint), bytes, a non-finite float.
            [Type.sessionCreate, { agent: "assistant", metadata: { n: 2n ** 60n } }, "metadata.n"],
            [Type.sessionCreate, { agent: "assistant", metadata: { b: new Uint8Array([1]) } }, "metadata.b"],
            [Type.sessionCreate, { agent: "assistant", metadata: { x: [Number.NaN] } }, "metadata.x"],
            [Type.sessionGet, {}, "sessionId"],
            [Type.sessionGet, null, ""],
            [Type.sessionGet, { sessionId: "ses_nope" }, "sessionId"],
            [Type.sessionList, { limit: 0 }, "limit"],
            [Type.sessionList, { scope: "everything" }, "scope"],
            [Type.sessionSend, { sessionId, text: "hi" }, "inputId"],
            [Type.sessionSend, { sessionId, inputId: "in 1", text: "hi" }, "inputId"],
            [Type.sessionSend, { sessionId, inputId: "in-x", text: 1 }, "text"],
            [Type.sessionSend, { sessionId, inputId: "in-x", text: "hi", mode: "later" }, "mode"],
            [Type.sessionInterrupt, { sessionId }, "expectedTurnId"],
            [Type.sessionRename, { sessionId, title: null }, "title"],
            [Type.sessionArchive, { sessionId, archived: "yes" }, "archived"],
            [Type.sessionClose, { session: sessionId }, "sessionId"],
            [Type.sessionSnapshot, { sessionId: 42 }, "sessionId"],
            [Type.sessionEvents, { sessionId, after: -1 }, "after"],
            [Type.sessionEvents, { sessionId, after: 1.5 }, "after"],
            [Type.sessionEvents, { sessionId, follow: "no" }, "follow"],
            [Type.callbackProvide, { sessionId, kinds: [] }, "kinds"],
            [Type.callbackProvide, { sessionId, kinds: ["telepathy"] }, "kinds.0"],
            [Type.callbackAnswer, { sessionId, callbackId: "cb_x", result: {} }, "callbackId"],
            [Type.callbackAnswer, { sessionId, callbackId, result: {}, operationId: "op_x" }, "operationId"],
            [Type.callbackAnswer, { sessionId, callbackId, result: { output: new Uint8Array([1]) } }, "result"]
          ]
          for (const [type, payload, field] of cases) {
            const error = yield* refused(type, payload, who)
            assert.strictEqual(error.kind, "invalid_payload", `${type} ${field}`)
            assert.isTrue(
              error.message.startsWith(`invalid ${type} payload: ${field === "" ? "" : `${field}: `}`),
              `${type} names ${field || "the payload"}: ${error.message}`
            )
          }
          // Nothing reached the session.
          assert.strictEqual(yield* headOf(who, sessionId), 1)
        })
      ))

    it.effect("session objects cross CBOR whole: timestamps beyond 2^32, the frozen agent, budgets and metadata", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal("user-1")
          const session = yield* create(who, "assistant", {
            title: "first",
            budgets: { totalTokens: 1000, toolCallsByName: { deploy: 1 } },
            metadata: { ticket: "T-1", nested: { n: 2 ** 40, list: [1, "two", null, true] } }
          })
          assert.strictEqual(session.createdAt, NOW)
          assert.isAbove(session.createdAt, 2 ** 32)
          assert.strictEqual(session.agent.name, "assistant")
          assert.strictEqual(session.agent.instructions, "Be brief.")
          assert.strictEqual(session.principal.workspaceId, who.workspaceId)
          assert.strictEqual(session.principal.userId, "user-1")
          assert.strictEqual(session.title, "first")
          assert.strictEqual(session.budgets?.totalTokens, 1000)
          assert.deepStrictEqual(session.budgets?.toolCallsByName, { deploy: 1 })
          assert.deepStrictEqual(session.metadata, { ticket: "T-1", nested: { n: 2 ** 40, list: [1, "two", null, true] } })
          const sessions = yield* Sessions
          assert.deepStrictEqual(session, yield* sessions.get(who, session.id))
        })
      ))
  })

  describe("agent.list and session.create", () => {
    it.effect("agent.list pages the catalog's agents by name and description", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const page = yield* call(Type.agentList, {}, principal(), Type.agentPage, Messages.AgentPage)
          assert.deepStrictEqual(page.items, [
            { name: "assistant", description: "Answers briefly." },
            { name: "worker", description: "Deploys, with approval." }
          ])
        })
      ))

    it.effect("session.create runs a catalog agent; an unknown one is not_found; an idempotency key is honoured", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker", { title: "deploys" })
          assert.strictEqual(session.agent.name, "worker")
          assert.deepStrictEqual(session.agent.permissions.rules, { deploy: "ask" })
          assert.strictEqual(session.status, "idle")

          const unknown = yield* refused(Type.sessionCreate, { agent: "nope" }, who)
          assert.strictEqual(unknown.kind, "not_found")
          assert.strictEqual(unknown.message, "unknown agent nope")

          const first = yield* create(who, "assistant", { idempotencyKey: "k-1", title: "a" })
          const again = yield* create(who, "assistant", { idempotencyKey: "k-1", title: "a" })
          assert.strictEqual(again.id, first.id)
          const conflict = yield* refused(Type.sessionCreate, { agent: "assistant", idempotencyKey: "k-1", title: "b" }, who)
          assert.strictEqual(conflict.kind, "conflict")
          assert.deepStrictEqual(conflict.details, { entity: "session", key: "k-1" })
          // Keys are per workspace: another tenant's use of the same key is its own session.
          const other = yield* create(principal(), "assistant", { idempotencyKey: "k-1", title: "b" })
          assert.notStrictEqual(other.id, first.id)
        })
      ))
  })

  describe("tenancy", () => {
    it.effect("every session route treats another workspace's session exactly as an unknown one, and changes nothing", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const owner = principal()
          const intruder = principal()
          const session = yield* create(owner, "worker", { title: "mine" })
          const turnId = yield* parkedTurn(owner, session.id)
          const sessions = yield* Sessions
          const [pending] = yield* sessions.callbacks(owner, session.id)
          const before = yield* sessions.get(owner, session.id)
          const unknownId = yield* makeSessionId
          const payloads = (sessionId: SessionId): ReadonlyArray<readonly [string, unknown]> => [
            [Type.sessionGet, { sessionId }],
            [Type.sessionList, { scope: { children: sessionId } }],
            [Type.sessionList, { scope: { tree: sessionId } }],
            [Type.sessionSend, { sessionId, inputId: "in-intruder", text: "hi" }],
            [Type.sessionInterrupt, { sessionId, expectedTurnId: turnId }],
            [Type.sessionRename, { sessionId, title: "theirs" }],
            [Type.sessionArchive, { sessionId, archived: true }],
            [Type.sessionClose, { sessionId }],
            [Type.sessionSnapshot, { sessionId }],
            [Type.sessionEvents, { sessionId, follow: false }],
            [Type.callbackProvide, { sessionId, kinds: ["approval"] }],
            [Type.callbackAnswer, { sessionId, callbackId: pending!.callbackId, result: { decision: "approve" } }],
            [Type.sessionChildren, { sessionId }],
            [Type.sessionTree, { sessionId }]
          ]
          const foreign = payloads(session.id)
          const unknown = payloads(unknownId)
          // Another workspace, and the owner's workspace under another customer (tenancy is the whole principal).
          for (const who of [intruder, new Principal({ ...principal(), workspaceId: owner.workspaceId })]) {
            for (let i = 0; i < foreign.length; i++) {
              const [type, payload] = foreign[i]!
              const a = yield* refused(type, payload, who)
              const b = yield* refused(type, unknown[i]![1], who)
              assertLikeUnknown(a, session.id, b, unknownId)
            }
          }
          // Listing the roots shows the intruder nothing of the owner's.
          const roots = yield* call(Type.sessionList, {}, intruder, Type.sessionPage, Messages.SessionPage)
          assert.deepStrictEqual(roots.items, [])
          // Nothing changed: same head, title, status, the callback still open, the turn still parked.
          assert.deepStrictEqual(yield* sessions.get(owner, session.id), before)
          assert.deepStrictEqual((yield* sessions.callbacks(owner, session.id)).map((c) => c.callbackId), [pending!.callbackId])
        })
      ))
  })

  describe("session requests", () => {
    it.effect("session.get and session.list answer the caller's sessions, newest first, with paging", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const a = yield* create(who, "assistant", { title: "a" })
          yield* TestClock.adjust(1)
          const b = yield* create(who, "assistant", { title: "b" })
          const got = yield* call(Type.sessionGet, { sessionId: a.id }, who, Type.sessionSummary, Messages.SessionSummary)
          assert.deepStrictEqual(got.session, a)

          const all = yield* call(Type.sessionList, { scope: "roots" }, who, Type.sessionPage, Messages.SessionPage)
          assert.deepStrictEqual(all.items.map((s) => s.id), [b.id, a.id])
          assert.isUndefined(all.nextCursor)
          const first = yield* call(Type.sessionList, { limit: 1 }, who, Type.sessionPage, Messages.SessionPage)
          assert.deepStrictEqual(first.items.map((s) => s.id), [b.id])
          assert.isString(first.nextCursor)
          const second = yield* call(
            Type.sessionList,
            { limit: 1, cursor: first.nextCursor },
            who,
            Type.sessionPage,
            Messages.SessionPage
          )
          assert.deepStrictEqual(second.items.map((s) => s.id), [a.id])

          // Archived sessions are listed on request only.
          yield* call(Type.sessionArchive, { sessionId: a.id, archived: true }, who, Type.sessionSummary, Messages.SessionSummary)
          const live = yield* call(Type.sessionList, {}, who, Type.sessionPage, Messages.SessionPage)
          assert.deepStrictEqual(live.items.map((s) => s.id), [b.id])
          const everything = yield* call(Type.sessionList, { includeArchived: true }, who, Type.sessionPage, Messages.SessionPage)
          assert.deepStrictEqual(everything.items.map((s) => s.id), [b.id, a.id])

          // A cursor that is not one of ours is a bad payload (InvalidInput from the store).
          const bad = yield* refused(Type.sessionList, { cursor: "not-a-cursor" }, who)
          assert.strictEqual(bad.kind, "invalid_payload")
          const unknown = yield* refused(Type.sessionGet, { sessionId: yield* makeSessionId }, who)
          assert.strictEqual(unknown.kind, "not_found")
        })
      ))

    it.effect("session.send starts a turn, repeats are idempotent, other content under one inputId is a conflict", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          const accepted = yield* call(
            Type.sessionSend,
            { sessionId: session.id, inputId: "in-a", text: "hello", source: "cli" },
            who,
            Type.sessionAccepted,
            Messages.SessionAccepted
          )
          assert.strictEqual(accepted.inputId, "in-a")
          assert.strictEqual(accepted.disposition, "started")
          assert.isString(accepted.turnId)
          assert.strictEqual(accepted.cursor, 2)
          const sessions = yield* Sessions
          const result = yield* sessions.awaitTurn(who, session.id, accepted.turnId!, { after: 1 })
          assert.strictEqual(result.output, "You said: hello")

          const repeat = yield* call(
            Type.sessionSend,
            { sessionId: session.id, inputId: "in-a", text: "hello", source: "cli" },
            who,
            Type.sessionAccepted,
            Messages.SessionAccepted
          )
          assert.deepStrictEqual(repeat, { inputId: "in-a", disposition: "admitted" })
          const conflict = yield* refused(Type.sessionSend, { sessionId: session.id, inputId: "in-a", text: "bye" }, who)
          assert.strictEqual(conflict.kind, "conflict")
          assert.deepStrictEqual(conflict.details, { entity: "input", key: "in-a" })
        })
      ))

    it.effect("session.send: queued and steered while a turn runs; busy under the reject policy; session_closed after close", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const queueing = yield* create(who, "worker")
          yield* parkedTurn(who, queueing.id)
          assert.strictEqual((yield* send(who, queueing.id, "later")).disposition, "queued")
          const steered = yield* send(who, queueing.id, "faster", { mode: "steer" })
          assert.strictEqual(steered.disposition, "steered")

          // The wire has no busyPolicy field, so a rejecting session is made through Sessions.
          const sessions = yield* Sessions
          const rejecting = yield* sessions.create(who, { agent: worker, busyPolicy: "reject" })
          const active = yield* parkedTurn(who, rejecting.id)
          const busy = yield* refused(Type.sessionSend, { sessionId: rejecting.id, inputId: "in-busy", text: "now" }, who)
          assert.strictEqual(busy.kind, "busy")
          assert.deepStrictEqual(busy.details, { activeTurnId: active })

          yield* call(Type.sessionClose, { sessionId: rejecting.id }, who, Type.sessionSummary, Messages.SessionSummary)
          const closed = yield* refused(Type.sessionSend, { sessionId: rejecting.id, inputId: "in-late", text: "hi" }, who)
          assert.strictEqual(closed.kind, "session_closed")
        })
      ))

    it.effect("session.interrupt stops exactly the named turn: turn_mismatch for another, already_ended after", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker")
          const turnId = yield* parkedTurn(who, session.id)
          const otherTurn = yield* makeTurnId
          const mismatch = yield* refused(Type.sessionInterrupt, { sessionId: session.id, expectedTurnId: otherTurn }, who)
          assert.strictEqual(mismatch.kind, "turn_mismatch")
          assert.deepStrictEqual(mismatch.details, { expectedTurnId: otherTurn, activeTurnId: turnId })

          const stopped = yield* call(
            Type.sessionInterrupt,
            { sessionId: session.id, expectedTurnId: turnId, reason: "changed my mind" },
            who,
            Type.sessionInterrupted,
            Messages.SessionInterrupted
          )
          assert.deepStrictEqual(stopped, { outcome: "interrupted", turnId })
          const again = yield* call(
            Type.sessionInterrupt,
            { sessionId: session.id, expectedTurnId: turnId },
            who,
            Type.sessionInterrupted,
            Messages.SessionInterrupted
          )
          assert.deepStrictEqual(again, { outcome: "already_ended", turnId })
          const ended = (yield* logOf(session.id)).flatMap((r) => (r.body._tag === "turn_ended" ? [r.body] : []))
          assert.deepStrictEqual(ended.map((e) => [e.outcome, e.reason]), [["interrupted", "changed my mind"]])

          yield* call(Type.sessionClose, { sessionId: session.id }, who, Type.sessionSummary, Messages.SessionSummary)
          const closed = yield* refused(Type.sessionInterrupt, { sessionId: session.id, expectedTurnId: turnId }, who)
          assert.strictEqual(closed.kind, "session_closed")
        })
      ))

    it.effect("session.rename, archive and close answer the summary; a closed session refuses a close, not a rename or archive", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          const summary = (type: string, payload: unknown) =>
            Effect.map(call(type, payload, who, Type.sessionSummary, Messages.SessionSummary), (s) => s.session)
          assert.strictEqual((yield* summary(Type.sessionRename, { sessionId: session.id, title: "renamed" })).title, "renamed")
          assert.isTrue((yield* summary(Type.sessionArchive, { sessionId: session.id, archived: true })).archived)
          assert.isFalse((yield* summary(Type.sessionArchive, { sessionId: session.id, archived: false })).archived)
          const closed = yield* summary(Type.sessionClose, { sessionId: session.id })
          assert.strictEqual(closed.status, "closed")
          assert.strictEqual(closed.title, "renamed")
          assert.strictEqual((yield* refused(Type.sessionClose, { sessionId: session.id }, who)).kind, "session_closed")
          // Reading a closed session still works.
          const got = yield* call(Type.sessionGet, { sessionId: session.id }, who, Type.sessionSummary, Messages.SessionSummary)
          assert.deepStrictEqual(got.session, closed)
          // Rename and archive are metadata (DESIGN §7): a closed session takes them.
          const filed = yield* summary(Type.sessionRename, { sessionId: session.id, title: "again" })
          assert.deepStrictEqual([filed.title, filed.status], ["again", "closed"])
          assert.isTrue((yield* summary(Type.sessionArchive, { sessionId: session.id, archived: true })).archived)
        })
      ))

    it.effect("session.snapshot answers the session, its cursor and its pending work", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker")
          yield* parkedTurn(who, session.id)
          const answer = yield* call(Type.sessionSnapshot, { sessionId: session.id }, who, Type.sessionSnapshot, Messages.SessionSnapshot)
          const head = yield* headOf(who, session.id)
          assert.strictEqual(answer.cursor, head)
          assert.strictEqual(answer.snapshot.cursor, head)
          assert.strictEqual(answer.snapshot.session.id, session.id)
          assert.strictEqual(answer.snapshot.session.status, "waiting")
          assert.strictEqual(answer.snapshot.openCallbacks, 1)
          assert.strictEqual(answer.snapshot.pendingInputs, 0)
        })
      ))

    it.effect("a store failure is internal and retryable, and a defect is internal; neither leaks its cause", () => {
      const failing = Layer.effect(
        SessionStore,
        Effect.map(SessionStore, (store) =>
          SessionStore.of({
            ...store,
            list: () =>
              Effect.fail(new StoreUnavailable({ operation: "list", cause: new Error("db.internal password=hunter2") })),
            readInbox: () => Effect.die(new Error("secret row 42 at SqlSessionStore.ts:10"))
          }))
      ).pipe(Layer.provide(MemorySessionStore.layer))
      return withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const unavailable = yield* refused(Type.sessionList, {}, who)
          assert.strictEqual(unavailable.kind, "internal")
          assert.isTrue(unavailable.retryable)
          assert.notInclude(unavailable.message, "hunter2")
          const session = yield* Effect.flatMap(Sessions, (s) => s.create(who, { agent: assistant }))
          const died = yield* refused(Type.sessionSnapshot, { sessionId: session.id }, who)
          assert.strictEqual(died.kind, "internal")
          assert.notInclude(died.message, "secret")
          assert.isUndefined(died.details)
        }), { store: failing })
    })
  })

  describe("children", () => {
    it.effect("session.children and session.tree answer the lineage; a child refuses send and close as forbidden", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const store = yield* SessionStore
          const root = yield* create(who, "assistant", { title: "root" })
          const kids: Array<SessionId> = []
          for (let i = 0; i < 5; i++) {
            kids.push((yield* store.create({ principal: who, agent: assistant, parentId: root.id, alias: `a${i}` })).id)
          }
          const grandchild = yield* store.create({ principal: who, agent: assistant, parentId: kids[0]!, alias: "g" })
          const first = yield* call(Type.sessionChildren, { sessionId: root.id, limit: 3 }, who, Type.sessionChildrenPage, Messages.SessionChildrenPage)
          assert.deepStrictEqual(first.items.map((item) => [item.session.id, item.alias, item.agent, item.agentPath]), [
            [kids[4]!, "a4", "assistant", ["assistant", "assistant"]],
            [kids[3]!, "a3", "assistant", ["assistant", "assistant"]],
            [kids[2]!, "a2", "assistant", ["assistant", "assistant"]]
          ])
          const rest = yield* call(
            Type.sessionChildren,
            { sessionId: root.id, cursor: first.nextCursor, limit: 3 },
            who,
            Type.sessionChildrenPage,
            Messages.SessionChildrenPage
          )
          assert.deepStrictEqual(rest.items.map((item) => item.session.id), [kids[1], kids[0]])
          assert.isUndefined(rest.nextCursor)
          // A cursor of this listing on another one is refused, never a page of something else.
          const elsewhere = yield* refused(Type.sessionChildren, { sessionId: kids[0], cursor: first.nextCursor }, who)
          assert.strictEqual(elsewhere.kind, "invalid_payload")
          const inCatalog = yield* refused(Type.sessionList, { scope: { children: root.id }, cursor: first.nextCursor }, who)
          assert.strictEqual(inCatalog.kind, "invalid_payload")
          assert.strictEqual((yield* refused(Type.sessionChildren, { sessionId: root.id, limit: 0 }, who)).kind, "invalid_payload")

          const tree = yield* call(Type.sessionTree, { sessionId: root.id }, who, Type.sessionTree, Messages.SessionTree)
          assert.strictEqual(tree.root.id, root.id)
          assert.deepStrictEqual(tree.nodes.map((node) => [node.session.id, node.parentId, node.alias]), [
            ...kids.map((id, i) => [id, root.id, `a${i}`]),
            [grandchild.id, kids[0]!, "g"]
          ])

          // Outside control of a child: send and close are forbidden, rename and archive pass.
          for (const [type, payload] of [
            [Type.sessionSend, { sessionId: kids[0], inputId: "in-outside", text: "psst" }],
            [Type.sessionSend, { sessionId: kids[0], inputId: "in-outside-2", text: "psst", mode: "steer" }],
            [Type.sessionClose, { sessionId: kids[0] }]
          ] as const) {
            const error = yield* refused(type, payload, who)
            assert.strictEqual(error.kind, "forbidden", type)
            assert.deepStrictEqual((error.details as { parentId: string }).parentId, root.id)
          }
          const renamed = yield* call(Type.sessionRename, { sessionId: kids[0], title: "kid" }, who, Type.sessionSummary, Messages.SessionSummary)
          assert.strictEqual(renamed.session.title, "kid")
          assert.deepStrictEqual(yield* store.readInbox(kids[0]!), [])

          // A subtree too large for one frame is refused with a hint, and the connection's limit is never broken.
          const big = yield* create(who)
          for (let i = 0; i < 5; i++) {
            yield* store.create({ principal: who, agent: assistant, parentId: big.id, metadata: { blob: "x".repeat(1_000_000) } })
          }
          const tooLarge = yield* refused(Type.sessionTree, { sessionId: big.id }, who)
          assert.strictEqual(tooLarge.kind, "invalid_payload")
          assert.include(tooLarge.message, "session.list")
        })
      ))
  })

  describe("session.events", () => {
    it.effect("an event's frame payload is the schema's encoding, for every record type and for deltas", () =>
      Effect.gen(function*() {
        const turnId = yield* makeTurnId
        const operationId = yield* makeOperationId
        const callbackId = yield* makeCallbackId
        const sessionId = yield* makeSessionId
        const inputId = InputId.make("in-1")
        const usage = new Usage({ ...Usage.zero, inputTokens: 3, toolCallsByName: { echo: 1 } })
        const bodies: ReadonlyArray<RecordBody> = [
          new Record.SessionCreated({ agentName: "a", parentId: null, title: "t" }),
          // Optional members set to undefined, as records built in memory have them.
          new Record.TurnStarted({ turnId, inputId, text: "hi", run: undefined, excludeFromAnalytics: undefined }),
          new Record.TurnStarted({ turnId, inputId, text: "hi", run: new RunOptions({ permissions: { default: "ask", rules: { echo: "allow" } } }), excludeFromAnalytics: true }),
          new Record.TurnEnded({
            turnId,
            outcome: "failed",
            output: undefined,
            failureCode: "budget_exhausted",
            failure: { _tag: "BudgetExhausted", dimension: "toolCalls", limit: 1, observed: 2, toolName: "deep" },
            usage
          }),
          new Record.InputApplied({ inputId, kind: "steer", turnId }),
          new Record.OperationStarted({ operationId, turnId, kind: "tool", name: "echo", input: { callId: "c1", arguments: '{"x":[1,"2"]}', requestedBy: operationId } }),
          new Record.OperationCompleted({ operationId, turnId, output: "ok", isError: false }),
          new Record.OperationUnknown({ operationId, turnId }),
          new Record.CallbackOpened({ callbackId, turnId, operationId, kind: "approval", request: new ApprovalRequest({ toolName: "echo", callId: "c1", arguments: "{}" }) }),
          new Record.CallbackResolved({ callbackId, turnId, resolution: "answered", result: { approved: true } }),
          new Record.ChildSpawned({ childSessionId: sessionId, agentName: "b", alias: null }),
          new Record.ChildResultRecorded({ childSessionId: sessionId, turnId, outcome: "completed", output: "done" }),
          new Record.ChildrenAwaited({ turnId, parked: true }),
          new Record.Renamed({ title: "new" }),
          new Record.Archived({ archived: true }),
          new Record.Closed({}),
          new Record.ContextCompacted({
            turnId,
            mode: "micro",
            messagesBefore: 9,
            tokensBefore: 900,
            tokensAfter: 300,
            archived: [{ index: 2, callId: "c1", toolName: "echo", artifactId: operationId, turnId, seq: 7, chars: 4000, marker: "<archived_tool_result>" }]
          }),
          new Record.HandoffRecorded({ turnId, operationId, from: "triage", to: "billing", reason: "a refund" }),
          new Record.GuardrailChecked({ turnId, stage: "output", guardrail: "no_secrets", allowed: false, reason: "a key" }),
          new Record.OutputRejected({ turnId, operationId, attempt: 1, problems: "$.total: missing" })
        ]
        assert.strictEqual(new Set(bodies.map((body) => body._tag)).size, RecordBody.members.length)
        const events: ReadonlyArray<SessionEvent> = [
          ...bodies.map((record, i) => new Durable({ sessionId, cursor: i + 1, at: NOW + i, record })),
          new AssistantDelta({ sessionId, turnId, text: "hel" })
        ]
        const encode = Schema.encodeSync(Messages.SessionEventFrame)
        for (const event of events) {
          const payload = SessionRoutes.eventFramePayload(event)
          const where = event._tag === "durable" ? event.record._tag : event._tag
          assertPlain(payload, where)
          const frame = event._tag === "durable" ? { cursor: event.cursor, event } : { event }
          assert.deepStrictEqual(payload, plain(encode(frame)), where)
          // A peer reads it back as the same event (undefined members are absent, as they are in the schema's encoding).
          const read = overTheWire({ type: Type.sessionEvent, payload }, Messages.SessionEventFrame)
          assert.deepStrictEqual(plain(encode(read)), payload, where)
        }
      }))

    it.effect("follow: false replays the log after the cursor and ends with done at the head", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          yield* turn(who, session.id, "one")
          yield* turn(who, session.id, "two")
          const head = yield* headOf(who, session.id)
          const log = yield* logOf(session.id)
          for (const after of [0, 3, head, head + 5]) {
            const stream = yield* openStream(Type.sessionEvents, { sessionId: session.id, after, follow: false }, who)
            const end = yield* eventsEnd(stream)
            const cursors = durableCursors(stream.frames)
            assert.deepStrictEqual(cursors, range(after + 1, head), `after ${after}`)
            assert.deepStrictEqual(end, { reason: "done", cursor: cursors.at(-1) ?? after })
            // The events are the log's records.
            for (const { event } of eventsOf(stream.frames)) {
              assert.strictEqual(event._tag, "durable")
              if (event._tag === "durable") {
                const record = log[event.cursor - 1]!
                assert.deepStrictEqual(plain(event.record), plain(record.body))
                assert.strictEqual(event.at, record.at)
                assert.isAbove(event.at, 2 ** 32)
              }
            }
          }
        })
      ))

    it.effect("replays from `after`, then follows live events without gap or duplicate, until cancelled", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          yield* turn(who, session.id, "one")
          const after = 3
          const stream = yield* openStream(Type.sessionEvents, { sessionId: session.id, after }, who)
          yield* turn(who, session.id, "two")
          yield* turn(who, session.id, "three")
          const head = yield* headOf(who, session.id)
          yield* eventually(Effect.sync(() => durableCursors(stream.frames).at(-1) === head), "the stream reaches the head")
          yield* stream.send(Type.sessionEventsCancel)
          const end = yield* eventsEnd(stream)
          assert.deepStrictEqual(end, { reason: "cancelled", cursor: head })
          assert.deepStrictEqual(durableCursors(stream.frames), range(after + 1, head))
          const outputs = eventsOf(stream.frames).flatMap(({ event }) =>
            event._tag === "durable" && event.record._tag === "turn_ended" ? [event.record.output] : []
          )
          // Cursor 3 is inside the first turn: its end is replayed, then the two turns that ran live.
          assert.deepStrictEqual(outputs, ["You said: one", "You said: two", "You said: three"])
        })
      ))

    it.effect("volatile: true carries assistant deltas without a cursor; they are left out otherwise", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          const head = yield* headOf(who, session.id)
          const withDeltas = yield* openStream(Type.sessionEvents, { sessionId: session.id, after: head, volatile: true }, who)
          const without = yield* openStream(Type.sessionEvents, { sessionId: session.id, after: head }, who)
          // Both must be following before the turn starts, or its deltas could pass before the subscription.
          yield* settle
          yield* turn(who, session.id, "stream me")
          const ended = (frames: ReadonlyArray<Outgoing>) =>
            eventsOf(frames).some(({ event }) => event._tag === "durable" && event.record._tag === "turn_ended")
          yield* eventually(Effect.sync(() => ended(withDeltas.frames) && ended(without.frames)), "both see the turn end")
          const deltas = eventsOf(withDeltas.frames).flatMap(({ cursor, event }) =>
            event._tag === "assistant_delta" ? [{ cursor, text: event.text }] : []
          )
          assert.isAbove(deltas.length, 1)
          assert.isTrue(deltas.every((d) => d.cursor === undefined))
          assert.strictEqual(deltas.map((d) => d.text).join(""), "You said: stream me")
          assert.isFalse(eventsOf(without.frames).some(({ event }) => event._tag === "assistant_delta"))
          assert.deepStrictEqual(durableCursors(withDeltas.frames), durableCursors(without.frames))
          yield* withDeltas.send(Type.sessionEventsCancel)
          yield* without.send(Type.sessionEventsCancel)
          assert.strictEqual((yield* eventsEnd(withDeltas)).reason, "cancelled")
          assert.strictEqual((yield* eventsEnd(without)).reason, "cancelled")
        })
      ))

    it.effect("cancel ends a stream that waits for events, and one whose emit is blocked, with the cursor sent", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who)
          yield* turn(who, session.id)
          const head = yield* headOf(who, session.id)
          const idle = yield* openStream(Type.sessionEvents, { sessionId: session.id }, who)
          yield* eventually(Effect.sync(() => idle.frames.length === head), "the replay")
          yield* settle
          yield* idle.send("session.something.else")
          yield* idle.send(Type.sessionEventsCancel)
          assert.deepStrictEqual(yield* eventsEnd(idle), { reason: "cancelled", cursor: head })

          const blocked = yield* openStream(Type.sessionEvents, { sessionId: session.id }, who, { gate: false })
          yield* settle
          yield* blocked.send(Type.sessionEventsCancel)
          yield* settle
          // The frame being written when the cancel came is still sent (a frame cannot be half sent), then the stream ends.
          yield* blocked.gate.open
          const end = yield* eventsEnd(blocked)
          assert.strictEqual(end.reason, "cancelled")
          assert.deepStrictEqual(durableCursors(blocked.frames), range(1, end.cursor))
          assert.isAtMost(blocked.frames.length, 1)
        })
      ))

    it.effect("a slow consumer is ended with slow_consumer and the cursor it was sent; resuming there has no gap or duplicate", () =>
      withRoutes(
        () =>
          Effect.gen(function*() {
            const who = principal()
            const session = yield* create(who)
            // More history than the buffer holds: the replay waits for the client, it never overflows.
            for (const text of ["a", "b", "c"]) yield* turn(who, session.id, text)
            const history = yield* headOf(who, session.id)
            assert.isAbove(history, 4)
            const stream = yield* openStream(Type.sessionEvents, { sessionId: session.id }, who, { gate: false })
            yield* settle
            assert.isNull(stream.fiber.unsafePoll(), "the replay waits for the client")
            yield* stream.gate.open
            yield* eventually(Effect.sync(() => stream.frames.length === history), "the replay")
            yield* stream.gate.close
            yield* settle
            assert.isNull(stream.fiber.unsafePoll(), "the replay did not overflow")
            assert.deepStrictEqual(durableCursors(stream.frames), range(1, history))

            // A subscriber that keeps up: without one, the slow subscription leaving mid-turn would be the session's
            // last live subscriber, which trips a host bug (InProcessHost shuts the hub down under a publishing turn).
            yield* Effect.fork(Stream.runDrain((yield* Sessions).events(who, session.id, { after: history })))
            yield* settle
            // Now live events come faster than the socket drains.
            for (const text of ["d", "e", "f"]) yield* turn(who, session.id, text)
            yield* settle
            const head = yield* headOf(who, session.id)
            yield* stream.gate.open
            const end = yield* eventsEnd(stream)
            assert.strictEqual(end.reason, "slow_consumer")
            const sent = durableCursors(stream.frames)
            assert.deepStrictEqual(sent, range(1, end.cursor), "no gap, no duplicate, and the cursor is the last one sent")
            assert.isBelow(end.cursor, head)
            // The bounded buffer: at most one frame in flight and four buffered were sent after the history.
            assert.isAtMost(stream.frames.length - history, 5)

            const resumed = yield* openStream(Type.sessionEvents, { sessionId: session.id, after: end.cursor, follow: false }, who)
            assert.deepStrictEqual(yield* eventsEnd(resumed), { reason: "done", cursor: head })
            assert.deepStrictEqual([...sent, ...durableCursors(resumed.frames)], range(1, head))
            assert.deepStrictEqual(
              [...eventsOf(stream.frames), ...eventsOf(resumed.frames)].flatMap(({ event }) =>
                event._tag === "durable" ? [plain(event.record)] : []
              ),
              (yield* logOf(session.id)).map((record) => plain(record.body))
            )
          }),
        { routes: { eventBuffer: 4 } }
      ))

    it.effect("a followed session that closes ends the stream with closed, after the records of the close", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker")
          yield* parkedTurn(who, session.id)
          const stream = yield* openStream(Type.sessionEvents, { sessionId: session.id }, who)
          yield* settle
          yield* call(Type.sessionClose, { sessionId: session.id }, who, Type.sessionSummary, Messages.SessionSummary)
          const head = yield* headOf(who, session.id)
          assert.deepStrictEqual(yield* eventsEnd(stream), { reason: "closed", cursor: head })
          assert.deepStrictEqual(durableCursors(stream.frames), range(1, head))
          const tags = eventsOf(stream.frames).flatMap(({ event }) => (event._tag === "durable" ? [event.record._tag] : []))
          assert.includeMembers(tags, ["callback_resolved", "turn_ended", "closed"])

          // A subscription to a closed session replays and ends at once.
          const late = yield* openStream(Type.sessionEvents, { sessionId: session.id, after: 2 }, who)
          assert.deepStrictEqual(yield* eventsEnd(late), { reason: "closed", cursor: head })
          assert.deepStrictEqual(durableCursors(late.frames), range(3, head))
        })
      ))

    it.effect("an unknown session is not_found before any frame", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const stream = yield* openStream(Type.sessionEvents, { sessionId: yield* makeSessionId }, principal())
          const exit = yield* Fiber.await(stream.fiber)
          assert.strictEqual(exit._tag, "Failure")
          const error = yield* Effect.flip(exit)
          assert.strictEqual(error.kind, "not_found")
          assert.deepStrictEqual(stream.frames, [])
        })
      ))
  })

  describe("callbacks", () => {
    it.effect("callback.provide opens each approval as callback.open; callback.answer approves it and the turn completes", () =>
      withRoutes((runs) =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker")
          const provider = yield* openStream(Type.callbackProvide, { sessionId: session.id, kinds: ["approval"] }, who)
          yield* settle
          const accepted = yield* send(who, session.id, "ship it")
          const turnId = accepted.turnId!
          yield* eventually(Effect.sync(() => provider.frames.length === 1), "callback.open")
          assert.strictEqual(provider.frames[0]!.type, Type.callbackOpen)
          const { callback } = overTheWire(provider.frames[0]!, Messages.CallbackOpen)
          assert.strictEqual(callback.kind, "approval")
          assert.strictEqual(callback.sessionId, session.id)
          assert.strictEqual(callback.turnId, turnId)
          assert.isNull(callback.parentSessionId)
          assert.deepStrictEqual(callback.agentPath, ["worker"])
          assert.strictEqual(callback.request._tag, "approval")
          assert.strictEqual(callback.request.toolName, "deploy")
          assert.strictEqual(callback.request.callId, "c1")
          assert.strictEqual(callback.openedAt, NOW)
          // The provider left it open for the client: nothing ran yet.
          assert.strictEqual(yield* Ref.get(runs), 0)

          const answer = {
            sessionId: session.id,
            callbackId: callback.callbackId,
            turnId,
            operationId: callback.operationId,
            result: { decision: "approve" }
          }
          const ok = yield* call(Type.callbackAnswer, answer, who, Type.callbackAccepted, Messages.Empty)
          assert.deepStrictEqual(ok, {})
          const sessions = yield* Sessions
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "done")
          assert.strictEqual(yield* Ref.get(runs), 1)

          const stale = yield* refused(Type.callbackAnswer, answer, who)
          assert.strictEqual(stale.kind, "stale_callback")
          assert.deepStrictEqual(stale.details, { callbackId: callback.callbackId, reason: "answered" })

          yield* provider.send(Type.callbackProvideCancel)
          const end = yield* endOf(provider, Type.callbackProvideEnd, Messages.CallbackProvideEnd)
          assert.deepStrictEqual(end, { reason: "cancelled" })

          // Withdrawn: the next turn's approval is not offered to it, and stays open for a manual answer.
          const next = yield* send(who, session.id, "again")
          yield* eventually(
            Effect.map(sessions.callbacks(who, session.id), (open) => open.length === 1),
            "the second approval"
          )
          yield* settle
          assert.strictEqual(provider.frames.length, 1)
          const [second] = yield* sessions.callbacks(who, session.id)
          yield* call(
            Type.callbackAnswer,
            { sessionId: session.id, callbackId: second!.callbackId, result: { decision: "deny", reason: "not today" } },
            who,
            Type.callbackAccepted,
            Messages.Empty
          )
          assert.strictEqual((yield* sessions.awaitTurn(who, session.id, next.turnId!)).output, "done again")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("a provider is offered callbacks already open, only of its kinds", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker")
          yield* parkedTurn(who, session.id)
          const clientTools = yield* openStream(Type.callbackProvide, { sessionId: session.id, kinds: ["client_tool"] }, who)
          const approvals = yield* openStream(Type.callbackProvide, { sessionId: session.id, kinds: ["approval"] }, who)
          yield* eventually(Effect.sync(() => approvals.frames.length === 1), "the open approval")
          yield* settle
          assert.deepStrictEqual(clientTools.frames, [])
          for (const stream of [clientTools, approvals]) {
            yield* stream.send(Type.callbackProvideCancel)
            assert.strictEqual((yield* Fiber.join(stream.fiber)).type, Type.callbackProvideEnd)
          }
        })
      ))

    it.effect("callback.answer: a stale, mismatched or ill-shaped answer is refused, and a closed session's is session_closed", () =>
      withRoutes(() =>
        Effect.gen(function*() {
          const who = principal()
          const session = yield* create(who, "worker")
          const turnId = yield* parkedTurn(who, session.id)
          const sessions = yield* Sessions
          const [pending] = yield* sessions.callbacks(who, session.id)
          const base = { sessionId: session.id, callbackId: pending!.callbackId }

          const unknown = yield* refused(Type.callbackAnswer, { ...base, callbackId: yield* makeCallbackId, result: { decision: "approve" } }, who)
          assert.strictEqual(unknown.kind, "stale_callback")
          assert.strictEqual((unknown.details as { reason: string }).reason, "not_open")
          const mismatch = yield* refused(Type.callbackAnswer, { ...base, turnId: yield* makeTurnId, result: { decision: "approve" } }, who)
          assert.strictEqual(mismatch.kind, "stale_callback")
          assert.strictEqual((mismatch.details as { reason: string }).reason, "mismatch")
          const shape = yield* refused(Type.callbackAnswer, { ...base, result: { decision: "maybe" } }, who)
          assert.strictEqual(shape.kind, "invalid_payload")
          // A big integer from CBOR is refused before it reaches the store's JSON.
          const big = yield* refused(Type.callbackAnswer, { ...base, result: { decision: "approve", n: 2n ** 64n - 1n } }, who)
          assert.strictEqual(big.kind, "invalid_payload")
          assert.lengthOf(yield* sessions.callbacks(who, session.id), 1)

          yield* call(Type.sessionInterrupt, { sessionId: session.id, expectedTurnId: turnId }, who, Type.sessionInterrupted, Messages.SessionInterrupted)
          const cancelled = yield* refused(Type.callbackAnswer, { ...base, result: { decision: "approve" } }, who)
          assert.strictEqual(cancelled.kind, "stale_callback")
          assert.strictEqual((cancelled.details as { reason: string }).reason, "cancelled")

          yield* call(Type.sessionClose, { sessionId: session.id }, who, Type.sessionSummary, Messages.SessionSummary)
          const closed = yield* refused(Type.callbackAnswer, { ...base, result: { decision: "approve" } }, who)
          assert.strictEqual(closed.kind, "session_closed")
        })
      ))
  })
})
