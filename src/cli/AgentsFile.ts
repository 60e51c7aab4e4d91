/**
 * `--agents FILE`: the agents a daemon serves (and `troupe run` picks from),
 * as JSON of the shape `AgentsFileSchema` declares (`troupe agents schema`
 * prints it as JSON Schema; docs/configuration.md explains every field):
 *
 * ```json
 * { "agents": [
 *   { "name": "lead", "instructions": "Delegate research.", "subagents": ["researcher"],
 *     "subagentPolicy": { "maxDepth": 2, "maxChildTurns": 10 } },
 *   { "name": "researcher", "instructions": "Research.",
 *     "tools": [ { "name": "search", "parameters": { "type": "object" }, "sideEffect": "read" } ] }
 * ] }
 * ```
 *
 * Decoding is in two steps, each reporting every problem it finds as
 * `path: what was expected` (`agents.1.tools.0.sideEffect: expected …`):
 * the file's shape (`AgentsFileSchema.AgentsFile`, unknown fields are errors,
 * so a typo never silently drops a setting), then its references (handoffs,
 * agent tools, subagents and permission rules name agents and tools that
 * exist; handoffs and agent tools, which embed their target, form no cycle).
 * What comes out are the same `Agent` values code would build. `mcpServers`
 * (beside `agents`) declares MCP servers in the shape Claude Desktop and
 * Cursor use; an agent's `toolsets` names them, and their tools run on the
 * daemon (docs/tools.md).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { readFile } from "node:fs/promises"
import * as Handoffs from "../actors/Handoffs.js"
import * as SubagentTools from "../actors/SubagentTools.js"
import {
  Agent,
  asTool,
  ModelRef,
  ModelSettings,
  OutputSpec,
  type Permission,
  PermissionPolicy,
  SubagentRef,
  ToolSpec
} from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import { CompactionSettings } from "../schema/Compaction.js"
import { ApprovalSettings, SubagentPolicy } from "../schema/Policy.js"
import { type McpServers, ServerName, ToolsetRef } from "../schema/Toolset.js"
import * as Builtins from "../tools/Builtins.js"
import * as AgentsFileSchema from "./AgentsFileSchema.js"

/** The agents file could not be read or is not of the documented shape; `problems` has one line each. */
export class AgentsFileError extends Schema.TaggedError<AgentsFileError>()("AgentsFileError", {
  path: Schema.String,
  /** Every problem, as `where: what`; `reason` joins them on one line. */
  problems: Schema.Array(Schema.String)
}) {
  /** The problems on one line. */
  get reason(): string {
    return this.problems.join("; ")
  }
  override get message() {
    return `agents file ${this.path}: ${this.reason}`
  }
}

const decodeFile = Schema.decodeUnknownEither(AgentsFileSchema.AgentsFile, { onExcessProperty: "error", errors: "all" })

/** A schema's "Expected <type>, actual <value>" in words a file's author reads. */
const plain = (message: string): string => {
  const match = /^Expected (.*), actual (.*)$/s.exec(message)
  if (match === null) return message
  const [, type, actual] = match as unknown as [string, string, string]
  const kind = type.startsWith("ReadonlyArray<") ? "a list" : type.startsWith("{") || type.includes("Struct") ? "an object" : type
  return `expected ${kind}, got ${actual}`
}

/** Why a key is refused: an `mcpServers` key is no server name (say which rule), anything else is no field. */
const unexpected = (path: ReadonlyArray<PropertyKey>): string => {
  if (path.length === 2 && path[0] === "mcpServers") {
    const named = Schema.validateEither(ServerName)(String(path[1]))
    if (Either.isLeft(named)) return ParseResult.ArrayFormatter.formatErrorSync(named.left)[0]?.message ?? "not a server name"
  }
  return "is not a field here (see `troupe agents schema`)"
}

/**
 * Every issue of a parse error, as `where: what`, one per place: a union's
 * members (an optional field's `undefined`, each literal of a choice) are
 * told as one problem, `expected "a" | "b", got "c"`.
 */
const issuesOf = (error: ParseResult.ParseError): ReadonlyArray<string> => {
  const byPath = new Map<string, { expected: Array<string>; got: string; other: Array<string> }>()
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    const where = issue.path.map(String).join(".")
    const entry = byPath.get(where) ?? { expected: [], got: "", other: [] }
    byPath.set(where, entry)
    const match = /^Expected (.*), actual (.*)$/s.exec(issue.message)
    if (issue._tag === "Unexpected") entry.other.push(unexpected(issue.path))
    else if (match !== null && match[1] === "undefined") continue
    else if (match !== null && /^(".*"|\d+|true|false|null)$/.test(match[1]!)) {
      entry.expected.push(match[1]!)
      entry.got = match[2]!
    } else entry.other.push(plain(issue.message))
  }
  return [...byPath].flatMap(([where, { expected, got, other }]) =>
    [...(expected.length === 0 ? [] : [`expected ${expected.join(" | ")}, got ${got}`]), ...new Set(other)]
      .map((what) => `${where === "" ? "" : `${where}: `}${what}`)
  )
}

