/**
 * The shape of an agents file (`--agents FILE`), as an Effect Schema: what
 * `AgentsFile` decodes a file with, and what `troupe agents schema` prints as
 * JSON Schema (`jsonSchema`), so the published schema and the decoder cannot
 * disagree. The sections reuse the fields of the runtime's own schemas
 * (`PermissionPolicy`, `SubagentPolicy`, `Budgets`, `CompactionSettings`,
 * `ApprovalSettings`, `ModelSettings`), so a limit checked in code is checked
 * in the file too. Where the file differs from an `Agent` it is by reference:
 * handoffs, agent tools and subagents name other agents of the same file.
 *
 * Extension point: a new way for an agent to get tools (issue 31's
 * `toolsets`/`mcpServers`, issue 32's `builtins`) is one more optional field
 * of `agentFields` here and one more `ToolSource` in `AgentsFile.toolSources`.
 *
 * @since 0.1.0
 */
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import { Idempotency, ModelSettings, Name, NoToolPolicy, PermissionPolicy, SideEffect } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import { CompactionSettings } from "../schema/Compaction.js"
import { JsonObject } from "../schema/Json.js"
import { ApprovalSettings, SubagentPolicy } from "../schema/Policy.js"
import { McpServers } from "../schema/Toolset.js"
import * as Builtins from "../tools/Builtins.js"
import * as Shell from "../tools/workspace/Shell.js"

const Names = Schema.Array(Name)

/**
 * A tool as the file declares it. Without `agent` it is a client tool: the
 * daemon has no code for it, so each call opens a `client_tool` callback a
 * connected client answers. With `agent` it is that agent of the file run as
 * a child session (`asTool`): its arguments are `{ input }`, so it takes no
 * `parameters`.
 */
export const ToolEntry = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.String),
  /** JSON Schema of the arguments (default: an object with no properties). */
  parameters: Schema.optional(JsonObject),
  /** The agent of this file this tool runs as a child session. */
  agent: Schema.optional(Name),
  sideEffect: Schema.optional(SideEffect),
  idempotency: Schema.optional(Idempotency),
  /** Capability tags (`network`, `filesystem`, …) permission rules can match. */
  capabilities: Schema.optional(Names),
  /** Cost dimensions (`money`, `compute`, …) permission rules can match. */
  costs: Schema.optional(Names),
  /** A successful call ends the turn with its output. */
  terminal: Schema.optional(Schema.Boolean),
  /** May run beside the other `parallel` calls of one model reply. */
  parallel: Schema.optional(Schema.Boolean),
  /** Its results are never archived by context compaction. */
  preserveResult: Schema.optional(Schema.Boolean),
  /** Every call asks for an approval first (the agent's permission rule for it becomes `ask`). */
  needsApproval: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "Tool" })

/** A subagent: its name, or `{ name, description }`. */
export const SubagentEntry = Schema.Union(
  Name,
  Schema.Struct({ name: Name, description: Schema.optional(Schema.String) })
).annotations({
  identifier: "Subagent",
  message: () => ({ message: "expected an agent name or { \"name\", \"description\" }", override: true })
})

/** The model: a name (`"default"`: the deployment's `TROUPE_MODEL`) or `{ name, settings }`. */
export const ModelEntry = Schema.Union(
  Schema.String.pipe(Schema.minLength(1)),
  Schema.Struct({ name: Schema.String.pipe(Schema.minLength(1)), settings: Schema.optional(Schema.Struct(ModelSettings.fields)) })
).annotations({
  identifier: "Model",
  message: () => ({ message: "expected a model name or { \"name\", \"settings\" }", override: true })
})

/** Structured output: the JSON Schema the final output must match. */
export const OutputEntry = Schema.Struct({
  name: Schema.optional(Name),
  schema: JsonObject,
  maxRetries: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 10)))
}).annotations({ identifier: "Output" })

/** A built-in tool or group of them (`Builtins.NAMES`, `Builtins.GROUPS`). */
const BuiltinName = Schema.Literal(...([...Builtins.NAMES, ...Object.keys(Builtins.GROUPS)] as [string, ...Array<string>])).annotations({
  identifier: "Builtin"
})

