/**
 * Leases (who may drive a session) and commits (fenced, atomic appends).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { CommitId, InputId, SessionId } from "./Ids.js"
import { Message } from "./Inbox.js"
import { RecordBody } from "./Record.js"

/** The right to drive one session until `expiresAt` (store clock, epoch ms). */
export class Lease extends Schema.Class<Lease>("troupe/Lease")({
  sessionId: SessionId,
  owner: Schema.String.pipe(Schema.minLength(1)),
  /** The fencing token: bumped on every acquisition. */
  epoch: Schema.Number,
  expiresAt: Schema.Number
}) {}

/** An atomic append to one session's log, fenced by a lease. */
export class Commit extends Schema.Class<Commit>("troupe/Commit")({
  commitId: CommitId,
  sessionId: SessionId,
  owner: Schema.String,
  epoch: Schema.Number,
  /** The head the writer last saw; anything else is a `SequenceConflict`. */
  expectedHeadSeq: Schema.Number,
  records: Schema.Array(RecordBody),
  /** Inbox items this commit consumes. */
  consumes: Schema.Array(InputId),
  /**
   * Messages this commit admits into the inbox and consumes at once (an idle
   * actor deciding a message handed to it in memory): each must be new to the
   * inbox, and no ready item may be left ahead of them, else `Conflict`.
   */
  admits: Schema.optional(Schema.Array(Message))
}) {}

/** What a commit wrote; replaying the same `commitId` returns the same receipt. */
export class CommitReceipt extends Schema.Class<CommitReceipt>("troupe/CommitReceipt")({
  commitId: CommitId,
  sessionId: SessionId,
  /** The seq of the first record written (headSeq + 1 when none were). */
  firstSeq: Schema.Number,
  headSeq: Schema.Number,
  at: Schema.Number
}) {}
