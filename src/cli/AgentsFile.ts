/**
 * `--agents FILE`: the agents a daemon serves (and `troupe run` can pick
 * from), as JSON:
 *
 * ```json
 * { "agents": [ {
 *     "name": "helper",
 *     "description": "Answers questions about files",
 *     "instructions": "Be brief.",
 *     "model": "default",
 *     "tools": [ { "name": "read_file", "description": "Reads a file",
 *                  "parameters": { "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] },
 *                  "sideEffect": "read", "idempotency": "supported" } ],
 *     "permissions": { "default": "allow", "rules": { "read_file": "ask" } },
 *     "noToolPolicy": "finish",
 *     "maxCycles": 16,
 *     "budgets": { "totalTokens": 20000, "toolCalls": 10 }
 * } ] }
 * ```
 *
 * `model` is a model name (`"default"`: the deployment's `TROUPE_MODEL`) or
 * `{ "name", "settings": { temperature, topP, maxOutputTokens, seed } }`.
 * Tools are described by JSON Schema and are **client tools**: the daemon has
 * no code for them, so each call opens a `client_tool` callback that a
 * connected client answers with the tool's result. `mcpServers` (beside
 * `agents`) declares MCP servers in the shape Claude Desktop and Cursor use
 * (`{ "name": { "command", "args", "env", "cwd" } | { "url", "headers" } }`);
 * an agent's `toolsets` names them (`"github"`, or `{ "name": "github",
 * "tools": ["search"] }`), and their tools run on the daemon (docs/tools.md).
 * Unknown fields are errors,
 * so a typo never silently drops a setting.
 *
 * @since 0.1.0
 */
import { Effect, ParseResult, Schema } from "effect"
import { readFile } from "node:fs/promises"
import { Agent, Idempotency, ModelSettings, Name, NoToolPolicy, Permission, SideEffect } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import { JsonObject } from "../schema/Json.js"
import { McpServers } from "../schema/Toolset.js"

/** The agents file could not be read or is not of the documented shape. */
export class AgentsFileError extends Schema.TaggedError<AgentsFileError>()("AgentsFileError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `agents file ${this.path}: ${this.reason}`
  }
}

/** A tool as the file describes it. */
export const ToolEntry = Schema.Struct({
  name: Name,
  description: Schema.optionalWith(Schema.String, { default: () => "" }),
  /** JSON Schema of the arguments (default: an object with no properties). */
  parameters: Schema.optionalWith(JsonObject, { default: () => ({ type: "object", properties: {} }) }),
  sideEffect: Schema.optional(SideEffect),
  idempotency: Schema.optional(Idempotency)
})

/** An agent as the file describes it. */
export const AgentEntry = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.String),
  instructions: Schema.String,
  model: Schema.optionalWith(
    Schema.Union(
      Schema.String.pipe(Schema.minLength(1)),
      Schema.Struct({ name: Schema.String.pipe(Schema.minLength(1)), settings: Schema.optional(Schema.encodedSchema(ModelSettings)) })
    ),
    { default: () => "default" }
  ),
  tools: Schema.optionalWith(Schema.Array(ToolEntry), { default: () => [] }),
  permissions: Schema.optional(Schema.Struct({
    default: Schema.optional(Permission),
    rules: Schema.optional(Schema.Record({ key: Schema.String, value: Permission }))
  })),
  noToolPolicy: Schema.optional(NoToolPolicy),
  maxCycles: Schema.optional(Schema.Number),
  budgets: Schema.optional(Schema.encodedSchema(Budgets)),
  /** `mcpServers` by name, each optionally with an allow-list of its tools. */
  toolsets: Schema.optional(Schema.Array(Schema.Union(
    Schema.String,
    Schema.Struct({ name: Schema.String, tools: Schema.optional(Schema.Array(Schema.String)) })
  )))
})

/** The whole file. */
export const AgentsFile = Schema.Struct({
  agents: Schema.Array(AgentEntry).pipe(Schema.minItems(1, { message: () => "expected at least one agent" })),
  mcpServers: Schema.optional(McpServers)
})

/** What a file declares: its agents, and the MCP servers their toolsets name. */
export interface Declared {
  readonly agents: ReadonlyArray<Agent>
  readonly mcpServers: typeof McpServers.Type
}

