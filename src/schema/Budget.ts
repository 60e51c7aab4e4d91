/**
 * Per-turn budgets and the usage they are measured against.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

const Limit = Schema.Number.pipe(Schema.int(), Schema.nonNegative())

/** Optional per-turn limits; an absent limit is unlimited. */
export class Budgets extends Schema.Class<Budgets>("troupe/Budgets")({
  totalTokens: Schema.optional(Limit),
  inputTokens: Schema.optional(Limit),
  toolCalls: Schema.optional(Limit),
  toolCallsByName: Schema.optional(Schema.Record({ key: Schema.String, value: Limit })),
  /** Active wall time in milliseconds; time parked on a callback does not count. */
  wallTimeMs: Schema.optional(Limit),
  /** Host-metered cost in millionths of the host's currency unit. */
  costMicros: Schema.optional(Limit)
}) {}

/** The dimension a budget was exhausted on. */
export const BudgetDimension = Schema.Literal(
  "totalTokens",
  "inputTokens",
  "toolCalls",
  "toolCallsByName",
  "wallTimeMs",
  "costMicros"
)
/** @since 0.1.0 */
export type BudgetDimension = typeof BudgetDimension.Type

/** What a turn consumed. */
export class Usage extends Schema.Class<Usage>("troupe/Usage")({
  inputTokens: Limit,
  outputTokens: Limit,
  totalTokens: Limit,
  modelCalls: Limit,
  toolCalls: Limit,
  toolCallsByName: Schema.Record({ key: Schema.String, value: Limit }),
  wallTimeMs: Limit,
  costMicros: Limit
}) {
  /** Usage of a turn that has done nothing yet. */
  static readonly zero = new Usage({
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    modelCalls: 0,
    toolCalls: 0,
    toolCallsByName: {},
    wallTimeMs: 0,
    costMicros: 0
  })
}
