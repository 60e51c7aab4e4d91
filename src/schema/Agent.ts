/**
 * The frozen agent definition a session runs.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Budgets } from "./Budget.js"
import { CompactionSettings } from "./Compaction.js"
import { ApprovalSettings } from "./Policy.js"
import { JsonObject } from "./Json.js"

/** A name usable as an agent or tool name. */
export const Name = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z][A-Za-z0-9_.-]{0,63}$/, {
    message: () => "expected a name: a letter, then up to 63 letters, digits, '_', '.' or '-'"
  })
)

/** Model settings; unset fields fall back run → agent → host default. */
export class ModelSettings extends Schema.Class<ModelSettings>("troupe/ModelSettings")({
  temperature: Schema.optional(Schema.Number.pipe(Schema.between(0, 2))),
  topP: Schema.optional(Schema.Number.pipe(Schema.between(0, 1))),
  maxOutputTokens: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  seed: Schema.optional(Schema.Number.pipe(Schema.int()))
}) {}

/** Which model an agent talks to. */
export class ModelRef extends Schema.Class<ModelRef>("troupe/ModelRef")({
  name: Schema.String.pipe(Schema.minLength(1)),
  settings: Schema.optional(ModelSettings)
}) {}

/** What running a tool does to the world. */
export const SideEffect = Schema.Literal("none", "read", "write", "external")
/** @since 0.1.0 */
export type SideEffect = typeof SideEffect.Type

/** Whether a tool may safely be run again after a crash left its outcome unknown. */
export const Idempotency = Schema.Literal("supported", "unsupported", "unknown")
/** @since 0.1.0 */
export type Idempotency = typeof Idempotency.Type

/** A tool as the agent definition freezes it: the model-facing contract. */
export class ToolSpec extends Schema.Class<ToolSpec>("troupe/ToolSpec")({
  name: Name,
  description: Schema.String,
  /** JSON Schema of the arguments. */
  parameters: JsonObject,
  sideEffect: Schema.optionalWith(SideEffect, { default: () => "external" as const }),
  idempotency: Schema.optionalWith(Idempotency, { default: () => "unknown" as const }),
  /** Run by a client through a `client_tool` callback rather than by the host. */
  client: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Its results must reach the model whole: context compaction never archives them. */
  preserveResult: Schema.optional(Schema.Boolean),
  /** Capability tags (`network`, `filesystem`, …) a permission policy can deny or ask about. */
  capabilities: Schema.optional(Schema.Array(Name)),
  /** Cost dimensions running it spends (`money`, `compute`, …), which a policy can deny or ask about. */
  costs: Schema.optional(Schema.Array(Name)),
  /** A successful call ends the turn; its output is the turn's answer. */
  terminal: Schema.optional(Schema.Boolean),
  /** Safe to run at the same time as the other calls of the same model reply. */
  parallel: Schema.optional(Schema.Boolean)
}) {}

/** A permission decision for a tool call. */
export const Permission = Schema.Literal("allow", "ask", "deny")
/** @since 0.1.0 */
export type Permission = typeof Permission.Type

/**
 * The rules of one permission layer beside its default: by side effect, by
 * capability tag, by cost dimension, and for terminal tools. Within a layer a
 * rule naming the tool wins; otherwise the strictest of these that match.
 */
export const PermissionRules = {
  sideEffects: Schema.optional(Schema.partial(Schema.Record({ key: SideEffect, value: Permission }))),
  capabilities: Schema.optional(Schema.Record({ key: Schema.String, value: Permission })),
  costs: Schema.optional(Schema.Record({ key: Schema.String, value: Permission })),
  terminal: Schema.optional(Permission)
}

/**
 * Rules by tool name (and by side effect, capability, cost, terminal), with a
 * default for tools no rule matches. The agent's policy is one layer of the
 * turn's: layers add up, none lifts another's denial (docs/agent-loop.md).
 */
export class PermissionPolicy extends Schema.Class<PermissionPolicy>("troupe/PermissionPolicy")({
  default: Schema.optionalWith(Permission, { default: () => "allow" as const }),
  rules: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Permission }), { default: () => ({}) }),
  ...PermissionRules
}) {}

/** A permission layer a child's turn inherits from its parent's turn: where it came from, and its rules. */
export class PermissionLayer extends Schema.Class<PermissionLayer>("troupe/PermissionLayer")({
  /** `host`, `agent`, `run`, or `parent` for one inherited from further up. */
  source: Schema.String,
  default: Schema.optional(Permission),
  rules: Schema.optional(Schema.Record({ key: Schema.String, value: Permission })),
  ...PermissionRules
}) {}

/** What a model reply without tool calls means. */
export const NoToolPolicy = Schema.Literal("finish", "continue", "wait_user")
/** @since 0.1.0 */
export type NoToolPolicy = typeof NoToolPolicy.Type

/** A subagent this agent may spawn. */
export class SubagentRef extends Schema.Class<SubagentRef>("troupe/SubagentRef")({
  name: Name,
  description: Schema.optionalWith(Schema.String, { default: () => "" })
}) {}

/** A frozen agent definition. */
export class Agent extends Schema.Class<Agent>("troupe/Agent")({
  name: Name,
  description: Schema.optionalWith(Schema.String, { default: () => "" }),
  instructions: Schema.String,
  model: ModelRef,
  tools: Schema.optionalWith(Schema.Array(ToolSpec), { default: () => [] }),
  permissions: Schema.optionalWith(PermissionPolicy, { default: () => new PermissionPolicy({}) }),
  noToolPolicy: Schema.optionalWith(NoToolPolicy, { default: () => "finish" as const }),
  maxCycles: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)), {
    default: () => 16
  }),
  subagents: Schema.optionalWith(Schema.Array(SubagentRef), { default: () => [] }),
  budgets: Schema.optional(Budgets),
  /** When and how the session's context is compacted (docs/agent-loop.md, "Context compaction"). */
  compaction: Schema.optional(CompactionSettings),
  /** Approval mode and timeout of this agent's turns (a run's own settings win). */
  approvals: Schema.optional(ApprovalSettings),
  /** How many tool calls marked `parallel` of one reply run at once (default 4). */
  maxParallelTools: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 64)))
}) {}
