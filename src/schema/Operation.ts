/**
 * Operations (model calls and tool calls) and their retained receipts.
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { OperationId, SessionId, TurnId } from "./Ids.js"
import { Json } from "./Json.js"
import { FailureCode, TurnOutcome } from "./Turn.js"

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

// The outputs an `operation_completed` record carries, by the kind of its operation. The record keeps
// `output` as JSON, so every log, old or new, stores and decodes as it did; a reader decodes it once
// with its kind's schema and reads fields. A field a log of an older troupe lacks takes its empty value.

/** A tool call a model reply asked for; `arguments` is the JSON text the model wrote. */
export const ToolCallRequest = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/** @since 0.3.0 */
export type ToolCallRequest = typeof ToolCallRequest.Type

/** A model call's output (kind `model`): its reply's text and tool calls, and the tokens it reported. */
export const ModelReplyOutput = Schema.Struct({
  text: Schema.optionalWith(Schema.String, { default: () => "" }),
  toolCalls: Schema.optionalWith(Schema.Array(ToolCallRequest), { default: () => [] }),
  inputTokens: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  outputTokens: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  finishReason: Schema.optional(Schema.String)
})
/** @since 0.3.0 */
export type ModelReplyOutput = typeof ModelReplyOutput.Type

/** The summary call's output (kind `compaction`): the summary, its tokens, and whether it was rejected (too long or empty). */
export const SummaryOutput = Schema.Struct({
  summary: Schema.optionalWith(Schema.String, { default: () => "" }),
  inputTokens: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  outputTokens: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  rejected: Schema.optional(Schema.Boolean)
})
/** @since 0.3.0 */
export type SummaryOutput = typeof SummaryOutput.Type

/** A failed model or tool call's output (`isError`): what went wrong, as the model reads it. */
export const ErrorOutput = Schema.Struct({
  error: Schema.String,
  code: Schema.optional(Schema.String),
  retryable: Schema.optional(Schema.Boolean)
})
/** @since 0.3.0 */
export type ErrorOutput = typeof ErrorOutput.Type

/** `agents.spawn`'s output (a tool result): the child's session id and alias. */
export const SpawnOutput = Schema.Struct({
  sessionId: SessionId,
  alias: Schema.String
})
/** @since 0.3.0 */
export type SpawnOutput = typeof SpawnOutput.Type

/** A child's result as `agents.list` and `agents.wait` give it to the model. */
export const ChildResultView = Schema.Struct({
  sessionId: SessionId,
  alias: Schema.NullOr(Schema.String),
  turnId: TurnId,
  outcome: TurnOutcome,
  output: Schema.optional(Schema.String),
  failureCode: Schema.optional(FailureCode),
  reason: Schema.optional(Schema.String)
})
/** @since 0.3.0 */
export type ChildResultView = typeof ChildResultView.Type

/** `agents.wait`'s output (a tool result): the child results it returned, and whether it timed out first. */
export const WaitOutput = Schema.Struct({
  results: Schema.Array(ChildResultView),
  timedOut: Schema.optional(Schema.Boolean)
})
/** @since 0.3.0 */
export type WaitOutput = typeof WaitOutput.Type

const decodeModelReplySlow = Schema.decodeUnknownOption(ModelReplyOutput)

const isToolCallRequest = (call: unknown): call is ToolCallRequest =>
  Predicate.hasProperty(call, "id") && typeof call.id === "string" && Predicate.hasProperty(call, "name") &&
  typeof call.name === "string" && Predicate.hasProperty(call, "arguments") && typeof call.arguments === "string"

/** Whether `output` is a whole reply as this troupe writes it: `ModelReplyOutput`'s type, checked by hand. */
const isWholeReply = (output: unknown): output is ModelReplyOutput =>
  Predicate.hasProperty(output, "text") && typeof output.text === "string" &&
  Predicate.hasProperty(output, "toolCalls") && Array.isArray(output.toolCalls) && output.toolCalls.every(isToolCallRequest) &&
  Predicate.hasProperty(output, "inputTokens") && typeof output.inputTokens === "number" &&
  Predicate.hasProperty(output, "outputTokens") && typeof output.outputTokens === "number" &&
  (!Predicate.hasProperty(output, "finishReason") || output.finishReason === undefined || typeof output.finishReason === "string")

/**
 * A model call's output as its reply; `None` when it cannot be one (not an
 * object, or a field of the wrong type). The fold reads every reply of a log, so a reply as this
 * troupe writes it is taken by a hand check (test/schema.test.ts holds it to
 * the schema) at a hundredth of a schema decode's cost; anything else (an
 * older log's reply lacking fields) goes through the schema.
 */
export const decodeModelReply = (output: unknown): Option.Option<ModelReplyOutput> =>
  isWholeReply(output) ? Option.some(output) : decodeModelReplySlow(output)

/** A summary call's output; `None` when it is not one (a failed call's error). */
export const decodeSummary: (output: unknown) => Option.Option<SummaryOutput> = Schema.decodeUnknownOption(SummaryOutput)

/** An `agents.spawn` result; `None` when the spawn failed. */
export const decodeSpawn: (output: unknown) => Option.Option<SpawnOutput> = Schema.decodeUnknownOption(SpawnOutput)

/** An `agents.wait` result; `None` when the call failed. */
export const decodeWait: (output: unknown) => Option.Option<WaitOutput> = Schema.decodeUnknownOption(WaitOutput)

/** A failed call's output; `None` for any other output. */
export const decodeError: (output: unknown) => Option.Option<ErrorOutput> = Schema.decodeUnknownOption(ErrorOutput)
