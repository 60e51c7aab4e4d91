/**
 * What subscribers of a session see: its durable log records (with their
 * cursor) and volatile deltas that are broadcast live only.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { Usage } from "./Budget.js"
import { SessionId, TurnId } from "./Ids.js"
import { LogRecord, RecordBody } from "./Record.js"
import { Session } from "./Session.js"

/** A durable event: one log record; `cursor` is its `seq`. */
export class Durable extends Schema.TaggedClass<Durable>("troupe/Event/Durable")("durable", {
  sessionId: SessionId,
  cursor: Schema.Number,
  at: Schema.Number,
  record: RecordBody
}) {
  /** The durable event of a stored record. */
  static fromRecord(record: LogRecord): Durable {
    return new Durable({ sessionId: record.sessionId, cursor: record.seq, at: record.at, record: record.body }, true)
  }
}

/** A fragment of assistant text while a model call streams; never stored. */
export class AssistantDelta extends Schema.TaggedClass<AssistantDelta>("troupe/Event/AssistantDelta")(
  "assistant_delta",
  {
    sessionId: SessionId,
    turnId: TurnId,
    text: Schema.String
  }
) {}

/** Any session event. */
export const SessionEvent = Schema.Union(Durable, AssistantDelta)
/** @since 0.1.0 */
export type SessionEvent = typeof SessionEvent.Type

/** A completed turn's result. */
export class TurnResult extends Schema.Class<TurnResult>("troupe/TurnResult")({
  sessionId: SessionId,
  turnId: TurnId,
  output: Schema.String,
  publicFinalMessage: Schema.String,
  usage: Usage
}) {}

/** What `send` did with a message. */
export class Accepted extends Schema.Class<Accepted>("troupe/Accepted")({
  sessionId: SessionId,
  inputId: Schema.String,
  /** `started`: it began `turnId`; `queued`: it waits for the running turn; `steered`: delivered to it; `admitted`: stored for a worker elsewhere. */
  disposition: Schema.Literal("started", "queued", "steered", "admitted"),
  turnId: Schema.optional(TurnId),
  /** For `started`: the cursor of the turn's `turn_started` event. */
  cursor: Schema.optional(Schema.Number)
}) {}

/** How an interrupt request ended. */
export class InterruptOutcome extends Schema.Class<InterruptOutcome>("troupe/InterruptOutcome")({
  sessionId: SessionId,
  turnId: TurnId,
  /**
   * `interrupted`: the turn was stopped; `already_ended`: it ended first (the
   * race is reported, nothing changes); `requested`: admitted for the worker
   * of another process that drives the session.
   */
  outcome: Schema.Literal("interrupted", "already_ended", "requested")
}) {}

/** A session with its cursor and pending work. */
export class Snapshot extends Schema.Class<Snapshot>("troupe/Snapshot")({
  session: Session,
  /** The cursor of the newest durable event. */
  cursor: Schema.Number,
  pendingInputs: Schema.Number,
  openCallbacks: Schema.Number
}) {}
