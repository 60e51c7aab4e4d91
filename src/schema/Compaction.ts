/**
 * Context compaction, as agents configure it and as the log records it.
 *
 * `CompactionSettings` say when a model request is too big (the model's
 * context window, less the output tokens kept for the reply and a buffer) and
 * how to shrink it: first old, long tool results are archived (micro), then
 * the older part of the conversation is summarized by the model (summary).
 * A `context_compacted` record holds what it replaced, so the conversation
 * folded from the log after a restart is the compacted one.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { OperationId, TurnId } from "./Ids.js"

const Count = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
const Positive = Schema.Number.pipe(Schema.int(), Schema.positive())

/**
 * When and how a session's context is compacted. Every field is optional and
 * resolves run → agent → default, field by field.
 */
export class CompactionSettings extends Schema.Class<CompactionSettings>("troupe/CompactionSettings")({
  /** `false` turns compaction off (default `true`). */
  enabled: Schema.optional(Schema.Boolean),
  /** The model's context window in tokens (default 128,000). */
  contextWindow: Schema.optional(Positive),
  /** Tokens kept free for the reply (default: the model settings' `maxOutputTokens`, else 8,192). */
  reservedOutputTokens: Schema.optional(Count),
  /** Tokens kept free besides (default 4,096): estimates are rough. */
  bufferTokens: Schema.optional(Count),
  /** A tool result longer than this many characters may be archived (default 2,000). */
  archiveMinChars: Schema.optional(Count),
  /** Tool results of the last this many model replies with tool calls are never archived (default 3, at least 1). */
  keepRecentCycles: Schema.optional(Positive),
  /** The last this many messages are never summarized (default 10; a cut inside a tool block moves left). */
  keepRecentMessages: Schema.optional(Positive),
  /** Characters of an archived result shown at its head and again at its tail (default 200 each). */
  excerptChars: Schema.optional(Count)
}) {}

/** How a compaction shrank the context. */
export const CompactionMode = Schema.Literal("micro", "summary")
/** @since 0.1.0 */
export type CompactionMode = typeof CompactionMode.Type

/** One tool result a micro-compaction archived: where it was, where its full text is, and what replaced it. */
export const ArchivedResult = Schema.Struct({
  /** Its position in the conversation when it was archived. */
  index: Count,
  /** The tool message's call id (checked when the record is folded). */
  callId: Schema.String,
  toolName: Schema.String,
  /** The artifact id: the tool call's operation, whose receipt holds the full text. */
  artifactId: OperationId,
  /** The turn of that operation, and the seq of its `operation_completed` record. */
  turnId: TurnId,
  seq: Count,
  /** Length of the full text in characters. */
  chars: Count,
  /** The compact marker the model sees instead. */
  marker: Schema.String
})
/** @since 0.1.0 */
export type ArchivedResult = typeof ArchivedResult.Type

/**
 * The conversation was compacted before a model call of `turnId`. It applies
 * to a conversation of `messagesBefore` messages (a record that does not fit
 * is ignored by the fold rather than misapplied):
 * - `micro`: each of `archived` replaces its tool message's content by its marker;
 * - `summary`: the first `replaced` messages give way to one user message, `summary`,
 *   written by the summary call `operationId`.
 * Token counts are the estimates of the next request before and after.
 */
export class ContextCompacted extends Schema.TaggedClass<ContextCompacted>("troupe/Record/ContextCompacted")(
  "context_compacted",
  {
    turnId: TurnId,
    mode: CompactionMode,
    messagesBefore: Count,
    tokensBefore: Count,
    tokensAfter: Count,
    archived: Schema.optional(Schema.Array(ArchivedResult)),
    replaced: Schema.optional(Count),
    summary: Schema.optional(Schema.String),
    operationId: Schema.optional(OperationId)
  }
) {}