const decodeFile = Schema.decodeUnknownEither(AgentsFile, { onExcessProperty: "error", errors: "first" })
const decodeAgent = Schema.decodeUnknownEither(Agent, { onExcessProperty: "error", errors: "first" })

/** The first problem of a parse error, as `where: what`. */
const firstIssue = (error: ParseResult.ParseError, prefix: ReadonlyArray<PropertyKey> = []) => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  const path = [...prefix, ...(issue?.path ?? [])]
  return `${path.length === 0 ? "" : `${path.map(String).join(".")}: `}${plain(issue?.message ?? "invalid")}`
}

/** A schema's "Expected <type>, actual <value>" in words a file's author reads. */
const plain = (message: string): string => {
  const match = /^Expected (.*), actual (.*)$/s.exec(message)
  if (match === null) return message
  const [, type, actual] = match as unknown as [string, string, string]
  const kind = type.startsWith("ReadonlyArray<") ? "a list" : type.startsWith("{") || type.includes("Struct") ? "an object" : type
  return `expected ${kind}, got ${actual}`
}

/** The agents of a file's text; `path` only names the file in errors. */
export const parse = (path: string, text: string): Effect.Effect<ReadonlyArray<Agent>, AgentsFileError> =>
  Effect.map(parseDeclared(path, text), (declared) => declared.agents)

/** The agents and MCP servers of a file's text; `path` only names the file in errors. */
export const parseDeclared = (path: string, text: string): Effect.Effect<Declared, AgentsFileError> =>
  Effect.gen(function*() {
    const fail = (reason: string) => Effect.fail(new AgentsFileError({ path, reason }))
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      return yield* fail(`not valid JSON (${error instanceof Error ? error.message : "parse error"})`)
    }
    const file = decodeFile(json)
    if (file._tag === "Left") return yield* fail(firstIssue(file.left))
    const agents: Array<Agent> = []
    const names = new Set<string>()
    for (const [index, entry] of file.right.agents.entries()) {
      if (names.has(entry.name)) return yield* fail(`agents.${index}.name: a second agent is named ${entry.name}`)
      names.add(entry.name)
      const toolNames = new Set<string>()
      for (const [t, tool] of entry.tools.entries()) {
        if (toolNames.has(tool.name)) {
          return yield* fail(`agents.${index}.tools.${t}.name: a second tool is named ${tool.name}`)
        }
        toolNames.add(tool.name)
      }
      for (const rule of Object.keys(entry.permissions?.rules ?? {})) {
        if (!toolNames.has(rule)) {
          return yield* fail(`agents.${index}.permissions.rules.${rule}: ${entry.name} has no tool named ${rule} (${
            toolNames.size === 0 ? "it has no tools" : `its tools: ${[...toolNames].join(", ")}`
          })`)
        }
      }
      const servers = file.right.mcpServers ?? {}
      const toolsets = entry.toolsets?.map((ref) => (typeof ref === "string" ? { name: ref } : ref))
      for (const [t, ref] of (toolsets ?? []).entries()) {
        if (!Object.hasOwn(servers, ref.name)) {
          return yield* fail(`agents.${index}.toolsets.${t}: no server named ${ref.name} in mcpServers`)
        }
      }
      const agent = decodeAgent({
        ...entry,
        ...(toolsets === undefined ? {} : { toolsets }),
        model: typeof entry.model === "string" ? { name: entry.model } : entry.model,
        // The file has no code, so every tool runs on the client.
        tools: entry.tools.map((tool) => ({ ...tool, client: true }))
      })
      if (agent._tag === "Left") return yield* fail(firstIssue(agent.left, ["agents", index]))
      agents.push(agent.right)
    }
    return { agents, mcpServers: file.right.mcpServers ?? {} }
  })

/** Reads and parses an agents file. */
export const load = (path: string): Effect.Effect<ReadonlyArray<Agent>, AgentsFileError> =>
  Effect.map(loadDeclared(path), (declared) => declared.agents)

/** Reads and parses an agents file: its agents and MCP servers. */
export const loadDeclared = (path: string): Effect.Effect<Declared, AgentsFileError> =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (error) =>
      new AgentsFileError({
        path,
        reason: `cannot be read (${
          typeof error === "object" && error !== null && "code" in error ? String(error.code) : "unknown error"
        })`
      })
  }).pipe(Effect.flatMap((text) => parseDeclared(path, text)))
