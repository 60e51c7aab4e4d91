/**
 * Product events: what `Telemetry` reports about the use of troupe.
 *
 * Every field is bounded. Dimensions are literals or booleans (safe as metric
 * labels); the only numbers are measurements under `usage` (a turn's, a
 * compaction's: never labels) and the HTTP-like status of a failure (a literal). Nothing here can hold free text:
 * no messages, titles, agent, model or tool names, no ids, no server messages.
 * Ids belong in spans (`Telemetry.spanAttributes`), never in product events.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { CompactionMode } from "./Compaction.js"
import { SpawnLimit } from "./Errors.js"
import { FailureCode, TurnOutcome } from "./Turn.js"

const Count = Schema.Number.pipe(Schema.int(), Schema.nonNegative())

/** Whether a session is a root session or a child (subagent) session. */
export const Lineage = Schema.Literal("root", "child")
/** @since 0.1.0 */
export type Lineage = typeof Lineage.Type

/** The category of a failure: what went wrong, never why in words. */
export const FailureCategory = Schema.Literal(
  "invalid_input",
  "unauthenticated",
  "forbidden",
  "not_found",
  "conflict",
  "unavailable",
  "internal"
)
/** @since 0.1.0 */
export type FailureCategory = typeof FailureCategory.Type

/** The HTTP-like statuses a failure category maps to. */
export const HttpStatus = Schema.Literal(400, 401, 403, 404, 409, 500, 503)
/** @since 0.1.0 */
export type HttpStatus = typeof HttpStatus.Type

/** The HTTP-like status of each failure category. */
export const statusOf: { readonly [C in FailureCategory]: HttpStatus } = {
  invalid_input: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  unavailable: 503,
  internal: 500
}

/** The store a daemon runs on. */
export const StoreKind = Schema.Literal("memory", "sqlite", "postgres")
/** @since 0.1.0 */
export type StoreKind = typeof StoreKind.Type

/** The model layer a daemon runs with (its kind, never a model name). */
export const ModelKind = Schema.Literal("scripted", "openai_compatible", "effect_ai", "custom")
/** @since 0.1.0 */
export type ModelKind = typeof ModelKind.Type

/** What a turn consumed, without per-tool counts (tool names are free text). */
export const TurnUsage = Schema.Struct({
  inputTokens: Count,
  outputTokens: Count,
  totalTokens: Count,
  modelCalls: Count,
  toolCalls: Count,
  wallTimeMs: Count,
  costMicros: Count
})
/** @since 0.1.0 */
export type TurnUsage = typeof TurnUsage.Type

/** A session was created and persisted (never emitted for a failed or replayed creation). */
export const SessionStarted = Schema.Struct({
  event: Schema.tag("session.started"),
  kind: Lineage
}).annotations({ identifier: "troupe/ProductEvent/SessionStarted" })
/** @since 0.1.0 */
export type SessionStarted = typeof SessionStarted.Type

/** A turn ended. `failureCode` is present exactly when `status` is `failed`. */
export const TurnEnded = Schema.Struct({
  event: Schema.tag("turn.ended"),
  kind: Lineage,
  status: TurnOutcome,
  failureCode: Schema.optional(FailureCode),
  usage: TurnUsage
}).pipe(
  Schema.filter((e) =>
    (e.status === "failed") === (e.failureCode !== undefined) ||
    "failureCode is present exactly when status is failed"
  ),
  Schema.annotations({ identifier: "troupe/ProductEvent/TurnEnded" })
)
/** @since 0.1.0 */
export type TurnEnded = typeof TurnEnded.Type

/** A daemon started serving: which listeners, store and model kind. */
export const DaemonStarted = Schema.Struct({
  event: Schema.tag("daemon.started"),
  listeners: Schema.Struct({ unix: Schema.Boolean, tcp: Schema.Boolean, stdio: Schema.Boolean }),
  store: StoreKind,
  model: ModelKind
}).annotations({ identifier: "troupe/ProductEvent/DaemonStarted" })
/** @since 0.1.0 */
export type DaemonStarted = typeof DaemonStarted.Type

/** A spawn or a further child turn was refused by the tree's subagent policy; `limit` names the rule. */
export const SubagentRefused = Schema.Struct({
  event: Schema.tag("subagent.refused"),
  limit: SpawnLimit
}).annotations({ identifier: "troupe/ProductEvent/SubagentRefused" })
/** @since 0.1.0 */
export type SubagentRefused = typeof SubagentRefused.Type

