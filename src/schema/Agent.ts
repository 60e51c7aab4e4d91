/**
 * The frozen agent definition a session runs.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Budgets } from "./Budget.js"
import { CompactionSettings } from "./Compaction.js"
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
  preserveResult: Schema.optional(Schema.Boolean)
}) {}

/** A permission decision for a tool call. */
export const Permission = Schema.Literal("allow", "ask", "deny")
/** @since 0.1.0 */
export type Permission = typeof Permission.Type

/** Rules by tool name, with a default for tools no rule names. */
export class PermissionPolicy extends Schema.Class<PermissionPolicy>("troupe/PermissionPolicy")({
  default: Schema.optionalWith(Permission, { default: () => "allow" as const }),
  rules: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Permission }), { default: () => ({}) })
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
  compaction: Schema.optional(CompactionSettings)
}) {}
