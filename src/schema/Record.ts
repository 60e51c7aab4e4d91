/**
 * The append-only log: every durable step of a session is a record with a
 * gap-free `seq`. Clients replay records from any cursor (a `seq`).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { BudgetDimension, Usage } from "./Budget.js"
import { ApprovalRequest, CallbackKind, CallbackRequest, CallbackResolution, ClientToolRequest } from "./Callback.js"
import { ContextCompacted } from "./Compaction.js"
import { CallbackId, CommitId, InputId, OperationId, SessionId, TurnId } from "./Ids.js"
import { Json } from "./Json.js"
import { ModelCallInput, OperationInput, OperationKind, ToolCallInput } from "./Operation.js"
import * as Run from "./Run.js"
import { RunOptions } from "./Run.js"
import * as Trusted from "./Trusted.js"
import { FailureCode, TurnOutcome } from "./Turn.js"

/** The session came into being (always seq 1). */
export class SessionCreated extends Schema.TaggedClass<SessionCreated>("troupe/Record/SessionCreated")(
  "session_created",
  {
    agentName: Schema.String,
    parentId: Schema.NullOr(SessionId),
    title: Schema.NullOr(Schema.String)
  }
) {}

/** A turn began, started by a message. */
export class TurnStarted extends Schema.TaggedClass<TurnStarted>("troupe/Record/TurnStarted")("turn_started", {
  turnId: TurnId,
  inputId: InputId,
  text: Schema.String,
  /** The message's per-run overrides, if it had any. */
  run: Schema.optional(RunOptions),
  /** Product events of this turn are excluded from analytics (the sender asked so). */
  excludeFromAnalytics: Schema.optional(Schema.Boolean)
}) {}

/** Why a turn failed, beside its `failureCode`: the fields a caller needs. */
export const TurnFailure = Schema.Union(
  Schema.TaggedStruct("BudgetExhausted", {
    dimension: BudgetDimension,
    limit: Schema.Number,
    observed: Schema.Number,
    toolName: Schema.optional(Schema.String)
  }),
  Schema.TaggedStruct("MaxCycles", { maxCycles: Schema.Number }),
  Schema.TaggedStruct("ModelError", { reason: Schema.String, retryable: Schema.Boolean }),
  Schema.TaggedStruct("MaxHandoffs", { maxHandoffs: Schema.Number, agentName: Schema.String }),
  Schema.TaggedStruct("GuardrailBlocked", { guardrail: Schema.String, stage: Schema.Literal("input", "output"), reason: Schema.String }),
  Schema.TaggedStruct("InvalidOutput", { problems: Schema.String, attempts: Schema.Number })
)
/** @since 0.1.0 */
export type TurnFailure = typeof TurnFailure.Type

/** A turn ended; `failureCode` and `failure` are set when it failed. */
export class TurnEnded extends Schema.TaggedClass<TurnEnded>("troupe/Record/TurnEnded")("turn_ended", {
  turnId: TurnId,
  outcome: TurnOutcome,
  output: Schema.optional(Schema.String),
  publicFinalMessage: Schema.optional(Schema.String),
  failureCode: Schema.optional(FailureCode),
  failure: Schema.optional(TurnFailure),
  reason: Schema.optional(Schema.String),
  usage: Usage
}) {}

/** The kinds of inbox command, as `input_applied` names them. */
export const InputKind = Schema.Literal("message", "steer", "interrupt", "callback_answer", "child_result", "control")
/** @since 0.1.0 */
export type InputKind = typeof InputKind.Type

/** A steer's text, delivered to the running turn at its next model call. */
export const SteerDetail = Schema.Struct({ text: Schema.String })
/** What an interrupt found: the turn it stopped, one that had already ended, or another turn. */
export const InterruptDetail = Schema.Struct({ outcome: Schema.Literal("interrupted", "already_ended", "turn_mismatch") })
/** A callback answer refused as stale, and why. */
export const StaleAnswerDetail = Schema.Struct({
  callbackId: CallbackId,
  stale: Schema.Literal("not_open", "answered", "cancelled", "mismatch")
})
/** A message refused because a turn was running under the `reject` busy policy. */
export const RejectedDetail = Schema.Struct({ rejected: Schema.Literal("busy") })
/** A command admitted just before the session closed: recorded, never acted on. */
export const IgnoredDetail = Schema.Struct({ ignored: Schema.String })

/** What an `input_applied` record says about its command, by kind (see each detail schema). */
export const InputDetail = Schema.Union(SteerDetail, InterruptDetail, StaleAnswerDetail, RejectedDetail, IgnoredDetail)
/** @since 0.1.0 */
export type InputDetail = typeof InputDetail.Type

