/**
 * The frozen agent definition a session runs.
 *
 * @since 0.1.0
 */
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import type * as Effect from "effect/Effect"
import { Budgets } from "./Budget.js"
import { CompactionSettings } from "./Compaction.js"
import { ApprovalSettings, SubagentPolicy } from "./Policy.js"
import { JsonObject } from "./Json.js"
import { ToolsetRef } from "./Toolset.js"

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

/** What running a tool does to the world (`execute`: it runs commands, whatever they do). */
export const SideEffect = Schema.Literal("none", "read", "write", "execute", "external")
/** @since 0.1.0 */
export type SideEffect = typeof SideEffect.Type

/** Whether a tool may safely be run again after a crash left its outcome unknown. */
export const Idempotency = Schema.Literal("supported", "unsupported", "unknown")
/** @since 0.1.0 */
export type Idempotency = typeof Idempotency.Type

// The fields of a tool spec but the agent it may run (split out so the recursive encoded type follows them).
const toolSpecFields = {
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
}

/** A tool spec as stored (the encoded side of `ToolSpec`). */
export interface ToolSpecEncoded extends Schema.Struct.Encoded<typeof toolSpecFields> {
  readonly agent?: AgentEncoded | undefined
}

/** A tool as the agent definition freezes it: the model-facing contract. */
export class ToolSpec extends Schema.Class<ToolSpec>("troupe/ToolSpec")({
  ...toolSpecFields,
  /** The agent this tool runs as a child session (`asTool`); its final output is the tool's result. */
  agent: Schema.optional(Schema.suspend((): Schema.Schema<Agent, AgentEncoded> => Agent).annotations({ identifier: "Agent" }))
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

/**
 * Structured output: the JSON Schema the final output must match (an Effect
 * Schema's, from `outputOf`), given to the model where the provider takes
 * one; a reply that does not match goes back to the model with the problems,
 * at most `maxRetries` times, then the turn fails with `invalid_output`.
 */
export class OutputSpec extends Schema.Class<OutputSpec>("troupe/OutputSpec")({
  name: Name,
  schema: JsonObject,
  maxRetries: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.between(0, 10)), { default: () => 2 })
}) {}

/** The model an agent names when it names none: the runtime's default (`TROUPE_MODEL`, or the scripted model). */
export const defaultModel: ModelRef = new ModelRef({ name: "default" })

// The fields of an agent but its handoffs (split out so the recursive encoded type follows them).
const agentFields = {
  name: Name,
  description: Schema.optionalWith(Schema.String, { default: () => "" }),
  instructions: Schema.String,
  /** Absent: `default`, the runtime's configured default model (`Agent.defaultModel`). */
  model: Schema.optionalWith(ModelRef, { default: () => defaultModel }),
  tools: Schema.optionalWith(Schema.Array(ToolSpec), { default: () => [] }),
  permissions: Schema.optionalWith(PermissionPolicy, { default: () => new PermissionPolicy({}) }),
  noToolPolicy: Schema.optionalWith(NoToolPolicy, { default: () => "finish" as const }),
  maxCycles: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)), {
    default: () => 16
  }),
  subagents: Schema.optionalWith(Schema.Array(SubagentRef), { default: () => [] }),
  /**
   * The subagent policy a root session of this agent gets when its create
   * request names none (a child keeps its root's); absent: the default when
   * the agent declares children (DESIGN §7), else none.
   */
  subagentPolicy: Schema.optional(SubagentPolicy),
  budgets: Schema.optional(Budgets),
  /** When and how the session's context is compacted (docs/agent-loop.md, "Context compaction"). */
  compaction: Schema.optional(CompactionSettings),
  /** Approval mode and timeout of this agent's turns (a run's own settings win). */
  approvals: Schema.optional(ApprovalSettings),
  /** How many tool calls marked `parallel` of one reply run at once (default 4). */
  maxParallelTools: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 64))),
  /** Most handoffs in one turn (counted over every agent of the turn); one more fails it with `max_handoffs`. */
  maxHandoffs: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.between(0, 100)), { default: () => 10 }),
  /** Names of the host's guardrails (`Guardrails.layer`) checked on a turn's message before its first model call. */
  inputGuardrails: Schema.optionalWith(Schema.Array(Name), { default: () => [] }),
  /** Names of the host's guardrails checked on the final output this agent gives. */
  outputGuardrails: Schema.optionalWith(Schema.Array(Name), { default: () => [] }),
  /** The schema the final output must match (`outputOf`); absent: free text. */
  output: Schema.optional(OutputSpec),
  /** The toolsets (MCP servers) whose tools this agent gets, `<server>.<tool>` (docs/tools.md). */
  toolsets: Schema.optional(Schema.Array(ToolsetRef))
}

