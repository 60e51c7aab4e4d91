/**
 * What a turn runs under, resolved once when it starts: the model settings
 * (run, then agent, then host default, field by field), the budgets (run, then
 * session, then agent, dimension by dimension), the permission of each tool
 * (the strictest of the host's, the parent's, the agent's and the run's
 * layers: `ToolPolicy`), the approval settings, the no-tool policy and the
 * cycle bound (run, then agent), and the tools offered to the model (the
 * agent's, plus the built-in `finish` tool when a reply without tool calls
 * does not end the turn by itself; its `output` is the agent's output schema
 * when it declares one).
 *
 * @since 0.1.0
 */
import { type Agent, ModelSettings, type NoToolPolicy, ToolSpec } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import * as Trusted from "../schema/Trusted.js"
import type { RunOptions } from "../schema/Run.js"
import * as Compaction from "./Compaction.js"
import * as ToolPolicy from "./ToolPolicy.js"

/** The name of the built-in tool that ends a turn. */
export const FINISH = "finish"

/** The built-in `finish` tool: its `output` is the turn's answer. */
export const finishTool = new ToolSpec({
  name: FINISH,
  description: "Call this when the task is done. `output` is your final answer to the user.",
  parameters: {
    type: "object",
    properties: { output: { type: "string", description: "The final answer." } },
    required: ["output"],
    additionalProperties: false
  },
  sideEffect: "none",
  idempotency: "supported",
  client: false
})

/** The `finish` tool of an agent: its `output` takes the agent's output schema, when it declares one. */
const finishToolOf = (agent: Agent): ToolSpec => {
  if (agent.output === undefined) return finishTool
  // Definitions stay at the root, where the schema's `$ref`s point.
  const { $defs, ...output } = agent.output.schema
  return new ToolSpec({
    ...finishTool,
    parameters: {
      type: "object",
      properties: { output: { ...output, description: "The final answer, as its schema says." } },
      required: ["output"],
      additionalProperties: false,
      ...($defs === undefined ? {} : { $defs })
    }
  }, true)
}

/** A resolved plan. */
export interface TurnPlan {
  readonly noToolPolicy: NoToolPolicy
  readonly maxCycles: number
  readonly settings: ModelSettings | undefined
  readonly budgets: Budgets
  readonly tools: ReadonlyArray<ToolSpec>
  /** True when the model ends the turn by calling `finish`. */
  readonly finishes: boolean
  /** The permission of a call of `toolName`, with the layer and rule that decided it. */
  readonly permission: (toolName: string) => ToolPolicy.Decision
  readonly tool: (toolName: string) => ToolSpec | undefined
  /** When and how the context is compacted (run, then agent, then defaults). */
  readonly compaction: Compaction.Settings
  /** The permission layers, in order (a child's turn inherits them all). */
  readonly layers: ReadonlyArray<ToolPolicy.Layer>
  /** `never`: calls that would ask run without asking (denials still deny). */
  readonly approvalMode: "ask" | "never"
  /** How long an approval stays open before it expires; none when absent. */
  readonly approvalTimeoutMs: number | undefined
  /** How many `parallel` tool calls of one reply run at once. */
  readonly maxParallelTools: number
}

const defined = <A extends object>(value: A | undefined): Partial<A> =>
  value === undefined ? {} : Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<A>

/** Resolves the plan of a turn. */
export const resolve = (options: {
  readonly agent: Agent
  readonly run?: RunOptions | undefined
  readonly sessionBudgets?: Budgets | null | undefined
  readonly hostSettings?: ModelSettings | undefined
  /** Built-in tools the runtime runs for this session (the `agents.*` tools of a session that may spawn). */
  readonly builtins?: ReadonlyArray<ToolSpec> | undefined
  /** The host's permission layer, under every other. */
  readonly hostPolicy?: ToolPolicy.Rules | undefined
}): TurnPlan => {
  const { agent, run } = options
  const merged = {
    ...defined(options.hostSettings),
    ...defined(agent.model.settings),
    ...defined(run?.settings)
  }
  const settings = Object.keys(merged).length === 0 ? undefined : new ModelSettings(merged, true)
  const budgets = Trusted.make(Budgets, {
    ...defined(agent.budgets),
    ...defined(options.sessionBudgets ?? undefined),
    ...defined(run?.budgets)
  })
  const noToolPolicy = run?.noToolPolicy ?? agent.noToolPolicy
  const finishes = noToolPolicy !== "finish" && !agent.tools.some((t) => t.name === FINISH)
  const own = finishes ? [...agent.tools, finishToolOf(agent)] : agent.tools
  const builtins = (options.builtins ?? []).filter((b) => !own.some((t) => t.name === b.name))
  const tools = builtins.length === 0 ? own : [...own, ...builtins]
  const byName = new Map(tools.map((t) => [t.name, t]))
  const compaction = Compaction.resolve(agent.compaction, run?.compaction, settings?.maxOutputTokens)
  // Offered only once something was archived (Compaction.offered), known all along.
  if (compaction.enabled && !byName.has(Compaction.READ_ARTIFACT)) byName.set(Compaction.READ_ARTIFACT, Compaction.readArtifactSpec)
  const layers = ToolPolicy.layersOf({
    host: options.hostPolicy,
    inherited: run?.inherited,
    agent: agent.permissions,
    run: run?.permissions
  })
  return {
    noToolPolicy,
    maxCycles: run?.maxCycles ?? agent.maxCycles,
    settings,
    budgets,
    tools,
    finishes,
    tool: (name) => byName.get(name),
    compaction,
    permission: (name) => ToolPolicy.decide(layers, byName.get(name) ?? { name }),
    layers,
    approvalMode: run?.approvals?.mode ?? agent.approvals?.mode ?? "ask",
    approvalTimeoutMs: run?.approvals?.timeoutMs ?? agent.approvals?.timeoutMs,
    maxParallelTools: agent.maxParallelTools ?? 4
  }
}
