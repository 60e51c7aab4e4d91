/**
 * Session policies: what happens to a message while a turn runs, whether
 * and how a session may spawn subagents, and how approvals are asked.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * What a `message` does while a turn is running: `queue` (default) starts the
 * next turn afterwards, `steer` delivers it to the running turn, `reject`
 * refuses it with `SessionBusy`, `interrupt` stops the running turn first.
 */
export const BusyPolicy = Schema.Literal("queue", "steer", "reject", "interrupt")
/** @since 0.1.0 */
export type BusyPolicy = typeof BusyPolicy.Type

/** Limits on spawning child sessions, held by the root of a tree. */
export class SubagentPolicy extends Schema.Class<SubagentPolicy>("troupe/SubagentPolicy")({
  /** Deepest allowed child depth (the root is depth 0). */
  maxDepth: Schema.Number.pipe(Schema.int(), Schema.between(1, 16)),
  /** Most children any one session may have. */
  maxChildren: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  /** Most child turns across the whole tree. */
  maxChildTurns: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  /** Agent names that may be spawned; absent means the agent's declared subagents. */
  allowedAgents: Schema.optional(Schema.Array(Schema.String))
}) {}

/**
 * How a turn asks for approvals: `ask` (default) opens an `approval` callback
 * when the permission policy or the tool asks for one; `never` runs such calls
 * without asking (a trusted run; denials still deny). An approval not answered
 * within `timeoutMs` resolves as `expired`, which the model sees as a refusal.
 */
export class ApprovalSettings extends Schema.Class<ApprovalSettings>("troupe/ApprovalSettings")({
  mode: Schema.optional(Schema.Literal("ask", "never")),
  timeoutMs: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 30 * 86_400_000)))
}) {}