/** Where a problem is in the file, and the problems found so far. */
export interface Problems {
  readonly add: (where: ReadonlyArray<string | number>, what: string) => void
  readonly list: Array<string>
}

const problemsOf = (): Problems => {
  const list: Array<string> = []
  return { list, add: (where, what) => void list.push(`${where.join(".")}: ${what}`) }
}

/** Omits the keys whose value is `undefined`, so an agent built here equals one built in code without them. */
const defined = <A extends Record<string, unknown>>(value: A): Defined<A> =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Defined<A>

/** `A` with its keys that may be `undefined` made optional instead. */
type Defined<A> =
  & { readonly [K in keyof A as undefined extends A[K] ? never : K]: A[K] }
  & { readonly [K in keyof A as undefined extends A[K] ? K : never]?: Exclude<A[K], undefined> }

/** What a tool source is given beside the entry: where it is, the agents built so far, and where problems go. */
export interface ToolContext {
  readonly at: ReadonlyArray<string | number>
  /** An agent of the file this entry embeds (checked to exist, and built first). */
  readonly built: (name: string) => Agent | undefined
  readonly problems: Problems
}

/** The tools of one entry, from one of the ways a file gives an agent tools. */
export type ToolSource = (entry: AgentsFileSchema.AgentEntry, context: ToolContext) => ReadonlyArray<ToolSpec>

/** The tool metadata the file may give any tool. */
const metadataOf = (tool: AgentsFileSchema.ToolEntry) =>
  defined({
    capabilities: tool.capabilities,
    costs: tool.costs,
    terminal: tool.terminal,
    parallel: tool.parallel,
    preserveResult: tool.preserveResult
  })

/** `tools`: client tools, and agent tools (`agent`), in the order given. */
const declaredTools: ToolSource = (entry, { built }) =>
  (entry.tools ?? []).map((tool) =>
    tool.agent === undefined
      ? new ToolSpec({
        ...defined({ sideEffect: tool.sideEffect, idempotency: tool.idempotency }),
        name: tool.name,
        description: tool.description ?? "",
        parameters: tool.parameters ?? { type: "object", properties: {} },
        // The file has no code, so the tool runs on the client.
        client: true,
        ...metadataOf(tool)
      })
      : new ToolSpec({
        ...asTool(built(tool.agent)!, { name: tool.name, description: tool.description ?? "" }),
        ...defined({ sideEffect: tool.sideEffect, idempotency: tool.idempotency }),
        ...metadataOf(tool)
      })
  )

/** The built-ins an entry names (`builtins`), run by the host on its workspace. */
const builtinTools: ToolSource = (entry) => (entry.builtins === undefined ? [] : Builtins.specsOrThrow(entry.builtins))

/**
 * The ways a file gives an agent tools, in the order their tools are listed.
 * Issue 31 (`toolsets`, `mcpServers`) and issue 32 (`builtins`) add theirs here.
 */
const toolSources: ReadonlyArray<ToolSource> = [declaredTools, builtinTools]

/** The agents an entry embeds (handoff targets, agent tools): they must be built first. */
const embedded = (entry: AgentsFileSchema.AgentEntry): ReadonlyArray<readonly [ReadonlyArray<string | number>, string]> => [
  ...(entry.handoffs ?? []).map((name, i) => [["handoffs", i], name] as const),
  ...(entry.tools ?? []).flatMap((tool, i) => (tool.agent === undefined ? [] : [[["tools", i, "agent"], tool.agent] as const]))
]

/** The subagent refs of an entry, in both of the file's shapes. */
const subagentsOf = (entry: AgentsFileSchema.AgentEntry): ReadonlyArray<SubagentRef> =>
  (entry.subagents ?? []).map((ref) =>
    typeof ref === "string" ? new SubagentRef({ name: ref }) : new SubagentRef(defined({ name: ref.name, description: ref.description }))
  )