/** How a compaction went: it shrank the context, its summary did not shrink it, or its summary call failed. */
export const CompactionOutcome = Schema.Literal("compacted", "rejected", "failed")
/** @since 0.1.0 */
export type CompactionOutcome = typeof CompactionOutcome.Type

/** The measurements of a compaction (estimates of the next request; never labels). */
export const CompactionUsage = Schema.Struct({ tokensBefore: Count, tokensAfter: Count, archived: Count })
/** @since 0.1.0 */
export type CompactionUsage = typeof CompactionUsage.Type

/** A compaction of a session's context began (`micro` archives tool results, `summary` summarizes). */
export const CompactionStarted = Schema.Struct({
  event: Schema.tag("compaction.started"),
  mode: CompactionMode,
  usage: CompactionUsage
}).annotations({ identifier: "troupe/ProductEvent/CompactionStarted" })
/** @since 0.1.0 */
export type CompactionStarted = typeof CompactionStarted.Type

/** A compaction ended. */
export const CompactionCompleted = Schema.Struct({
  event: Schema.tag("compaction.completed"),
  mode: CompactionMode,
  outcome: CompactionOutcome,
  usage: CompactionUsage
}).annotations({ identifier: "troupe/ProductEvent/CompactionCompleted" })
/** @since 0.1.0 */
export type CompactionCompleted = typeof CompactionCompleted.Type

/** The names of the failure events. */
export const FailedName = Schema.Literal("session.failed", "auth.failed", "provider.failed", "daemon.failed")
/** @since 0.1.0 */
export type FailedName = typeof FailedName.Type

const failed = <const N extends FailedName>(name: N) =>
  Schema.Struct({
    event: Schema.tag(name),
    category: FailureCategory,
    status: HttpStatus
  }).pipe(
    Schema.filter((e) => e.status === statusOf[e.category] || `status must be ${statusOf[e.category]} for ${e.category}`),
    Schema.annotations({ identifier: `troupe/ProductEvent/${name}` })
  )

/** Creating a session (root or child) failed. */
export const SessionFailed = failed("session.failed")
/** @since 0.1.0 */
export type SessionFailed = typeof SessionFailed.Type

/** A connection's `auth.hello` was refused. */
export const AuthFailed = failed("auth.failed")
/** @since 0.1.0 */
export type AuthFailed = typeof AuthFailed.Type

/** Registering a callback provider (`callback.provide`) was refused. */
export const ProviderFailed = failed("provider.failed")
/** @since 0.1.0 */
export type ProviderFailed = typeof ProviderFailed.Type

/** The daemon failed to start (configuration, store, listeners). */
export const DaemonFailed = failed("daemon.failed")
/** @since 0.1.0 */
export type DaemonFailed = typeof DaemonFailed.Type

/** Any product event. */
export const ProductEvent = Schema.Union(
  SessionStarted,
  TurnEnded,
  DaemonStarted,
  SubagentRefused,
  CompactionStarted,
  CompactionCompleted,
  SessionFailed,
  AuthFailed,
  ProviderFailed,
  DaemonFailed
)
/** @since 0.1.0 */
export type ProductEvent = typeof ProductEvent.Type

/** The stable name of a product event. */
export type EventName = ProductEvent["event"]

/** Every event name, in a stable order. */
export const eventNames: ReadonlyArray<EventName> = [
  "session.started",
  "turn.ended",
  "daemon.started",
  "subagent.refused",
  "compaction.started",
  "compaction.completed",
  "session.failed",
  "auth.failed",
  "provider.failed",
  "daemon.failed"
]

/**
 * One event as the log layer writes it: the event's fields, whether the
 * connection that caused it asked to be excluded from analytics, and when.
 */
export const Line = Schema.extend(
  ProductEvent,
  Schema.Struct({ excluded: Schema.Boolean, at: Schema.Date })
)
/** @since 0.1.0 */
export type Line = typeof Line.Type

const encodeEvent = Schema.encodeUnknownEither(ProductEvent)

/**
 * Checks an event against the schema and keeps only its declared fields, or
 * returns `undefined` when it does not fit: layers drop such an event whole
 * rather than let an unexpected value through.
 */
export const sanitize = (event: unknown): typeof ProductEvent.Encoded | undefined => {
  const result = encodeEvent(event)
  return Either.isRight(result) ? result.right : undefined
}

