/**
 * Commands admitted durably through a session's inbox before they are acted on.
 * Each carries its `inputId`: the same id with the same content is a no-op,
 * with other content a `Conflict`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { CallbackId, InputId, OperationId, SessionId, TurnId } from "./Ids.js"
import { Json } from "./Json.js"
import { RunOptions } from "./Run.js"
import { Usage } from "./Budget.js"
import { FailureCode, TurnOutcome } from "./Turn.js"

/** A user (or program) message that starts a turn. */
export class Message extends Schema.TaggedClass<Message>("troupe/Inbox/Message")("message", {
  inputId: InputId,
  text: Schema.String,
  source: Schema.optional(Schema.String),
  /** Overrides for the turn this message starts. */
  run: Schema.optional(RunOptions),
  /** The sender asked that product events the turn causes be excluded from analytics. */
  excludeFromAnalytics: Schema.optional(Schema.Boolean)
}) {}

/** A message for the running turn, delivered at its next model call. */
export class Steer extends Schema.TaggedClass<Steer>("troupe/Inbox/Steer")("steer", {
  inputId: InputId,
  text: Schema.String,
  source: Schema.optional(Schema.String)
}) {}

/** A request to interrupt exactly one turn. */
export class Interrupt extends Schema.TaggedClass<Interrupt>("troupe/Inbox/Interrupt")("interrupt", {
  inputId: InputId,
  expectedTurnId: TurnId,
  reason: Schema.optional(Schema.String)
}) {}

/** An answer to an open callback. */
export class CallbackAnswer extends Schema.TaggedClass<CallbackAnswer>("troupe/Inbox/CallbackAnswer")(
  "callback_answer",
  {
    inputId: InputId,
    callbackId: CallbackId,
    turnId: TurnId,
    operationId: OperationId,
    result: Json,
    /** The turn's own answer at the approval's deadline: it closes the callback as `expired`, if it is admitted first. */
    expired: Schema.optional(Schema.Boolean)
  }
) {}

/** The result of a child session's turn, delivered to its parent. */
export class ChildResult extends Schema.TaggedClass<ChildResult>("troupe/Inbox/ChildResult")("child_result", {
  /** Derived from the child's turn id (`childResultInputId`), so a redelivery is a no-op. */
  inputId: InputId,
  childSessionId: SessionId,
  turnId: TurnId,
  outcome: TurnOutcome,
  output: Schema.optional(Schema.String),
  publicFinalMessage: Schema.optional(Schema.String),
  failureCode: Schema.optional(FailureCode),
  /** Why the turn was interrupted, when it was. */
  reason: Schema.optional(Schema.String),
  usage: Schema.optional(Usage)
}) {}

/** The inbox id of the result of a child's turn: one per turn, whoever delivers it and how often. */
export const childResultInputId = (turnId: TurnId): InputId => `child-result:${turnId}` as InputId

/** An administrative change: rename, archive or close. */
export const ControlAction = Schema.Union(
  Schema.TaggedStruct("rename", { title: Schema.String }),
  Schema.TaggedStruct("archive", { archived: Schema.Boolean }),
  Schema.TaggedStruct("close", {})
)
/** @since 0.1.0 */
export type ControlAction = typeof ControlAction.Type

/** An administrative command. */
export class Control extends Schema.TaggedClass<Control>("troupe/Inbox/Control")("control", {
  inputId: InputId,
  action: ControlAction
}) {}

/** Any inbox command. */
export const Command = Schema.Union(Message, Steer, Interrupt, CallbackAnswer, ChildResult, Control)
/** @since 0.1.0 */
export type Command = typeof Command.Type

/** A command as stored in the inbox, with its position and admission time. */
export class InboxItem extends Schema.Class<InboxItem>("troupe/InboxItem")({
  sessionId: SessionId,
  /** Position in this session's inbox, gap-free from 1. */
  position: Schema.Number,
  receivedAt: Schema.Number,
  command: Command
}) {}

/** What admitting a command did. */
export class Admission extends Schema.Class<Admission>("troupe/Admission")({
  sessionId: SessionId,
  inputId: InputId,
  position: Schema.Number,
  /** True when this `inputId` was already admitted with the same content. */
  duplicate: Schema.Boolean
}) {}