/** Checks what an entry names against the file: tools, rules, subagents, handoff and agent-tool targets. */
const checkReferences = (
  entry: AgentsFileSchema.AgentEntry,
  at: ReadonlyArray<string | number>,
  names: ReadonlySet<string>,
  problems: Problems
) => {
  const known = (what: string) => (names.has(what) ? "" : `no agent of this file is named ${what} (there are: ${[...names].join(", ")})`)
  const toolNames = new Set<string>()
  for (const [t, tool] of (entry.tools ?? []).entries()) {
    if (toolNames.has(tool.name)) problems.add([...at, "tools", t, "name"], `a second tool is named ${tool.name}`)
    toolNames.add(tool.name)
    if (tool.agent !== undefined && tool.parameters !== undefined) {
      problems.add([...at, "tools", t, "parameters"], "an agent tool takes { input }: leave parameters out")
    }
    const rule = entry.permissions?.rules[tool.name]
    if (tool.needsApproval === true && rule !== undefined && rule !== "ask") {
      problems.add([...at, "tools", t, "needsApproval"], `the permission rule for ${tool.name} says ${rule}`)
    }
  }
  if (entry.builtins !== undefined) {
    const builtins = new Set(Either.getOrElse(Builtins.specs(entry.builtins), () => []).map((spec) => spec.name))
    for (const [t, tool] of (entry.tools ?? []).entries()) {
      if (builtins.has(tool.name)) problems.add([...at, "tools", t, "name"], `${tool.name} is one of its builtins: leave one out`)
    }
  }
  for (const [[...where], target] of embedded(entry)) {
    const missing = known(target)
    if (missing !== "") problems.add([...at, ...where], missing)
  }
  for (const [i, ref] of subagentsOf(entry).entries()) {
    const missing = known(ref.name)
    if (missing !== "") problems.add([...at, "subagents", i], missing)
  }
  for (const [i, name] of (entry.subagentPolicy?.allowedAgents ?? []).entries()) {
    const missing = known(name)
    if (missing !== "") problems.add([...at, "subagentPolicy", "allowedAgents", i], missing)
  }
  const spawns = (entry.subagents ?? []).length > 0 || entry.subagentPolicy !== undefined ||
    (entry.tools ?? []).some((tool) => tool.agent !== undefined)
  const offered = new Set([
    ...toolNames,
    ...(entry.handoffs ?? []).map((name) => Handoffs.toolName({ name } as Agent)),
    ...(spawns ? [SubagentTools.LIST_CONFIGS, SubagentTools.SPAWN, SubagentTools.LIST, SubagentTools.SEND_MESSAGE, SubagentTools.INTERRUPT, SubagentTools.WAIT] : [])
  ])
  for (const rule of Object.keys(entry.permissions?.rules ?? {})) {
    if (!offered.has(rule)) {
      problems.add([...at, "permissions", "rules", rule], `${entry.name} has no tool named ${rule} (${
        offered.size === 0 ? "it has no tools" : `its tools: ${[...offered].join(", ")}`
      })`)
    }
  }
}

/** The permission policy of an entry, with `ask` for each tool that `needsApproval`. */
const permissionsOf = (entry: AgentsFileSchema.AgentEntry): PermissionPolicy | undefined => {
  const asking = (entry.tools ?? []).filter((tool) => tool.needsApproval === true).map((tool) => [tool.name, "ask" as Permission] as const)
  if (entry.permissions === undefined && asking.length === 0) return undefined
  const given = entry.permissions ?? { default: "allow" as const, rules: {} }
  return new PermissionPolicy(defined({ ...given, rules: { ...given.rules, ...Object.fromEntries(asking) } }))
}

/** The `Agent` of an entry whose embedded agents are `built`. */
const agentOf = (entry: AgentsFileSchema.AgentEntry, context: ToolContext) => {
  const model = entry.model === undefined || typeof entry.model === "string"
    ? new ModelRef({ name: entry.model ?? "default" })
    : new ModelRef(defined({ name: entry.model.name, settings: entry.model.settings && new ModelSettings(entry.model.settings) }))
  return new Agent(defined({
    name: entry.name,
    description: entry.description,
    instructions: entry.instructions,
    model,
    tools: toolSources.flatMap((source) => source(entry, context)),
    permissions: permissionsOf(entry),
    approvals: entry.approvals && new ApprovalSettings(entry.approvals),
    noToolPolicy: entry.noToolPolicy,
    maxCycles: entry.maxCycles,
    maxHandoffs: entry.maxHandoffs,
    maxParallelTools: entry.maxParallelTools,
    subagents: entry.subagents && subagentsOf(entry),
    subagentPolicy: entry.subagentPolicy && new SubagentPolicy(entry.subagentPolicy),
    handoffs: entry.handoffs?.map((name) => context.built(name)!),
    output: entry.output && new OutputSpec(defined({ name: entry.output.name ?? "output", schema: entry.output.schema, maxRetries: entry.output.maxRetries })),
    compaction: entry.compaction && new CompactionSettings(entry.compaction),
    budgets: entry.budgets && new Budgets(entry.budgets),
    toolsets: entry.toolsets?.map((ref) => new ToolsetRef(typeof ref === "string" ? { name: ref } : defined({ name: ref.name, tools: ref.tools })))
  }))
}

