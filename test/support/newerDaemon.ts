/**
 * A daemon from the future, for the forward-compatibility tests: the real
 * session routes over a real runtime, on the real wire, with what a newer
 * version of troupe would add to what they send.
 *
 * - Event replays hold two records this client has never seen, right after
 *   each `turn_started`: one of a new kind (`sandbox_snapshot`) and one of a
 *   known kind with a value it cannot read (an `operation_started` of kind
 *   `sandbox`), the cursors after them moved on by two, as a newer log would
 *   number them; a subscription asking for volatile events also gets an event
 *   of a new kind (`tool_progress`) there. Every event and record carries an
 *   unknown field.
 * - Summaries (every answer with a session in it) carry unknown fields in the
 *   session, its agent and its tools.
 * - A provider stream first offers a callback of a new kind (`elicitation`),
 *   then the real ones, each with an unknown field.
 */
import { Effect, Layer } from "effect"
import * as Messages from "../../src/protocol/Messages.js"
import { type Exchange, type Outgoing, type Route, Router } from "../../src/server/Router.js"
import * as SessionRoutes from "../../src/server/SessionRoutes.js"

/** How many records of the future follow each `turn_started`. */
export const FUTURE_RECORDS = 2

type Json = Record<string, unknown>

const asMap = (u: unknown): Json => (typeof u === "object" && u !== null ? u as Json : {})

/** A session as a newer daemon describes it: fields this client does not know, at every level. */
const newerSession = (session: unknown): unknown => {
  const s = asMap(session)
  const agent = asMap(s.agent)
  const tools = Array.isArray(agent.tools) ? agent.tools.map((tool) => ({ ...asMap(tool), sandboxed: true })) : agent.tools
  return { ...s, region: "eu-1", agent: { ...agent, tools, toolsets: [{ name: "fs", server: "mcp://fs" }] } }
}

/** Every session in an answer, described by a newer daemon. */
const newerAnswer = (payload: unknown): unknown => {
  const p = asMap(payload)
  if ("session" in p) return { ...p, session: newerSession(p.session) }
  if ("snapshot" in p) return { ...p, snapshot: { ...asMap(p.snapshot), session: newerSession(asMap(p.snapshot).session) } }
  if (Array.isArray(p.items)) {
    return { ...p, items: p.items.map((item) => "session" in asMap(item) ? { ...asMap(item), session: newerSession(asMap(item).session) } : newerSession(item)) }
  }
  return payload
}

/** A `session.events` handler of a newer daemon, over the real one. */
const newerEvents = (route: Route): Route => ({
  ...route,
  handler: (exchange: Exchange) => {
    const volatile = asMap(exchange.payload).volatile === true
    let shift = 0
    const durable = (sessionId: unknown, cursor: number, at: unknown, record: Json): Outgoing => ({
      type: Messages.Type.sessionEvent,
      payload: { cursor, event: { _tag: "durable", sessionId, cursor, at, record, shard: 7 } }
    })
    const emit = (message: Outgoing): Effect.Effect<void> => {
      if (message.type !== Messages.Type.sessionEvent) return exchange.emit(message)
      const payload = asMap(message.payload)
      const event = asMap(payload.event)
      if (event._tag !== "durable") return exchange.emit({ ...message, payload: { ...payload, event: { ...event, shard: 7 } } })
      const record = asMap(event.record)
      const cursor = (payload.cursor as number) + shift
      const moved = durable(event.sessionId, cursor, event.at, { ...record, traceId: "t-1" })
      if (record._tag !== "turn_started") return exchange.emit(moved)
      const turnId = record.turnId
      shift += FUTURE_RECORDS
      return Effect.all([
        exchange.emit(moved),
        exchange.emit(durable(event.sessionId, cursor + 1, event.at, { _tag: "sandbox_snapshot", turnId, snapshotId: "snap_1", bytes: 4096 })),
        exchange.emit(durable(event.sessionId, cursor + 2, event.at, {
          _tag: "operation_started",
          operationId: "op_future",
          turnId,
          kind: "sandbox",
          name: "fs.mount",
          input: { path: "/work" }
        })),
        volatile
          ? exchange.emit({ type: Messages.Type.sessionEvent, payload: { event: { _tag: "tool_progress", sessionId: event.sessionId, turnId, fraction: 0.5 } } })
          : Effect.void
      ], { discard: true })
    }
    return Effect.map(route.handler({ ...exchange, emit }), (end) => {
      const p = asMap(end.payload)
      return typeof p.cursor === "number" ? { ...end, payload: { ...p, cursor: p.cursor + shift } } : end
    })
  }
})

/** A `callback.provide` handler of a newer daemon: a callback of a new kind first, then the real ones. */
const newerProvider = (route: Route): Route => ({
  ...route,
  handler: (exchange: Exchange) => {
    let offered = false
    const emit = (message: Outgoing): Effect.Effect<void> => {
      if (message.type !== Messages.Type.callbackOpen) return exchange.emit(message)
      const callback = asMap(asMap(message.payload).callback)
      const real = exchange.emit({ ...message, payload: { callback: { ...callback, priority: "high" } } })
      if (offered) return real
      offered = true
      const future = {
        callback: {
          ...callback,
          callbackId: "cb_future",
          kind: "elicitation",
          request: { _tag: "elicitation", question: "Which region?", schema: { type: "string" } }
        }
      }
      return Effect.andThen(exchange.emit({ type: Messages.Type.callbackOpen, payload: future }), real)
    }
    return route.handler({ ...exchange, emit })
  }
})

/** The session routes as a newer daemon serves them. */
export const routes = (options: SessionRoutes.Options = {}) =>
  Layer.effect(
    Router,
    Effect.map(SessionRoutes.make(options), (router) =>
      Router.of({
        route: (type) => {
          const route = router.route(type)
          if (route === undefined) return route
          if (type === Messages.Type.sessionEvents) return newerEvents(route)
          if (type === Messages.Type.callbackProvide) return newerProvider(route)
          return {
            ...route,
            handler: (exchange) => Effect.map(route.handler(exchange), (answer) => ({ ...answer, payload: newerAnswer(answer.payload) }))
          }
        }
      }))
  )