/** An inbox command other than a turn-starting message took effect. */
export class InputApplied extends Schema.TaggedClass<InputApplied>("troupe/Record/InputApplied")("input_applied", {
  inputId: InputId,
  kind: InputKind,
  turnId: Schema.optional(TurnId),
  detail: Schema.optional(InputDetail)
}) {}



export { ContextCompacted, ModelCallInput, ToolCallInput }

/** A model or tool call began. */
export class OperationStarted extends Schema.TaggedClass<OperationStarted>("troupe/Record/OperationStarted")(
  "operation_started",
  {
    operationId: OperationId,
    turnId: TurnId,
    kind: OperationKind,
    name: Schema.String,
    input: OperationInput
  }
) {}

/** A model or tool call finished; its output is the retained receipt. */
export class OperationCompleted extends Schema.TaggedClass<OperationCompleted>(
  "troupe/Record/OperationCompleted"
)("operation_completed", {
  operationId: OperationId,
  turnId: TurnId,
  output: Json,
  isError: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {}

/** A started operation's outcome is unknown (it was cut off by a crash). */
export class OperationUnknown extends Schema.TaggedClass<OperationUnknown>("troupe/Record/OperationUnknown")(
  "operation_unknown",
  {
    operationId: OperationId,
    turnId: TurnId
  }
) {}

/** A callback was opened for an operation. */
export class CallbackOpened extends Schema.TaggedClass<CallbackOpened>("troupe/Record/CallbackOpened")(
  "callback_opened",
  {
    callbackId: CallbackId,
    turnId: TurnId,
    operationId: OperationId,
    kind: CallbackKind,
    request: CallbackRequest,
    /** When an unanswered approval expires (epoch ms): in the log, so a restarted actor expires it at the same moment. */
    expiresAt: Schema.optional(Schema.Number)
  }
) {}

/** A callback was closed. */
export class CallbackResolved extends Schema.TaggedClass<CallbackResolved>("troupe/Record/CallbackResolved")(
  "callback_resolved",
  {
    callbackId: CallbackId,
    turnId: TurnId,
    resolution: CallbackResolution,
    result: Schema.optional(Json)
  }
) {}

/**
 * Control of the turn moved from agent `from` to agent `to` (a
 * `transfer_to_<to>` call, `operationId`, of `from`'s model). The target's
 * definition is embedded in the session's agent, so a resumed turn hands off
 * again as it replays its receipts.
 */
export class HandoffRecorded extends Schema.TaggedClass<HandoffRecorded>("troupe/Record/Handoff")("handoff", {
  turnId: TurnId,
  operationId: OperationId,
  from: Schema.String,
  to: Schema.String,
  reason: Schema.optional(Schema.String)
}) {}

/** A guardrail of the turn checked its message (`input`) or its final output (`output`). */
export class GuardrailChecked extends Schema.TaggedClass<GuardrailChecked>("troupe/Record/GuardrailChecked")(
  "guardrail_checked",
  {
    turnId: TurnId,
    stage: Schema.Literal("input", "output"),
    guardrail: Schema.String,
    allowed: Schema.Boolean,
    reason: Schema.optional(Schema.String)
  }
) {}

/**
 * A final output that did not match the agent's output schema, sent back to
 * the model (after the reply of `operationId`) with the problems found.
 */
export class OutputRejected extends Schema.TaggedClass<OutputRejected>("troupe/Record/OutputRejected")(
  "output_rejected",
  {
    turnId: TurnId,
    operationId: OperationId,
    attempt: Schema.Number,
    problems: Schema.String
  }
) {}

/** A child session was spawned. */
export class ChildSpawned extends Schema.TaggedClass<ChildSpawned>("troupe/Record/ChildSpawned")("child_spawned", {
  childSessionId: SessionId,
  agentName: Schema.String,
  alias: Schema.NullOr(Schema.String),
  turnId: Schema.optional(TurnId),
  operationId: Schema.optional(OperationId)
}) {}

/** A child session's turn ended and its result reached this session. */
export class ChildResultRecorded extends Schema.TaggedClass<ChildResultRecorded>("troupe/Record/ChildResult")(
  "child_result",
  {
    childSessionId: SessionId,
    turnId: TurnId,
    outcome: TurnOutcome,
    output: Schema.optional(Schema.String),
    publicFinalMessage: Schema.optional(Schema.String),
    failureCode: Schema.optional(FailureCode),
    reason: Schema.optional(Schema.String),
    usage: Schema.optional(Usage)
  }
) {}

/**
 * The turn parked in `agents.wait` for its children's results (`parked:
 * true`), or stopped waiting there (`parked: false`: the wait returned, or the
 * turn was interrupted while parked). While parked, the session's status is
 * `waiting`, as while a callback is open.
 */
export class ChildrenAwaited extends Schema.TaggedClass<ChildrenAwaited>("troupe/Record/ChildrenAwaited")(
  "children_awaited",
  {
    turnId: TurnId,
    parked: Schema.Boolean
  }
) {}

/** The session was renamed. */
export class Renamed extends Schema.TaggedClass<Renamed>("troupe/Record/Renamed")("renamed", {
  title: Schema.String
}) {}

/** The session was archived or unarchived. */
export class Archived extends Schema.TaggedClass<Archived>("troupe/Record/Archived")("archived", {
  archived: Schema.Boolean
}) {}

/** The session was closed; it accepts nothing more. */
export class Closed extends Schema.TaggedClass<Closed>("troupe/Record/Closed")("closed", {
  reason: Schema.optional(Schema.String)
}) {}

/** The body of any log record. */
export const RecordBody = Schema.Union(
  SessionCreated,
  TurnStarted,
  TurnEnded,
  InputApplied,
  OperationStarted,
  OperationCompleted,
  OperationUnknown,
  CallbackOpened,
  CallbackResolved,
  ChildSpawned,
  ChildResultRecorded,
  ChildrenAwaited,
  Renamed,
  Archived,
  Closed,
  ContextCompacted,
  HandoffRecorded,
  GuardrailChecked,
  OutputRejected
)
/** @since 0.1.0 */
export type RecordBody = typeof RecordBody.Type

/** One entry of a session's log. */
export class LogRecord extends Schema.Class<LogRecord>("troupe/LogRecord")({
  sessionId: SessionId,
  seq: Schema.Number,
  at: Schema.Number,
  commitId: CommitId,
  body: RecordBody
}) {}

/** One page of log records after a cursor. */
export class LogPage extends Schema.Class<LogPage>("troupe/LogPage")({
  records: Schema.Array(LogRecord),
  /** The seq of the last record returned (the cursor to resume from). */
  cursor: Schema.Number,
  /** True when more records follow `cursor`. */
  more: Schema.Boolean
}) {}

/**
 * The stored JSON text of a record body. Every record schema is plain JSON
 * (no dates, bigints or other transformations), so a body's own fields are its
 * encoded form and `JSON.stringify` is the encoder; this skips a schema walk
 * on the hot append path. test/schema.test.ts holds every record type to
 * `Schema.encode` so a schema that stops being plain fails there.
 */
export const toJsonText = (body: RecordBody): string => JSON.stringify(body)

const revivers: { readonly [K in RecordBody["_tag"]]: (json: any) => RecordBody } = {
  session_created: (json) => new SessionCreated(json, true),
  turn_started: (json) => new TurnStarted(json.run === undefined ? json : { ...json, run: Run.fromJson(json.run) }, true),
  turn_ended: (json) => new TurnEnded({ ...json, usage: Trusted.make(Usage, json.usage) }, true),
  input_applied: (json) => new InputApplied(json, true),
  operation_started: (json) => new OperationStarted(json, true),
  operation_completed: (json) => new OperationCompleted(json, true),
  operation_unknown: (json) => new OperationUnknown(json, true),
  callback_opened: (json) =>
    new CallbackOpened({
      ...json,
      request: json.request?._tag === "approval"
        ? new ApprovalRequest(json.request, true)
        : new ClientToolRequest(json.request, true)
    }, true),
  callback_resolved: (json) => new CallbackResolved(json, true),
  child_spawned: (json) => new ChildSpawned(json, true),
  child_result: (json) =>
    new ChildResultRecorded(json.usage === undefined ? json : { ...json, usage: Trusted.make(Usage, json.usage) }, true),
  children_awaited: (json) => new ChildrenAwaited(json, true),
  renamed: (json) => new Renamed(json, true),
  archived: (json) => new Archived(json, true),
  closed: (json) => new Closed(json, true),
  context_compacted: (json) => new ContextCompacted(json, true),
  handoff: (json) => new HandoffRecorded(json, true),
  guardrail_checked: (json) => new GuardrailChecked(json, true),
  output_rejected: (json) => new OutputRejected(json, true)
}

const decodeBody = Schema.decodeUnknownSync(RecordBody)

/**
 * A record body from the JSON text `toJsonText` stored. Stored records were
 * validated when they were built, so they are revived without a second schema
 * walk (replay is the hot read path); text of an unknown tag goes through the
 * full schema decoder and fails with its `ParseError`. test/schema.test.ts holds
 * every tag's reviver equal to `Schema.decode`.
 */
export const fromJsonText = (text: string): RecordBody => {
  const json = JSON.parse(text)
  const revive = revivers[json?._tag as RecordBody["_tag"]]
  return revive === undefined ? decodeBody(json) : revive(json)
}
