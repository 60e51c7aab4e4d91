/**
 * Operations (model calls and tool calls) and their retained receipts.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { OperationId, SessionId, TurnId } from "./Ids.js"
import { Json } from "./Json.js"

/** A model call, a tool call, or the model call that summarizes a conversation (`compaction`). */
export const OperationKind = Schema.Literal("model", "tool", "compaction")
/** @since 0.1.0 */
export type OperationKind = typeof OperationKind.Type

/** `started` without a receipt yet, `completed` with one, `unknown` after a crash. */
export const OperationStatus = Schema.Literal("started", "completed", "unknown")
/** @since 0.1.0 */
export type OperationStatus = typeof OperationStatus.Type

/** The input of a model call as its `operation_started` records it. */
export const ModelCallInput = Schema.Struct({
  /** How many messages the request carried. */
  messages: Schema.Number,
  /** How many tools were on offer. */
  tools: Schema.Number,
  /**
   * How many steers, delivered since the previous model call, the request
   * took (in arrival order). Absent in logs written before it was recorded:
   * then all of them.
   */
  steers: Schema.optional(Schema.Number),
  /** Likewise, how many child results that arrived since the previous model call it took (after the steers). */
  results: Schema.optional(Schema.Number)
})
/** @since 0.1.0 */
export type ModelCallInput = typeof ModelCallInput.Type

/** The input of a tool call as its `operation_started` records it. */
export const ToolCallInput = Schema.Struct({
  /** The model's id for the call. */
  callId: Schema.String,
  /** The arguments as the model wrote them (JSON text). */
  arguments: Schema.String,
  /** The model call whose reply asked for it. */
  requestedBy: OperationId
})
/** @since 0.1.0 */
export type ToolCallInput = typeof ToolCallInput.Type

/** What an operation was started with: a model call's or a tool call's input. */
export const OperationInput = Schema.Union(ModelCallInput, ToolCallInput)
/** @since 0.1.0 */
export type OperationInput = typeof OperationInput.Type

/** Whether a receipt's input is a tool call's. */
export const isToolCallInput = (input: unknown): input is ToolCallInput =>
  typeof input === "object" && input !== null && typeof (input as { readonly callId?: unknown }).callId === "string" &&
  typeof (input as { readonly requestedBy?: unknown }).requestedBy === "string"

/** An operation and, once completed, its retained result. */
export class OperationReceipt extends Schema.Class<OperationReceipt>("troupe/OperationReceipt")({
  operationId: OperationId,
  sessionId: SessionId,
  turnId: TurnId,
  kind: OperationKind,
  name: Schema.String,
  status: OperationStatus,
  /** As its `operation_started` recorded it (an `OperationInput`); absent when the store saw only its end. */
  input: Json,
  output: Schema.optional(Json),
  isError: Schema.Boolean,
  startedSeq: Schema.Number,
  endedSeq: Schema.optional(Schema.Number)
}) {}