/** An agent as stored (the encoded side of `Agent`). */
export interface AgentEncoded extends Schema.Struct.Encoded<typeof agentFields> {
  readonly handoffs?: ReadonlyArray<AgentEncoded> | undefined
}

/** A frozen agent definition. */
export class Agent extends Schema.Class<Agent>("troupe/Agent")({
  ...agentFields,
  /**
   * Agents this one may hand the turn to: the model gets a
   * `transfer_to_<name>` tool for each, and control moves to the target (its
   * instructions, model, settings and tools) within the same turn.
   */
  handoffs: Schema.optionalWith(Schema.Array(Schema.suspend((): Schema.Schema<Agent, AgentEncoded> => Agent).annotations({ identifier: "Agent" })), {
    default: () => []
  })
}) {}

/**
 * `agent` as a tool of another agent: calling it (`{ input }`) runs `agent`
 * as a child session of the caller (counted against the tree's subagent
 * policy) and returns the child's final output as the tool's result.
 */
export const asTool = (agent: Agent, options: { readonly name: string; readonly description: string }): ToolSpec =>
  new ToolSpec({
    name: options.name,
    description: options.description,
    parameters: {
      type: "object",
      properties: { input: { type: "string", description: "The task for the agent." } },
      required: ["input"],
      additionalProperties: false
    },
    sideEffect: "external",
    // A call run again after a crash finds the child it spawned, and waits for it.
    idempotency: "supported",
    client: false,
    agent
  })

/** Declares that an agent's final output must decode with `schema` (its JSON Schema goes into the agent). */
export const outputOf = <A, I>(
  schema: Schema.Schema<A, I>,
  options: { readonly name?: string | undefined; readonly maxRetries?: number | undefined } = {}
): OutputSpec => {
  const { $schema: _, ...jsonSchema } = JSONSchema.make(schema) as unknown as Record<string, unknown>
  return new OutputSpec({
    name: options.name ?? "output",
    schema: jsonSchema,
    ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries })
  })
}

/**
 * Every agent `agent` may run as a child: its subagents' names, and the agents
 * of its agent tools, its handoff targets' included (what the tree's policy
 * allows by default).
 */
export const childAgentNames = (agent: Agent): ReadonlyArray<string> => {
  const names = new Set<string>()
  const seen = new Set<Agent>()
  const walk = (a: Agent) => {
    if (seen.has(a)) return
    seen.add(a)
    for (const ref of a.subagents) names.add(ref.name)
    for (const tool of a.tools) if (tool.agent !== undefined) names.add(tool.agent.name)
    for (const target of a.handoffs) walk(target)
  }
  walk(agent)
  return [...names]
}

/**
 * A tool an agent may carry (`Tool.make`'s result): its spec is frozen into
 * the session, its handler stays on the host, registered by the runtime the
 * agent is given to (`Troupe.layer({ agents })`). A handler needing services
 * is given to the runtime with `Toolkit.layer` instead.
 */
export interface Carried {
  readonly spec: ToolSpec
  readonly handler?: ((...args: ReadonlyArray<any>) => Effect.Effect<unknown, unknown, never>) | undefined
}

/** What `make` takes: an agent's fields, its tools as specs or as tools it carries. */
export type MakeOptions = Omit<ConstructorParameters<typeof Agent>[0], "tools"> & {
  readonly tools?: ReadonlyArray<ToolSpec | Carried> | undefined
}

// The tools an agent made by `make` carries; kept beside it, never in its frozen (encoded) definition.
const carried = new WeakMap<Agent, ReadonlyArray<Carried>>()

/**
 * An agent: `Agent.make({ name, instructions, tools: [tool] })`. The model is
 * optional (the runtime's default model), and a tool made with `Tool.make` is
 * given once: its spec goes into the agent, its handler to the runtime.
 */
export const make = (options: MakeOptions): Agent => {
  const tools = options.tools ?? []
  const agent = new Agent({ ...options, tools: tools.map((tool) => (tool instanceof ToolSpec ? tool : tool.spec)) })
  const withHandlers = tools.filter((tool): tool is Carried => !(tool instanceof ToolSpec) && tool.handler !== undefined)
  if (withHandlers.length > 0) carried.set(agent, withHandlers)
  return agent
}

/** The tools with handlers that `agent` carries (given to `make`), its own only. */
export const carriedTools = (agent: Agent): ReadonlyArray<Carried> => carried.get(agent) ?? []

/** `agent` and every agent it may run within its turns or as a tool: its handoff targets and agent tools, recursively. */
export const reachable = (agent: Agent): ReadonlyArray<Agent> => {
  const seen = new Set<Agent>()
  const walk = (a: Agent) => {
    if (seen.has(a)) return
    seen.add(a)
    for (const target of a.handoffs) walk(target)
    for (const tool of a.tools) if (tool.agent !== undefined) walk(tool.agent)
  }
  walk(agent)
  return [...seen]
}
