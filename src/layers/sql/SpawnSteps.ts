/**
 * The statements of a tree's writes: a spawn (the child, its first message
 * and the parent's fenced commit, all or nothing) and a further child turn.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import { Conflict, LeaseLost, SessionClosed, SessionNotFound, type SpawnRefused } from "../../schema/Errors.js"
import { type SessionId } from "../../schema/Ids.js"
import { Admission } from "../../schema/Inbox.js"
import { type Commit } from "../../schema/Lease.js"
import {
  aliasFor,
  childInput,
  childTurnRefusal,
  draft,
  printOf,
  spawnRecord,
  spawnRefusal,
  tenantOf
} from "../../internal/SessionDraft.js"
import { type AdmitChildTurn, type SpawnChild, type Spawned } from "../../services/SessionStore.js"
import * as SqlStatements from "./SqlStatements.js"
import { type AppendError, boundClock, type Clock } from "./Dialect.js"
import type { Step, Steps } from "./Steps.js"
import { encodeMessage, sessionColumns, sessionOf, type SessionRow } from "./Rows.js"
import { createdStep, insertSession } from "./CreateSteps.js"
import { earlierAdmission } from "./PushSteps.js"
import { commitSteps, replayOf } from "./CommitSteps.js"

const lockSessionText = SqlStatements.shaped((lockRow: string, clockText: string) =>
  `WITH s AS (
      SELECT ${sessionColumns}, lease_owner, lease_epoch, lease_expires_at, child_turns, inbox_head
      FROM troupe_sessions WHERE id = ? ${lockRow}
    )
    SELECT s.*, ${clockText} AS now FROM s`
)

/** The session row of `sessionId` locked, with its lease, path and the store clock, when it belongs to `tenant`. */
interface LockedRow extends SessionRow {
  readonly lease_owner: string | null
  readonly lease_epoch: number | string
  readonly lease_expires_at: number | string
  readonly child_turns: number | string
  readonly inbox_head: number | string
  readonly now: number | string
}

function* lockSession(sessionId: SessionId, clock: Clock, lockRow: string): Generator<Step, LockedRow | undefined, ReadonlyArray<never>> {
  const rows: ReadonlyArray<LockedRow> = yield {
    text: lockSessionText(lockRow, clock.text),
    params: [sessionId, ...clock.params]
  }
  return rows[0]
}

/** Locks the root row of a tree and reads its child-turn count (`root` when the locked row is the root itself). */
function* childTurnsOf(rootId: SessionId, locked: LockedRow, lockRow: string): Generator<Step, number, ReadonlyArray<never>> {
  if (locked.id === rootId) return Number(locked.child_turns)
  const rows: ReadonlyArray<{ child_turns: number | string }> = yield {
    text: `SELECT child_turns FROM troupe_sessions WHERE id = ? ${lockRow}`,
    params: [rootId]
  }
  return Number(rows[0]?.child_turns ?? 0)
}

const countChildTurn = (rootId: SessionId): Step => ({
  text: `UPDATE troupe_sessions SET child_turns = child_turns + 1 WHERE id = ?`,
  params: [rootId]
})