/**
 * The agents of decoded entries, each built after the agents it embeds; a
 * cycle of embeddings (a hands off to b, b back to a) is a problem, since an
 * embedded agent is a value, not a name looked up later.
 */
const buildAll = (entries: ReadonlyArray<AgentsFileSchema.AgentEntry>, problems: Problems): ReadonlyArray<Agent> => {
  const index = new Map(entries.map((entry, i) => [entry.name, i] as const))
  const built = new Map<string, Agent>()
  const visiting: Array<string> = []
  const build = (i: number): Agent | undefined => {
    const entry = entries[i]!
    const done = built.get(entry.name)
    if (done !== undefined) return done
    visiting.push(entry.name)
    for (const [where, target] of embedded(entry)) {
      if (visiting.includes(target)) {
        problems.add(["agents", i, ...where], `${[...visiting.slice(visiting.indexOf(target)), target].join(" → ")} is a cycle: an agent cannot embed itself (spawn it as a subagent instead)`)
        visiting.pop()
        return undefined
      }
      if (build(index.get(target)!) === undefined) {
        visiting.pop()
        return undefined
      }
    }
    visiting.pop()
    const agent = agentOf(entry, { at: ["agents", i], built: (name) => built.get(name), problems })
    built.set(entry.name, agent)
    return agent
  }
  return entries.flatMap((_, i) => {
    const agent = build(i)
    return agent === undefined ? [] : [agent]
  })
}

/** The agents of a decoded file, or every problem of its references. */
export const resolve = (file: AgentsFileSchema.AgentsFile): Either.Either<ReadonlyArray<Agent>, ReadonlyArray<string>> => {
  const problems = problemsOf()
  const names = new Set<string>()
  for (const [i, entry] of file.agents.entries()) {
    if (names.has(entry.name)) problems.add(["agents", i, "name"], `a second agent is named ${entry.name}`)
    names.add(entry.name)
  }
  for (const [i, entry] of file.agents.entries()) checkReferences(entry, ["agents", i], names, problems)
  const servers = file.mcpServers ?? {}
  for (const [i, entry] of file.agents.entries()) {
    for (const [t, ref] of (entry.toolsets ?? []).entries()) {
      const name = typeof ref === "string" ? ref : ref.name
      if (!Object.hasOwn(servers, name)) problems.add(["agents", i, "toolsets", t], `no server named ${name} in mcpServers`)
    }
  }
  if (problems.list.length > 0) return Either.left(problems.list)
  const agents = buildAll(file.agents, problems)
  return problems.list.length > 0 ? Either.left([...new Set(problems.list)]) : Either.right(agents)
}

/** What a file declares: its agents, and the MCP servers their toolsets name. */
export interface Declared {
  readonly agents: ReadonlyArray<Agent>
  readonly mcpServers: typeof McpServers.Type
  /** Each agent's `env`, by name: variables for its built-in commands (host configuration, not part of the `Agent`). */
  readonly env: Readonly<Record<string, Readonly<Record<string, string>>>>
}

/** The agents of a file's text; `path` only names the file in errors. */
export const parse = (path: string, text: string): Effect.Effect<ReadonlyArray<Agent>, AgentsFileError> =>
  Effect.map(parseDeclared(path, text), (declared) => declared.agents)

/** The agents and MCP servers of a file's text; `path` only names the file in errors. */
export const parseDeclared = (path: string, text: string): Effect.Effect<Declared, AgentsFileError> =>
  Effect.suspend(() => {
    const fail = (problems: ReadonlyArray<string>) => Effect.fail(new AgentsFileError({ path, problems }))
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      return fail([`not valid JSON (${error instanceof Error ? error.message : "parse error"})`])
    }
    const file = decodeFile(json)
    if (Either.isLeft(file)) return fail(issuesOf(file.left))
    const servers = file.right.mcpServers ?? {}
    return Either.match(resolve(file.right), {
      onLeft: fail,
      onRight: (agents) =>
        Effect.succeed<Declared>({
          agents,
          mcpServers: servers,
          env: Object.fromEntries(file.right.agents.flatMap((entry) => (entry.env === undefined ? [] : [[entry.name, entry.env]])))
        })
    })
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
        problems: [`cannot be read (${
          typeof error === "object" && error !== null && "code" in error ? String(error.code) : "unknown error"
        })`]
      })
  }).pipe(Effect.flatMap((text) => parseDeclared(path, text)))