/** A toolset an agent uses: an `mcpServers` name, or `{ name, tools }` with an allow-list of its tools. */
export const ToolsetEntry = Schema.Union(
  Schema.String.pipe(Schema.minLength(1)),
  Schema.Struct({ name: Schema.String.pipe(Schema.minLength(1)), tools: Schema.optional(Schema.Array(Schema.String)) })
).annotations({ identifier: "Toolset" })

/** The fields of one agent of the file; see docs/configuration.md for each. */
export const agentFields = {
  name: Name,
  description: Schema.optional(Schema.String),
  instructions: Schema.String,
  model: Schema.optional(ModelEntry),
  tools: Schema.optional(Schema.Array(ToolEntry)),
  permissions: Schema.optional(Schema.Struct(PermissionPolicy.fields).annotations({ identifier: "Permissions" })),
  approvals: Schema.optional(Schema.Struct(ApprovalSettings.fields).annotations({ identifier: "Approvals" })),
  noToolPolicy: Schema.optional(NoToolPolicy),
  maxCycles: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000))),
  maxHandoffs: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 100))),
  maxParallelTools: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 64))),
  /** Agents of this file it may spawn. */
  subagents: Schema.optional(Schema.Array(SubagentEntry)),
  /** The limits of a tree rooted at a session of this agent. */
  subagentPolicy: Schema.optional(Schema.Struct(SubagentPolicy.fields).annotations({ identifier: "SubagentPolicy" })),
  /** Agents of this file it may hand the turn to. */
  handoffs: Schema.optional(Names),
  output: Schema.optional(OutputEntry),
  compaction: Schema.optional(Schema.Struct(CompactionSettings.fields).annotations({ identifier: "Compaction" })),
  budgets: Schema.optional(Schema.Struct(Budgets.fields).annotations({ identifier: "Budgets" })),
  /** Servers of the file's `mcpServers` whose tools it gets (docs/tools.md). */
  toolsets: Schema.optional(Schema.Array(ToolsetEntry)),
  /** Built-in workspace tools it gets, by name or group (`files`, `read`, `shell`, `all`; docs/workspace.md). */
  builtins: Schema.optional(Schema.Array(BuiltinName)),
  /** Variables its built-in `bash` and `process.start` get, over `--env`'s (host configuration: never stored in a session). */
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }).pipe(Schema.filter((env) => {
    const bad = Object.keys(env).find((name) => !Shell.isVariableName(name))
    return bad === undefined || `${JSON.stringify(bad)} is not a variable name (letters, digits and _, not starting with a digit)`
  })))
}

/** One agent of the file. */
export const AgentEntry = Schema.Struct(agentFields).annotations({ identifier: "Agent" })
/** @since 0.1.0 */
export type AgentEntry = typeof AgentEntry.Type
/** @since 0.1.0 */
export type ToolEntry = typeof ToolEntry.Type

/** The whole file. */
export const AgentsFile = Schema.Struct({
  /** Where the JSON Schema is (editors use it); ignored. */
  $schema: Schema.optional(Schema.String),
  agents: Schema.Array(AgentEntry).pipe(Schema.minItems(1, { message: () => "expected at least one agent" })),
  /** MCP servers, in the shape Claude Desktop and Cursor use: `{ name: { command, args, env, cwd } | { url, headers } }`. */
  mcpServers: Schema.optional(McpServers)
}).annotations({
  title: "troupe agents file",
  description: "The agents a troupe daemon serves (`troupe serve --agents FILE`) or `troupe run --agents FILE` runs: docs/configuration.md."
})
/** @since 0.1.0 */
export type AgentsFile = typeof AgentsFile.Type

/** The JSON Schema of the file (draft 2019-09: its definitions are under `$defs`), derived from `AgentsFile`. */
export const jsonSchema = (): JSONSchema.JsonSchema7Root => JSONSchema.make(AgentsFile, { target: "jsonSchema2019-09" })