/** The statements of a spawn (see `SessionStore.spawn`): every check first, then every write, or a refusal. */
export function* spawnSteps(
  input: SpawnChild,
  childId: SessionId,
  clock: Clock,
  lockRow: string
): Steps<Spawned, SpawnRefused | AppendError | SessionClosed> {
  const commit = input.commit
  const print = encodeMessage(input.message)
  const replays: ReadonlyArray<{ session_id: string; first_seq: number | string; head_seq: number | string; at: number | string }> =
    yield {
      text: `SELECT session_id, first_seq, head_seq, at FROM troupe_commits WHERE commit_id = ?`,
      params: [commit.commitId]
    }
  if (replays.length > 0) {
    const r = replays[0]!
    const receipt = replayOf(commit, { replay_session: r.session_id, replay_first: r.first_seq, replay_head: r.head_seq, replay_at: r.at })
    if (Either.isLeft(receipt)) return Either.left(receipt.left)
    const children: ReadonlyArray<SessionRow> = yield {
      text: `SELECT ${sessionColumns} FROM troupe_sessions WHERE spawn_commit = ? AND parent_id = ?`,
      params: [commit.commitId, commit.sessionId]
    }
    if (children.length === 0) {
      return Either.left(new Conflict({ entity: "commit", key: commit.commitId, reason: "commitId already used by another commit" }))
    }
    const child = sessionOf(children[0]!)
    const admission = yield* earlierAdmission(child.id, input.message.inputId, print)
    if (admission === undefined || Either.isLeft(admission)) {
      return Either.left(new Conflict({ entity: "commit", key: commit.commitId, reason: "replayed with another first message" }))
    }
    return Either.right({ child, admission: admission.right, receipt: receipt.right, duplicate: true })
  }
  const row = yield* lockSession(commit.sessionId, clock, lockRow)
  if (row === undefined || row.tenant !== tenantOf(input.principal)) {
    return Either.left(new SessionNotFound({ sessionId: commit.sessionId }))
  }
  const at = Number(row.now)
  if (row.lease_owner !== commit.owner || Number(row.lease_epoch) !== commit.epoch || Number(row.lease_expires_at) <= at) {
    return Either.left(new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner }))
  }
  const parent = sessionOf(row)
  if (parent.status === "closed") return Either.left(new SessionClosed({ sessionId: parent.id }))
  const counted: ReadonlyArray<{ n: number | string }> = yield {
    text: `SELECT count(*) AS n FROM troupe_sessions WHERE parent_id = ?`,
    params: [parent.id]
  }
  const children = Number(counted[0]!.n)
  const childTurns = yield* childTurnsOf(parent.rootId, row, lockRow)
  const refusal = spawnRefusal(parent, input.agent.name, children, childTurns)
  if (refusal !== undefined) return Either.left(refusal)
  const aliasTaken = function*(alias: string): Generator<Step, boolean, ReadonlyArray<never>> {
    const taken: ReadonlyArray<unknown> = yield {
      text: `SELECT id FROM troupe_sessions WHERE parent_id = ? AND alias = ?`,
      params: [parent.id, alias]
    }
    return taken.length > 0
  }
  let alias = input.alias
  if (alias !== undefined) {
    if (yield* aliasTaken(alias)) return Either.left(new Conflict({ entity: "alias", key: alias, reason: "alias already taken" }))
  } else {
    let n = children + 1
    while (yield* aliasTaken(aliasFor(input.agent.name, n))) n++
    alias = aliasFor(input.agent.name, n)
  }
  const create = childInput(input, parent, childId, alias)
  const child = draft(childId, create, parent, at)
  const inserted: ReadonlyArray<unknown> = yield insertSession({
    session: child,
    tenant: row.tenant,
    path: `${row.path}${childId}/`,
    idempotencyKey: null,
    fingerprint: printOf(create),
    at: boundClock(at),
    spawnCommit: commit.commitId,
    inbox: 1
  })
  if (inserted.length === 0) return Either.left(new Conflict({ entity: "session", key: childId, reason: "session id already taken" }))
  yield createdStep(child, boundClock(at))
  yield {
    text: `INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at) VALUES (?, 1, ?, ?, ?)`,
    params: [childId, input.message.inputId, print, at]
  }
  yield countChildTurn(parent.rootId)
  // The parent's commit, fenced as any append: a refusal here rolls the child back with it.
  const receipt = yield* commitSteps(
    { ...commit, records: [spawnRecord(input, child), ...commit.records] } as Commit,
    clock,
    lockRow
  )
  if (Either.isLeft(receipt)) return Either.left(receipt.left)
  const admission = new Admission({ sessionId: childId, inputId: input.message.inputId, position: 1, duplicate: false }, true)
  return Either.right({ child, admission, receipt: receipt.right, duplicate: false })
}

/** The statements of a further child turn (see `SessionStore.admitChildTurn`). */
export function* childTurnSteps(
  input: AdmitChildTurn,
  clock: Clock,
  lockRow: string
): Steps<Admission, SpawnRefused | SessionNotFound | SessionClosed | Conflict> {
  const row = yield* lockSession(input.childId, clock, lockRow)
  if (row === undefined || row.tenant !== tenantOf(input.principal) || row.parent_id !== input.parentId) {
    return Either.left(new SessionNotFound({ sessionId: input.childId }))
  }
  const print = encodeMessage(input.message)
  const known = yield* earlierAdmission(input.childId, input.message.inputId, print)
  if (known !== undefined) return known
  const child = sessionOf(row)
  if (child.status === "closed") return Either.left(new SessionClosed({ sessionId: child.id }))
  const refusal = childTurnRefusal(child, yield* childTurnsOf(child.rootId, row, lockRow))
  if (refusal !== undefined) return Either.left(refusal)
  const position = Number(row.inbox_head) + 1
  yield {
    text: `INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at) VALUES (?, ?, ?, ?, ?)`,
    params: [child.id, position, input.message.inputId, print, Number(row.now)]
  }
  yield {
    text: `UPDATE troupe_sessions SET inbox_head = ?, ready_count = ready_count + 1 WHERE id = ?`,
    params: [position, child.id]
  }
  yield countChildTurn(child.rootId)
  return Either.right(new Admission({ sessionId: child.id, inputId: input.message.inputId, position, duplicate: false }, true))
}
