/**
 * Operations (model calls and tool calls) and their retained receipts.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { OperationId, SessionId, TurnId } from "./Ids.js"
import { Json } from "./Json.js"

/** A model call or a tool call. */
export const OperationKind = Schema.Literal("model", "tool")
/** @since 0.1.0 */
export type OperationKind = typeof OperationKind.Type

/** `started` without a receipt yet, `completed` with one, `unknown` after a crash. */
export const OperationStatus = Schema.Literal("started", "completed", "unknown")
/** @since 0.1.0 */
export type OperationStatus = typeof OperationStatus.Type

/** An operation and, once completed, its retained result. */
export class OperationReceipt extends Schema.Class<OperationReceipt>("troupe/OperationReceipt")({
  operationId: OperationId,
  sessionId: SessionId,
  turnId: TurnId,
  kind: OperationKind,
  name: Schema.String,
  status: OperationStatus,
  input: Json,
  output: Schema.optional(Json),
  isError: Schema.Boolean,
  startedSeq: Schema.Number,
  endedSeq: Schema.optional(Schema.Number)
}) {}
