/**
 * What a turn has used, and whether it may go on: the usage every turn
 * reports, and the budget checks made before each model call and tool batch
 * and after each result. Time parked on a callback or waiting for the user is
 * not active time.
 *
 * @since 0.1.0
 */
import type { Budgets, BudgetDimension } from "../schema/Budget.js"
import { Usage } from "../schema/Budget.js"
import * as Trusted from "../schema/Trusted.js"

/** Why a budget stopped a turn. */
export interface Exhaustion {
  readonly dimension: BudgetDimension
  readonly limit: number
  readonly observed: number
  readonly toolName?: string | undefined
}

/** A turn's running usage. */
export interface TurnMeter {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly modelCalls: number
  readonly toolCalls: number
  readonly toolCallsByName: Readonly<Record<string, number>>
  readonly costMicros: number
  /** A model call's reply came back. */
  readonly addModelCall: (inputTokens: number, outputTokens: number, costMicros: number) => void
  /** A tool call ran (or was refused, or its outcome is unknown: it counts all the same). */
  readonly addToolCall: (name: string) => void
  /** The turn was parked for `millis` (not active). */
  readonly addParked: (millis: number) => void
  /** Active wall time at `now`. */
  readonly activeMillis: (now: number) => number
  /** The usage at `now`. */
  readonly usage: (now: number) => Usage
}

/** A meter for a turn that (re)started at `startedAt`. */
export const make = (startedAt: number): TurnMeter => {
  let parked = 0
  const byName: Record<string, number> = {}
  const meter = {
    inputTokens: 0,
    outputTokens: 0,
    modelCalls: 0,
    toolCalls: 0,
    toolCallsByName: byName,
    costMicros: 0,
    addModelCall: (inputTokens: number, outputTokens: number, costMicros: number) => {
      meter.inputTokens += inputTokens
      meter.outputTokens += outputTokens
      meter.costMicros += costMicros
      meter.modelCalls++
    },
    addToolCall: (name: string) => {
      meter.toolCalls++
      byName[name] = (byName[name] ?? 0) + 1
    },
    addParked: (millis: number) => {
      parked += millis
    },
    activeMillis: (now: number) => Math.max(0, now - startedAt - parked),
    usage: (now: number) =>
      Trusted.make(Usage, {
        inputTokens: meter.inputTokens,
        outputTokens: meter.outputTokens,
        totalTokens: meter.inputTokens + meter.outputTokens,
        modelCalls: meter.modelCalls,
        toolCalls: meter.toolCalls,
        toolCallsByName: { ...byName },
        wallTimeMs: meter.activeMillis(now),
        costMicros: meter.costMicros
      })
  }
  return meter
}

const over = (
  dimension: BudgetDimension,
  limit: number | undefined,
  observed: number,
  strict: boolean
): Exhaustion | undefined =>
  limit !== undefined && (strict ? observed > limit : observed >= limit) ? { dimension, limit, observed } : undefined

/**
 * Before a model call: a budget already used up leaves no room for it
 * (`observed >= limit`; a limit of 0 allows no call at all).
 */
export const checkBeforeModelCall = (budgets: Budgets, meter: TurnMeter, now: number): Exhaustion | undefined =>
  over("totalTokens", budgets.totalTokens, meter.inputTokens + meter.outputTokens, false) ??
    over("inputTokens", budgets.inputTokens, meter.inputTokens, false) ??
    over("costMicros", budgets.costMicros, meter.costMicros, false) ??
    over("wallTimeMs", budgets.wallTimeMs, meter.activeMillis(now), false)

/** After a result came back: a budget is exhausted once usage went past it. */
export const checkAfterResult = (budgets: Budgets, meter: TurnMeter, now: number): Exhaustion | undefined =>
  over("totalTokens", budgets.totalTokens, meter.inputTokens + meter.outputTokens, true) ??
    over("inputTokens", budgets.inputTokens, meter.inputTokens, true) ??
    over("costMicros", budgets.costMicros, meter.costMicros, true) ??
    over("wallTimeMs", budgets.wallTimeMs, meter.activeMillis(now), true)

/** Before a batch of tool calls: the batch must fit the tool-call budgets, in total and per name. */
export const checkBeforeToolBatch = (
  budgets: Budgets,
  meter: TurnMeter,
  names: ReadonlyArray<string>,
  now: number
): Exhaustion | undefined => {
  const total = over("toolCalls", budgets.toolCalls, meter.toolCalls + names.length, true)
  if (total !== undefined) return total
  if (budgets.toolCallsByName !== undefined) {
    const counts: Record<string, number> = {}
    for (const name of names) counts[name] = (counts[name] ?? 0) + 1
    for (const [name, count] of Object.entries(counts)) {
      const limit = Object.hasOwn(budgets.toolCallsByName, name) ? budgets.toolCallsByName[name] : undefined
      const observed = (meter.toolCallsByName[name] ?? 0) + count
      if (limit !== undefined && observed > limit) return { dimension: "toolCallsByName", limit, observed, toolName: name }
    }
  }
  return over("wallTimeMs", budgets.wallTimeMs, meter.activeMillis(now), true)
}
