/**
 * What a turn runs under, resolved once when it starts: the model settings
 * (run, then agent, then host default, field by field), the budgets (run, then
 * session, then agent, dimension by dimension), the permission of each tool
 * (run rules, agent rules, run default, agent default) and the tools offered
 * to the model (the agent's, plus the built-in `finish` tool when a reply
 * without tool calls does not end the turn by itself).
 *
 * @since 0.1.0
 */
import { type Agent, ModelSettings, type Permission, ToolSpec } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import type { RunOptions } from "../schema/Run.js"
import * as Compaction from "./Compaction.js"

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

/** A resolved plan. */
export interface TurnPlan {
  readonly settings: ModelSettings | undefined
  readonly budgets: Budgets
  readonly tools: ReadonlyArray<ToolSpec>
  /** True when the model ends the turn by calling `finish`. */
  readonly finishes: boolean
  readonly permission: (toolName: string) => Permission
  readonly tool: (toolName: string) => ToolSpec | undefined
  /** When and how the context is compacted (run, then agent, then defaults). */
  readonly compaction: Compaction.Settings
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
}): TurnPlan => {
  const { agent, run } = options
  const merged = {
    ...defined(options.hostSettings),
    ...defined(agent.model.settings),
    ...defined(run?.settings)
  }
  const settings = Object.keys(merged).length === 0 ? undefined : new ModelSettings(merged, true)
  const budgets = new Budgets({
    ...defined(agent.budgets),
    ...defined(options.sessionBudgets ?? undefined),
    ...defined(run?.budgets)
  }, true)
  const finishes = agent.noToolPolicy !== "finish" && !agent.tools.some((t) => t.name === FINISH)
  const own = finishes ? [...agent.tools, finishTool] : agent.tools
  const builtins = (options.builtins ?? []).filter((b) => !own.some((t) => t.name === b.name))
  const tools = builtins.length === 0 ? own : [...own, ...builtins]
  const byName = new Map(tools.map((t) => [t.name, t]))
  const compaction = Compaction.resolve(agent.compaction, run?.compaction, settings?.maxOutputTokens)
  // Offered only once something was archived (Compaction.offered), known all along.
  if (compaction.enabled && !byName.has(Compaction.READ_ARTIFACT)) byName.set(Compaction.READ_ARTIFACT, Compaction.readArtifactSpec)
  const runRules = run?.permissions?.rules ?? {}
  const agentRules = agent.permissions.rules
  return {
    settings,
    budgets,
    tools,
    finishes,
    tool: (name) => byName.get(name),
    compaction,
    permission: (name) => {
      if (Object.hasOwn(runRules, name)) return runRules[name]!
      if (Object.hasOwn(agentRules, name)) return agentRules[name]!
      return run?.permissions?.default ?? agent.permissions.default
    }
  }
}