/** `session.started` for a root or child session (built as the others are: `make` would validate it, ~15 µs per session). */
export const sessionStarted = (kind: Lineage): SessionStarted => ({ event: "session.started", kind })

/** `compaction.started` before a compaction of `mode`. */
export const compactionStarted = (mode: CompactionMode, tokensBefore: number): CompactionStarted => ({
  event: "compaction.started",
  mode,
  usage: { tokensBefore, tokensAfter: tokensBefore, archived: 0 }
})

/** `compaction.completed` after a compaction of `mode`. */
export const compactionCompleted = (
  mode: CompactionMode,
  outcome: CompactionOutcome,
  usage: CompactionUsage
): CompactionCompleted => ({
  event: "compaction.completed",
  mode,
  outcome,
  usage: { tokensBefore: usage.tokensBefore, tokensAfter: usage.tokensAfter, archived: usage.archived }
})

/** `subagent.refused` for a refusal of `limit`. */
export const subagentRefused = (limit: SpawnLimit): SubagentRefused => SubagentRefused.make({ limit })

/**
 * `turn.ended` from a turn's outcome. `usage` may be the full `Usage` of a
 * turn: only the totals are kept (per-tool counts carry tool names).
 */
export const turnEnded = (options: {
  readonly kind: Lineage
  readonly status: TurnOutcome
  readonly failureCode?: FailureCode | undefined
  readonly usage: TurnUsage
}): TurnEnded => {
  const { costMicros, inputTokens, modelCalls, outputTokens, toolCalls, totalTokens, wallTimeMs } = options.usage
  const usage = { inputTokens, outputTokens, totalTokens, modelCalls, toolCalls, wallTimeMs, costMicros }
  return options.status === "failed"
    ? { event: "turn.ended", kind: options.kind, status: "failed", failureCode: options.failureCode ?? "internal", usage }
    : { event: "turn.ended", kind: options.kind, status: options.status, usage }
}

/** `daemon.started` with the kinds of what it runs. */
export const daemonStarted = (options: {
  readonly listeners: { readonly unix: boolean; readonly tcp: boolean; readonly stdio: boolean }
  readonly store: StoreKind
  readonly model: ModelKind
}): DaemonStarted => ({
  event: "daemon.started",
  listeners: { unix: options.listeners.unix, tcp: options.listeners.tcp, stdio: options.listeners.stdio },
  store: options.store,
  model: options.model
})

/** A `*.failed` event; the status follows from the category. */
export const failure = <N extends FailedName>(
  name: N,
  category: FailureCategory
): { readonly event: N; readonly category: FailureCategory; readonly status: HttpStatus } => ({
  event: name,
  category,
  status: statusOf[category]
})

/**
 * The category of a failure, from its `_tag` (troupe's errors, codec errors)
 * or a `WireError`'s `kind`. Reads only those two fields, never a message;
 * anything unknown is `internal`.
 */
export const categoryOf = (error: unknown): FailureCategory => {
  if (typeof error !== "object" || error === null) return "internal"
  const tag = (error as { readonly _tag?: unknown })._tag
  const key = tag === "WireError" ? (error as { readonly kind?: unknown }).kind : tag
  switch (key) {
    case "InvalidInput":
    case "ParseError":
    case "MalformedMessage":
    case "InvalidPayload":
    case "InvalidFlags":
    case "InvalidId":
    case "InvalidName":
    case "UnsupportedGeneration":
    case "FrameTooLarge":
    case "FrameTooShort":
    case "malformed_message":
    case "unsupported_message_type":
    case "unsupported_protocol_generation":
    case "invalid_flags":
    case "invalid_payload":
    case "invalid_id":
      return "invalid_input"
    case "unauthenticated":
      return "unauthenticated"
    case "forbidden":
      return "forbidden"
    case "SessionNotFound":
    case "TurnNotFound":
    case "not_found":
      return "not_found"
    case "Conflict":
    case "SequenceConflict":
    case "SessionBusy":
    case "SessionClosed":
    case "TurnMismatch":
    case "StaleCallback":
    case "LeaseLost":
    case "conflict":
    case "stale_callback":
    case "turn_mismatch":
    case "session_closed":
    case "busy":
      return "conflict"
    case "StoreUnavailable":
      return "unavailable"
    default:
      return "internal"
  }
}
