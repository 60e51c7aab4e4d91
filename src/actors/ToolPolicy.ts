/**
 * Cumulative tool permissions: the layers a turn runs under (the host's, a
 * parent's, the agent's, the run's) each say `allow`, `ask` or `deny` about a
 * tool, and the strictest wins. A later layer can add a denial or an `ask`; it
 * never lifts an earlier layer's denial (decision 0017).
 *
 * Within one layer, a rule naming the tool wins over the others (so a layer
 * can deny a capability and allow one tool that has it); otherwise the
 * strictest of its rules that match the tool's metadata (side effect,
 * capability tags, cost dimensions, `terminal`); otherwise the layer's
 * default; a layer without a default and without a matching rule has no
 * opinion. Pure: no effects.
 *
 * @since 0.1.0
 */
import { PermissionLayer, type Permission, type SideEffect, type ToolSpec } from "../schema/Agent.js"
import { RunOptions } from "../schema/Run.js"
import * as Trusted from "../schema/Trusted.js"
import type { ToolOutcome } from "../services/Tool.js"

/** What one layer says, by rule kind; every field optional. */
export interface Rules {
  readonly default?: Permission | undefined
  readonly rules?: Readonly<Record<string, Permission>> | undefined
  readonly sideEffects?: { readonly [K in SideEffect]?: Permission | undefined } | undefined
  readonly capabilities?: Readonly<Record<string, Permission>> | undefined
  readonly costs?: Readonly<Record<string, Permission>> | undefined
  readonly terminal?: Permission | undefined
}

/** One layer: where it comes from (`host`, `parent`, `agent`, `run`) and its rules. */
export interface Layer {
  readonly source: string
  readonly rules: Rules
}

/** The decision on one tool, and the layer and rule that made it (none for an `allow` nobody objected to). */
export interface Decision {
  readonly permission: Permission
  readonly source?: string | undefined
  /** `name`, `side_effect:write`, `capability:network`, `cost:money`, `terminal` or `default`. */
  readonly rule?: string | undefined
}

/** What a decision needs of a tool: its name, and its metadata when the tool is known. */
export type Subject = Pick<ToolSpec, "name"> & Partial<Pick<ToolSpec, "sideEffect" | "capabilities" | "costs" | "terminal">>

const strictness: Record<Permission, number> = { allow: 0, ask: 1, deny: 2 }

const stricter = (a: Decision | undefined, b: Decision | undefined): Decision | undefined =>
  a === undefined ? b : b === undefined ? a : strictness[b.permission] > strictness[a.permission] ? b : a

/** What one layer says about `tool`, or `undefined` when it has no opinion. */
export const layerDecision = (layer: Layer, tool: Subject): Decision | undefined => {
  const { rules, source } = layer
  if (rules.rules !== undefined && Object.hasOwn(rules.rules, tool.name)) {
    return { permission: rules.rules[tool.name]!, source, rule: "name" }
  }
  let found: Decision | undefined
  const sideEffect = tool.sideEffect === undefined ? undefined : rules.sideEffects?.[tool.sideEffect]
  if (sideEffect !== undefined) found = stricter(found, { permission: sideEffect, source, rule: `side_effect:${tool.sideEffect}` })
  for (const tag of tool.capabilities ?? []) {
    if (rules.capabilities !== undefined && Object.hasOwn(rules.capabilities, tag)) {
      found = stricter(found, { permission: rules.capabilities[tag]!, source, rule: `capability:${tag}` })
    }
  }
  for (const cost of tool.costs ?? []) {
    if (rules.costs !== undefined && Object.hasOwn(rules.costs, cost)) {
      found = stricter(found, { permission: rules.costs[cost]!, source, rule: `cost:${cost}` })
    }
  }
  if (tool.terminal === true && rules.terminal !== undefined) {
    found = stricter(found, { permission: rules.terminal, source, rule: "terminal" })
  }
  if (found !== undefined) return found
  return rules.default === undefined ? undefined : { permission: rules.default, source, rule: "default" }
}

/** The turn's decision on `tool`: the strictest of its layers' (the first layer to say it, on a tie). */
export const decide = (layers: ReadonlyArray<Layer>, tool: Subject): Decision => {
  let decision: Decision | undefined
  for (const layer of layers) decision = stricter(decision, layerDecision(layer, tool))
  return decision ?? { permission: "allow" }
}

/** The layers of a turn, in order: the host's, those inherited from the parent's turn, the agent's, the run's. */
export const layersOf = (options: {
  readonly host?: Rules | undefined
  readonly inherited?: ReadonlyArray<PermissionLayer> | undefined
  readonly agent: Rules
  readonly run?: Rules | undefined
}): ReadonlyArray<Layer> => {
  const layers: Array<Layer> = []
  if (options.host !== undefined) layers.push({ source: "host", rules: options.host })
  for (const layer of options.inherited ?? []) layers.push({ source: "parent", rules: layer })
  layers.push({ source: "agent", rules: options.agent })
  if (options.run !== undefined) layers.push({ source: "run", rules: options.run })
  return layers
}

/** The layers a child's turn inherits from this turn: all of them, each marked as its parent's. */
export const forChild = (layers: ReadonlyArray<Layer>): ReadonlyArray<PermissionLayer> =>
  layers.map(({ rules }) => {
    const fields = {
      default: rules.default,
      rules: rules.rules,
      sideEffects: rules.sideEffects,
      capabilities: rules.capabilities,
      costs: rules.costs,
      terminal: rules.terminal
    }
    const set = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined))
    return Trusted.make(PermissionLayer, { source: "parent", ...set })
  })

/**
 * The run options of the messages a turn sends its children (a spawn's first
 * message, `agents.send_message`): its layers bind the child's turn, and its
 * run's approval settings carry over.
 */
export const childRun = (layers: ReadonlyArray<Layer>, run: RunOptions | undefined): RunOptions => {
  const approvals = run?.approvals
  return Trusted.make(RunOptions, { inherited: forChild(layers), ...(approvals === undefined ? {} : { approvals }) })
}

/** A denied call as the model sees it: `tool_not_allowed`, with the layer and rule that denied it. */
export const notAllowed = (tool: string, decision: Decision): ToolOutcome => ({
  output: {
    error: `tool_not_allowed: ${tool} is denied by the ${decision.source ?? "default"} policy${
      decision.rule === undefined ? "" : ` (${decision.rule})`
    }`,
    code: "tool_not_allowed",
    ...(decision.source === undefined ? {} : { layer: decision.source }),
    ...(decision.rule === undefined ? {} : { rule: decision.rule })
  },
  isError: true
})
