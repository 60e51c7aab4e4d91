/**
 * The payloads of troupe's wire messages (PROTOCOL.md, "Message types"): one
 * schema per message type, shared by the daemon and the clients. Payloads are
 * CBOR maps; decoders ignore unknown fields (schemas here are structs, which
 * drop excess properties by default). `core.error` is `ProtocolError.ErrorPayload`
 * and `core.ready` is `Handshake.Ready`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { MAX_JSON_DEPTH, tooDeep } from "./Cbor.js"
import { FLAG_SESSION_START, FLAG_SHUTDOWN, FLAG_TERMINAL } from "./Frame.js"
import { Budgets } from "../schema/Budget.js"
import { CallbackKind, PendingCallback } from "../schema/Callback.js"
import { SessionEvent, Snapshot } from "../schema/Event.js"
import { CallbackId, InputId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import { Principal } from "../schema/Principal.js"
import { Session } from "../schema/Session.js"
import { ToolsetBinding } from "../schema/Toolset.js"

/**
 * Whether a value survives the store's JSON unchanged: CBOR also carries byte
 * strings, bigints beyond 2^53 and non-finite floats, which JSON would turn
 * into something else or refuse with a throw. Called only on values `tooDeep`
 * passed, so its recursion is at most `MAX_JSON_DEPTH` deep.
 */
const isJson = (value: unknown): boolean => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value)
    case "object":
      if (value === null) return true
      if (Array.isArray(value)) return value.every((item) => item !== undefined && isJson(item))
      // A member that is undefined is dropped by JSON, as an absent one.
      return Object.getPrototypeOf(value) === Object.prototype &&
        Object.values(value).every((item) => item === undefined || isJson(item))
    default:
      return false
  }
}

/**
 * JSON data: what the store keeps as JSON must come as JSON from the wire, and
 * nested at most `MAX_JSON_DEPTH` levels, so that it fits any answer or event
 * that carries it later.
 */
export const JsonData = Schema.Unknown.pipe(
  Schema.filter((value) =>
    tooDeep(value, MAX_JSON_DEPTH)
      ? `JSON data nested deeper than ${MAX_JSON_DEPTH} levels`
      : isJson(value) || "expected JSON data (no byte strings, integers beyond 2^53, or non-finite numbers)"
  )
)

/** An empty map payload (`{}`); unknown fields are ignored. */
export const Empty = Schema.Struct({})

/** `auth.hello`. */
export const AuthHello = Schema.Struct({
  token: Schema.optional(Schema.String),
  client: Schema.optional(Schema.String),
  excludeFromAnalytics: Schema.optional(Schema.Boolean)
})

/** `auth.welcome`. */
export const AuthWelcome = Schema.Struct({ principal: Principal })

/** One agent a daemon serves. */
export const AgentInfo = Schema.Struct({ name: Schema.String, description: Schema.String })

/** `agent.page`. */
export const AgentPage = Schema.Struct({ items: Schema.Array(AgentInfo) })

/** `session.create`: `agent` names one of the daemon's agents. */
export const SessionCreate = Schema.Struct({
  agent: Schema.String,
  title: Schema.optional(Schema.String),
  idempotencyKey: Schema.optional(Schema.String),
  budgets: Schema.optional(Budgets),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: JsonData })),
  /** Toolsets bound to the session beside its agent's, by name or id (decision 0048). */
  toolsets: Schema.optional(Schema.Array(ToolsetBinding).pipe(Schema.maxItems(32)))
})

/** `session.created`. */
export const SessionCreated = Schema.Struct({ session: Session })

/** A payload naming a session. */
export const SessionRef = Schema.Struct({ sessionId: SessionId })

/** `session.summary`. */
export const SessionSummary = Schema.Struct({ session: Session })

/** `session.list`. */
export const SessionList = Schema.Struct({
  scope: Schema.optional(Schema.Union(
    Schema.Literal("roots"),
    Schema.Struct({ children: SessionId }),
    Schema.Struct({ tree: SessionId })
  )),
  includeArchived: Schema.optional(Schema.Boolean),
  cursor: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)))
})

/** `session.page`. */
export const SessionPage = Schema.Struct({
  items: Schema.Array(Session),
  nextCursor: Schema.optional(Schema.String)
})

/** `session.send`. */
export const SessionSend = Schema.Struct({
  sessionId: SessionId,
  inputId: InputId,
  text: Schema.String,
  source: Schema.optional(Schema.String),
  mode: Schema.optionalWith(Schema.Literal("queue", "steer"), { default: () => "queue" as const })
})

