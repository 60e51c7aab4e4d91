/**
 * Turn status and outcomes.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** A turn's lifecycle status. */
export const TurnStatus = Schema.Literal("running", "waiting", "completed", "failed", "interrupted")
/** @since 0.1.0 */
export type TurnStatus = typeof TurnStatus.Type

/** How an ended turn ended. */
export const TurnOutcome = Schema.Literal("completed", "failed", "interrupted")
/** @since 0.1.0 */
export type TurnOutcome = typeof TurnOutcome.Type

/** Stable failure codes of a failed turn. */
export const FailureCode = Schema.Literal(
  "budget_exhausted",
  "max_cycles",
  "model_error",
  "tool_error",
  "session_closed",
  "internal",
  "max_handoffs",
  "guardrail_blocked",
  "invalid_output"
)
/** @since 0.1.0 */
export type FailureCode = typeof FailureCode.Type
