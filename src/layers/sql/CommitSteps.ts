/**
 * The statements of a commit: the lock and the fences (lease, expected head,
 * an earlier delivery), then the consumes, admits, log records, operations,
 * callbacks, the session row and the commit receipt, all or nothing.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import { Conflict, LeaseLost, SequenceConflict, SessionNotFound } from "../../schema/Errors.js"
import { type TurnId } from "../../schema/Ids.js"
import { type Message } from "../../schema/Inbox.js"
import { type Commit, CommitReceipt } from "../../schema/Lease.js"
import { toJsonText } from "../../schema/Record.js"
import * as Trusted from "../../schema/Trusted.js"
import { type Head, type Projection, project } from "../../internal/LogProjection.js"
import { admitsRefusal } from "../../services/SessionStore.js"
import * as SqlStatements from "./SqlStatements.js"
import type { AppendError, Clock } from "./Dialect.js"
import type { Step, Steps } from "./Steps.js"
import { callbackColumns, callbackRow, encodeMessage, operationColumns, operationRow } from "./Rows.js"

interface HeadRow {
  readonly head_seq: number | string
  readonly active_turn_id: string | null
  readonly open_callbacks: number | string
  readonly title: string | null
  readonly archived: number
  readonly closed: number
  readonly lease_owner: string | null
  readonly lease_epoch: number | string
  readonly lease_expires_at: number | string
  readonly inbox_head: number | string
  readonly ready_count: number | string
  readonly now: number | string
  readonly replay_session: string | null
  readonly replay_first: number | string | null
  readonly replay_head: number | string | null
  readonly replay_at: number | string | null
}

const hasDuplicates = (ids: ReadonlyArray<string>) => new Set(ids).size !== ids.length

/** The receipt of an earlier delivery of `commit`, or `Conflict` when another session used its id. */
export const replayOf = (
  commit: Commit,
  row: Pick<HeadRow, "replay_session" | "replay_first" | "replay_head" | "replay_at">
): Either.Either<CommitReceipt, Conflict> =>
  row.replay_session !== commit.sessionId
    ? Either.left(
      new Conflict({ entity: "commit", key: commit.commitId, reason: "commitId already used by another session" })
    )
    : Either.right(
      Trusted.make(CommitReceipt, {
        commitId: commit.commitId,
        sessionId: commit.sessionId,
        firstSeq: Number(row.replay_first),
        headSeq: Number(row.replay_head),
        at: Number(row.replay_at)
      })
    )

/** The statements of a commit. */
export type CommitSteps = Steps<CommitReceipt, AppendError>

/**
 * The statements that admit `admits` (a commit's messages, see `Commit.admits`) as consumed
 * inbox items after the session's last, on the row the commit locked and after its own
 * consumes: `Conflict` when a ready item would be left ahead of them or an input id is known.
 */
function* admitSteps(
  commit: Commit,
  admits: ReadonlyArray<Message>,
  row: HeadRow,
  at: number
): Generator<Step, Conflict | undefined, ReadonlyArray<never>> {
  const ready = Number(row.ready_count) - commit.consumes.length
  // Refused whatever the inbox knows when an item is ahead: then it is not read.
  const known: ReadonlyArray<{ input_id: string }> = ready > 0 ? [] : yield {
    text: knownInputsText(admits.length),
    params: [commit.sessionId, ...admits.map((message) => message.inputId)]
  }
  const knownIds = new Set(known.map((r) => r.input_id))
  const refused = admitsRefusal(admits, ready, (inputId) => knownIds.has(inputId))
  if (refused !== undefined) return refused
  const params: Array<unknown> = []
  admits.forEach((message, i) =>
    params.push(commit.sessionId, Number(row.inbox_head) + 1 + i, message.inputId, encodeMessage(message), at, 1)
  )
  yield {
    text: admitText(admits.length),
    params
  }
  return undefined
}

// The texts of a commit's statements, by shape (`SqlStatements.shaped`).
const commitHeadText = SqlStatements.shaped((lockRow: string, clockText: string) =>
  `WITH s AS (
      SELECT head_seq, active_turn_id, open_callbacks, title, archived, closed,
        lease_owner, lease_epoch, lease_expires_at, inbox_head, ready_count
      FROM troupe_sessions WHERE id = ? ${lockRow}
    )
    SELECT s.*, ${clockText} AS now, c.session_id AS replay_session, c.first_seq AS replay_first,
      c.head_seq AS replay_head, c.at AS replay_at
    FROM s LEFT JOIN troupe_commits c ON c.commit_id = ?`
)