/** `session.accepted`. */
export const SessionAccepted = Schema.Struct({
  inputId: Schema.String,
  disposition: Schema.optional(Schema.Literal("started", "queued", "steered", "admitted")),
  turnId: Schema.optional(TurnId),
  cursor: Schema.optional(Schema.Number)
})

/** `session.interrupt`. */
export const SessionInterrupt = Schema.Struct({
  sessionId: SessionId,
  expectedTurnId: TurnId,
  reason: Schema.optional(Schema.String)
})

/** `session.interrupted`. */
export const SessionInterrupted = Schema.Struct({
  outcome: Schema.Literal("interrupted", "already_ended", "requested"),
  turnId: Schema.optional(TurnId)
})

/** `session.rename`. */
export const SessionRename = Schema.Struct({ sessionId: SessionId, title: Schema.String })

/** `session.archive`. */
export const SessionArchive = Schema.Struct({ sessionId: SessionId, archived: Schema.Boolean })

/** `session.snapshot` (the answer; the request is a `SessionRef`). */
export const SessionSnapshot = Schema.Struct({ snapshot: Snapshot, cursor: Schema.Number })

/** `session.events`: opens an event stream. */
export const SessionEvents = Schema.Struct({
  sessionId: SessionId,
  after: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.nonNegative())),
  volatile: Schema.optional(Schema.Boolean),
  follow: Schema.optional(Schema.Boolean)
})

/** `session.event`: one event; `cursor` is set for durable events. */
export const SessionEventFrame = Schema.Struct({
  cursor: Schema.optional(Schema.Number),
  event: SessionEvent
})

/** Why an event stream ended. */
export const EventsEndReason = Schema.Literal("done", "cancelled", "slow_consumer", "closed")

/** `session.events.end`: TERMINAL; `cursor` is where to resume. */
export const SessionEventsEnd = Schema.Struct({ reason: EventsEndReason, cursor: Schema.Number })

/** `callback.provide`: opens a provider stream. */
export const CallbackProvide = Schema.Struct({
  sessionId: SessionId,
  kinds: Schema.Array(CallbackKind).pipe(Schema.minItems(1))
})

/** `callback.open`: a callback for the provider to answer with `callback.answer`. */
export const CallbackOpen = Schema.Struct({ callback: PendingCallback })

/** `callback.provide.end`: TERMINAL. */
export const CallbackProvideEnd = Schema.Struct({ reason: Schema.optional(Schema.String) })

/** `callback.answer`. */
export const CallbackAnswer = Schema.Struct({
  sessionId: SessionId,
  callbackId: CallbackId,
  result: JsonData,
  turnId: Schema.optional(TurnId),
  operationId: Schema.optional(OperationId)
})

/** `session.children`: a page of a session's direct children. */
export const SessionChildren = Schema.Struct({
  sessionId: SessionId,
  cursor: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 500)))
})

/** One child in `session.children.page`. */
export const ChildItem = Schema.Struct({
  session: Session,
  alias: Schema.NullOr(Schema.String),
  agent: Schema.String,
  agentPath: Schema.Array(Schema.String)
})

/** `session.children.page`: direct children, newest first, archived included. */
export const SessionChildrenPage = Schema.Struct({
  items: Schema.Array(ChildItem),
  nextCursor: Schema.optional(Schema.String)
})

/** `session.tree` (the request). */
export const SessionTreeRequest = Schema.Struct({
  sessionId: SessionId,
  includeArchived: Schema.optional(Schema.Boolean)
})

/** One session of a subtree in a `session.tree` answer. */
export const TreeItem = Schema.Struct({
  session: Session,
  parentId: SessionId,
  alias: Schema.NullOr(Schema.String),
  agentPath: Schema.Array(Schema.String)
})

/** `session.tree` (the answer): the session and every session below it, parents first. */
export const SessionTree = Schema.Struct({
  root: Session,
  nodes: Schema.Array(TreeItem)
})

/** The message types, by name. */
export const Type = {
  ping: "core.ping",
  pong: "core.pong",
  shutdown: "core.shutdown",
  error: "core.error",
  ready: "core.ready",
  hello: "auth.hello",
  welcome: "auth.welcome",
  agentList: "agent.list",
  agentPage: "agent.page",
  sessionCreate: "session.create",
  sessionCreated: "session.created",
  sessionGet: "session.get",
  sessionSummary: "session.summary",
  sessionList: "session.list",
  sessionPage: "session.page",
  sessionSend: "session.send",
  sessionAccepted: "session.accepted",
  sessionInterrupt: "session.interrupt",
  sessionInterrupted: "session.interrupted",
  sessionRename: "session.rename",
  sessionArchive: "session.archive",
  sessionClose: "session.close",
  sessionSnapshot: "session.snapshot",
  sessionEvents: "session.events",
  sessionEvent: "session.event",
  sessionEventsEnd: "session.events.end",
  sessionEventsCancel: "session.events.cancel",
  callbackProvide: "callback.provide",
  callbackOpen: "callback.open",
  callbackProvideEnd: "callback.provide.end",
  callbackProvideCancel: "callback.provide.cancel",
  callbackAnswer: "callback.answer",
  callbackAccepted: "callback.accepted",
  sessionChildren: "session.children",
  sessionChildrenPage: "session.children.page",
  sessionTree: "session.tree"
} as const

/**
 * The part a frame of some message type plays in an exchange, which fixes its
 * flags (`roleFlags`): `request` (flags 0, answered with one TERMINAL frame),
 * `stream` (opens a streaming exchange: SESSION_START), `follow_up` (flags 0,
 * on the id of an open stream), `shutdown` (SHUTDOWN, on id 0), `terminal`
 * (the last frame on its id: TERMINAL), `item` (a stream's non-terminal
 * frame, or `core.ready`: flags 0).
 */
export type Role = "request" | "stream" | "follow_up" | "shutdown" | "terminal" | "item"

/** The flags of a frame playing each role. */
export const roleFlags: { readonly [R in Role]: number } = {
  request: 0,
  stream: FLAG_SESSION_START,
  follow_up: 0,
  shutdown: FLAG_SHUTDOWN,
  terminal: FLAG_TERMINAL,
  item: 0
}

/** The role of a message type as a client sends it, and as a server sends it; absent where that side never sends it. */
export interface Usage {
  readonly client?: Role
  readonly server?: Role
}

/**
 * The one table of which flags each message type takes (PROTOCOL.md "Message
 * types"). The daemon answers a client frame whose flags differ from its
 * type's client role with `invalid_flags`, and sends every frame with its
 * type's server role. Types outside the table (an embedder's own routes)
 * follow the kind of their route.
 */
export const usage: { readonly [type: string]: Usage } = {
  [Type.ping]: { client: "request" },
  [Type.pong]: { server: "terminal" },
  [Type.shutdown]: { client: "shutdown" },
  [Type.error]: { server: "terminal" },
  [Type.ready]: { server: "item" },
  [Type.hello]: { client: "request" },
  [Type.welcome]: { server: "terminal" },
  [Type.agentList]: { client: "request" },
  [Type.agentPage]: { server: "terminal" },
  [Type.sessionCreate]: { client: "request" },
  [Type.sessionCreated]: { server: "terminal" },
  [Type.sessionGet]: { client: "request" },
  [Type.sessionSummary]: { server: "terminal" },
  [Type.sessionList]: { client: "request" },
  [Type.sessionPage]: { server: "terminal" },
  [Type.sessionSend]: { client: "request" },
  [Type.sessionAccepted]: { server: "terminal" },
  [Type.sessionInterrupt]: { client: "request" },
  [Type.sessionInterrupted]: { server: "terminal" },
  [Type.sessionRename]: { client: "request" },
  [Type.sessionArchive]: { client: "request" },
  [Type.sessionClose]: { client: "request" },
  [Type.sessionSnapshot]: { client: "request", server: "terminal" },
  [Type.sessionEvents]: { client: "stream" },
  [Type.sessionEvent]: { server: "item" },
  [Type.sessionEventsEnd]: { server: "terminal" },
  [Type.sessionEventsCancel]: { client: "follow_up" },
  [Type.callbackProvide]: { client: "stream" },
  [Type.callbackOpen]: { server: "item" },
  [Type.callbackProvideEnd]: { server: "terminal" },
  [Type.callbackProvideCancel]: { client: "follow_up" },
  [Type.callbackAnswer]: { client: "request" },
  [Type.callbackAccepted]: { server: "terminal" },
  [Type.sessionChildren]: { client: "request" },
  [Type.sessionChildrenPage]: { server: "terminal" },
  // The answer has the request's name, as `session.snapshot`'s has.
  [Type.sessionTree]: { client: "request", server: "terminal" }
}

/** The table's entry for `type`, if it has one (never one inherited from `Object.prototype`). */
export const usageOf = (type: string): Usage | undefined => (Object.hasOwn(usage, type) ? usage[type] : undefined)