const consumeText = SqlStatements.shaped((count: number) =>
  `UPDATE troupe_inbox SET consumed = 1
      WHERE session_id = ? AND consumed = 0 AND input_id IN (${SqlStatements.list(count)})
      RETURNING input_id`
)

const knownInputsText = SqlStatements.shaped((count: number) =>
  `SELECT input_id FROM troupe_inbox WHERE session_id = ? AND input_id IN (${SqlStatements.list(count)})`
)

const admitText = SqlStatements.shaped((count: number) =>
  `INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at, consumed)
    VALUES ${SqlStatements.rows(count, 6)}`
)

const logText = SqlStatements.shaped((count: number) =>
  `INSERT INTO troupe_log (session_id, seq, at, commit_id, body) VALUES ${SqlStatements.rows(count, 5)}`
)

const operationsText = SqlStatements.shaped((count: number) =>
  `INSERT INTO troupe_operations (operation_id, session_id, turn_id, kind, name, status, input, output,
        is_error, started_seq, ended_seq)
      VALUES ${SqlStatements.rows(count, 11)}
      ON CONFLICT (operation_id) DO UPDATE SET status = excluded.status, output = excluded.output,
        is_error = excluded.is_error, ended_seq = excluded.ended_seq`
)

const callbacksOpenedText = SqlStatements.shaped((count: number) =>
  `INSERT INTO troupe_callbacks (callback_id, session_id, turn_id, operation_id, kind, request,
        opened_seq, opened_at)
      VALUES ${SqlStatements.rows(count, 8)}`
)

const callbacksClosedText = SqlStatements.shaped((count: number) =>
  `DELETE FROM troupe_callbacks
      WHERE session_id = ? AND callback_id IN (${SqlStatements.list(count)})
      RETURNING callback_id`
)

/** The statements of `commit` with the store clock `clock`; `lockRow` locks the session row where the dialect needs it. */
export function* commitSteps(commit: Commit, clock: Clock, lockRow: string): CommitSteps {
  // Lock first, then read the clock and any earlier receipt of this commit.
  const rows: ReadonlyArray<HeadRow> = yield {
    text: commitHeadText(lockRow, clock.text),
    params: [commit.sessionId, ...clock.params, commit.commitId]
  }
  if (rows.length === 0) return Either.left(new SessionNotFound({ sessionId: commit.sessionId }))
  const row = rows[0]!
  if (row.replay_session !== null) return replayOf(commit, row)
  const at = Number(row.now)
  const headSeq = Number(row.head_seq)
  const fenced = row.lease_owner !== commit.owner || Number(row.lease_epoch) !== commit.epoch ||
    Number(row.lease_expires_at) <= at
  if (fenced || headSeq !== commit.expectedHeadSeq) {
    // A copy of this commit may have landed while we waited for the lock:
    // the join above read the commits table before the wait (READ COMMITTED).
    const again: ReadonlyArray<HeadRow> = yield {
      text: `SELECT session_id AS replay_session, first_seq AS replay_first, head_seq AS replay_head, at AS replay_at
      FROM troupe_commits WHERE commit_id = ?`,
      params: [commit.commitId]
    }
    if (again.length > 0) return replayOf(commit, again[0]!)
    if (fenced) return Either.left(new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner }))
    return Either.left(
      new SequenceConflict({ sessionId: commit.sessionId, expected: commit.expectedHeadSeq, actual: headSeq })
    )
  }
  if (hasDuplicates(commit.consumes)) {
    return Either.left(new Conflict({ entity: "input", key: commit.consumes[0]!, reason: "consumed twice in one commit" }))
  }
  if (commit.consumes.length > 0) {
    const consumed: ReadonlyArray<{ input_id: string }> = yield {
      text: consumeText(commit.consumes.length),
      params: [commit.sessionId, ...commit.consumes]
    }
    if (consumed.length !== commit.consumes.length) {
      const got = new Set(consumed.map((r) => r.input_id))
      const missing = commit.consumes.find((id) => !got.has(id)) ?? commit.consumes[0]!
      // A refusal rolls every write of this commit back.
      return Either.left(new Conflict({ entity: "input", key: missing, reason: "not a ready inbox item" }))
    }
  }
  const admits = commit.admits ?? []
  if (admits.length > 0) {
    const refused = yield* admitSteps(commit, admits, row, at)
    if (refused !== undefined) return Either.left(refused)
  }
  const projection = project(commit.sessionId, headOf(row, headSeq), commit.records, at)
  if (commit.records.length > 0) yield logStep(commit, headSeq, at)
  if (projection.operations.length > 0) yield operationsStep(commit, projection)
  if (projection.callbacksOpened.length > 0) yield callbacksOpenedStep(projection)
  const closedCallbacks = projection.callbacksClosed.length === 0 ? 0 : (yield callbacksClosedStep(commit, projection)).length
  yield sessionStep(commit, projection.head, closedCallbacks, admits.length, at)
  yield {
    text: `INSERT INTO troupe_commits (commit_id, session_id, first_seq, head_seq, at) VALUES (?, ?, ?, ?, ?)`,
    params: [commit.commitId, commit.sessionId, headSeq + 1, projection.head.headSeq, at]
  }
  return Either.right(
    Trusted.make(CommitReceipt, {
      commitId: commit.commitId,
      sessionId: commit.sessionId,
      firstSeq: headSeq + 1,
      headSeq: projection.head.headSeq,
      at
    })
  )
}

// The statements after the fences, built out of the generator: each of its yields saves and
// restores every live local, so the less it holds and inlines, the smaller its optimized code.

/** The columns of the locked row that the log determines, as `project` takes them. */
const headOf = (row: HeadRow, headSeq: number): Head => ({
  headSeq,
  activeTurnId: row.active_turn_id as TurnId | null,
  openCallbacks: Number(row.open_callbacks),
  title: row.title,
  archived: Number(row.archived) === 1,
  closed: Number(row.closed) === 1
})

const logStep = (commit: Commit, headSeq: number, at: number): Step => {
  const records = commit.records
  const params: Array<unknown> = []
  for (let i = 0; i < records.length; i++) {
    params.push(commit.sessionId, headSeq + 1 + i, at, commit.commitId, toJsonText(records[i]!))
  }
  return { text: logText(records.length), params }
}

/** The parameters of a multi-row insert: each item's row, its `columns` in order. */
const rowParams = <T, K extends string>(
  items: ReadonlyArray<T>,
  rowOf: (item: T) => Readonly<Record<K, unknown>>,
  columns: ReadonlyArray<K>
): Array<unknown> => {
  // Indexed loops: a `for…of` compiles to the iterator protocol inside a try/finally.
  const params: Array<unknown> = []
  for (let i = 0; i < items.length; i++) {
    const row = rowOf(items[i]!)
    for (let c = 0; c < columns.length; c++) params.push(row[columns[c]!])
  }
  return params
}

const operationsStep = (commit: Commit, projection: Projection): Step => ({
  text: operationsText(projection.operations.length),
  params: rowParams(projection.operations, (change) => operationRow(commit.sessionId, change), operationColumns)
})

const callbacksOpenedStep = (projection: Projection): Step => ({
  text: callbacksOpenedText(projection.callbacksOpened.length),
  params: rowParams(projection.callbacksOpened, callbackRow, callbackColumns)
})

const callbacksClosedStep = (commit: Commit, projection: Projection): Step => ({
  text: callbacksClosedText(projection.callbacksClosed.length),
  params: [commit.sessionId, ...projection.callbacksClosed]
})

/** The session row after the commit: `closedCallbacks` of its closed callbacks were open. */
const sessionStep = (commit: Commit, head: Head, closedCallbacks: number, admitted: number, at: number): Step => ({
  text: `UPDATE troupe_sessions SET head_seq = ?, active_turn_id = ?, open_callbacks = ?, title = ?,
      archived = ?, closed = ?, ready_count = ready_count - ?, inbox_head = inbox_head + ?, updated_at = ?
    WHERE id = ?`,
  params: [
    head.headSeq,
    head.activeTurnId,
    head.openCallbacks - closedCallbacks,
    head.title,
    head.archived ? 1 : 0,
    head.closed ? 1 : 0,
    commit.consumes.length,
    admitted,
    at,
    commit.sessionId
  ]
})
