/**
 * PostgreSQL's append: a commit in ONE statement (one round trip) instead of a
 * transaction of eight. Data-modifying CTEs lock the session row, read the
 * clock after the lock, check the lease, the expected head, the commit id and
 * the inbox, and write the log, the inbox (the items consumed, and the
 * messages the commit admits), the receipts, the callbacks, the session row
 * and the commit receipt only when every check passed. A single statement in
 * autocommit is atomic and holds the row lock to its end.
 * See docs/decisions/0003-postgres-append.md. This is the third of the
 * store's ways to run SQL (docs/store.md, "three paths"), and the only one
 * that states the projection a second time: `headColumns` and
 * `projectionParts` name what it writes, and test/internal/PgAppend.test.ts holds them
 * and the patch to `project`.
 *
 * @since 0.1.0
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { Conflict, LeaseLost, SequenceConflict, SessionNotFound } from "../../../schema/Errors.js"
import type { SessionId, TurnId } from "../../../schema/Ids.js"
import { type Commit, CommitReceipt } from "../../../schema/Lease.js"
import { type RecordBody, toJsonText } from "../../../schema/Record.js"
import * as Trusted from "../../../schema/Trusted.js"
import { admitsRefusal } from "../../../services/SessionStore.js"
import { type Head, project, type Projection } from "../../../internal/LogProjection.js"
import { replayOf } from "../CommitSteps.js"
import type { AppendStrategy } from "../Dialect.js"
import { callbackColumns, callbackRow, encodeMessage, operationColumns, operationRow } from "../Rows.js"
import { type Named, statementName } from "./PgNamed.js"

/**
 * What a batch of records does to the head columns of whatever session row the
 * statement locks, as values SQL can apply without knowing the head in advance.
 * Derived from `project`, which stays the one definition of the semantics.
 */
export interface HeadPatch {
  /** The active turn after the batch, as a function of the one before it. */
  readonly activeTurn: {
    /** The result when no turn was active. */
    readonly ifNull: TurnId | null
    /** Active turns named by the batch whose result differs from `keep`/`otherwise` … */
    readonly from: ReadonlyArray<TurnId>
    /** … and their results, position by position. */
    readonly to: ReadonlyArray<TurnId | null>
    /** Any other active turn stays (else it becomes `otherwise`). */
    readonly keep: boolean
    readonly otherwise: TurnId | null
  }
  /** The title stays, or becomes `value`. */
  readonly title: { readonly keep: boolean; readonly value: string | null }
  /** The flag after the batch when it was false, and when it was true. */
  readonly archived: readonly [boolean, boolean]
  readonly closed: readonly [boolean, boolean]
  /** Added to `open_callbacks`, before the callbacks the batch really deleted are subtracted. */
  readonly openCallbacks: number
}

// Probe values no record can carry: ids are prefixed (`turn_…`) and PostgreSQL
// text cannot hold NUL, so no stored title equals them either. Two of each tell
// "left as it was" from "set to this value".
const turnProbes = ["\u0000turn-a" as TurnId, "\u0000turn-b" as TurnId] as const
const titleProbes = ["\u0000title-a", "\u0000title-b"] as const

const probeHead = (headSeq: number, i: 0 | 1, activeTurnId: TurnId | null = turnProbes[i]): Head => ({
  headSeq,
  activeTurnId,
  openCallbacks: i === 0 ? 0 : 7,
  title: titleProbes[i],
  archived: i === 1,
  closed: i === 1
})

const turnsNamed = (records: ReadonlyArray<RecordBody>): Array<TurnId> => {
  const out = new Set<TurnId>()
  for (const record of records) {
    const turnId = (record as { readonly turnId?: unknown }).turnId
    if (typeof turnId === "string") out.add(turnId as TurnId)
  }
  return [...out]
}

/**
 * Projects `records` (to be stored at `headSeq + 1 …`) over probe heads and
 * reads off the `HeadPatch`, plus the head-independent part of the projection
 * (operations and callbacks; their `openedAt` is a placeholder, the statement
 * uses its own clock). The projection's head is only meaningful for the probe.
 * `patch` is undefined when the probes disagree with the shape a patch can
 * express (which `project` as written never does): the caller then commits
 * the other way.
 */
export const headPatch = (
  sessionId: SessionId,
  headSeq: number,
  records: ReadonlyArray<RecordBody>
): { readonly patch: HeadPatch | undefined; readonly projection: Projection } => {
  const a = project(sessionId, probeHead(headSeq, 0), records, 0)
  const b = project(sessionId, probeHead(headSeq, 1), records, 0).head
  const keep = a.head.activeTurnId === turnProbes[0] && b.activeTurnId === turnProbes[1]
  const otherwise = keep ? null : a.head.activeTurnId
  const titleKept = a.head.title === titleProbes[0] && b.title === titleProbes[1]
  const expressible = a.head.headSeq === headSeq + records.length && b.headSeq === a.head.headSeq &&
    b.openCallbacks - 7 === a.head.openCallbacks && (keep || b.activeTurnId === otherwise) &&
    (titleKept || b.title === a.head.title)
  if (!expressible) return { patch: undefined, projection: a }
  const from: Array<TurnId> = []
  const to: Array<TurnId | null> = []
  // The batch can only single out the turns it names; every other turn fares like a probe.
  for (const turnId of turnsNamed(records)) {
    const result = project(sessionId, probeHead(headSeq, 0, turnId), records, 0).head.activeTurnId
    if (result !== (keep ? turnId : otherwise)) {
      from.push(turnId)
      to.push(result)
    }
  }
  return {
    patch: {
      activeTurn: {
        ifNull: project(sessionId, probeHead(headSeq, 0, null), records, 0).head.activeTurnId,
        from,
        to,
        keep,
        otherwise
      },
      title: { keep: titleKept, value: titleKept ? null : a.head.title },
      archived: [a.head.archived, b.archived],
      closed: [a.head.closed, b.closed],
      openCallbacks: a.head.openCallbacks
    },
    projection: a
  }
}

/** Applies a `HeadPatch` to a head the way the statement does (for tests: it must agree with `project`). */
export const applyPatch = (patch: HeadPatch, head: Head, records: number, closedCallbacks: number): Head => {
  const { activeTurnId } = head
  const i = activeTurnId === null ? -1 : patch.activeTurn.from.indexOf(activeTurnId)
  return {
    headSeq: head.headSeq + records,
    activeTurnId: activeTurnId === null
      ? patch.activeTurn.ifNull
      : i >= 0
      ? patch.activeTurn.to[i]!
      : patch.activeTurn.keep
      ? activeTurnId
      : patch.activeTurn.otherwise,
    openCallbacks: head.openCallbacks + patch.openCallbacks - closedCallbacks,
    title: patch.title.keep ? head.title : patch.title.value,
    archived: patch.archived[head.archived ? 1 : 0],
    closed: patch.closed[head.closed ? 1 : 0]
  }
}

/**
 * The session columns the statement's `head` update sets from each field of
 * `project`'s `Head`, and the parts of a `Projection` the statement writes.
 * A test holds them equal to what `project` returns and to the statement's
 * text, so a projection that grows a field or a part fails until this
 * statement writes it too (the random-batch test above holds the values).
 */
export const headColumns: { readonly [K in keyof Head]: string } = {
  headSeq: "head_seq",
  activeTurnId: "active_turn_id",
  openCallbacks: "open_callbacks",
  title: "title",
  archived: "archived",
  closed: "closed"
}

/** The parts of a `Projection` and the statement's parameters that carry them (`$n`). */
export const projectionParts: { readonly [K in keyof Projection]: ReadonlyArray<number> } = {
  head: [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23],
  operations: [8],
  callbacksOpened: [9],
  callbacksClosed: [10]
}

interface AppendRow {
  readonly head_seq: number | string
  readonly lease_owner: string | null
  readonly lease_epoch: number | string
  readonly lease_expires_at: number | string
  readonly now: number | string
  /** The locked row is the version the statement's snapshot sees (see `statement`). */
  readonly current: boolean
  /** The listed inputs that are ready, when not all are. */
  readonly ready: ReadonlyArray<string> | null
  /** Ready inbox items before the commit (of the locked row). */
  readonly ready_count: number | string
  /** The admitted inputs already in the inbox, when the statement wrote nothing. */
  readonly known: ReadonlyArray<string> | null
  readonly replay_session: string | null
  readonly replay_first: number | string | null
  readonly replay_head: number | string | null
  readonly replay_at: number | string | null
  readonly applied: boolean
}

const flag = (value: boolean) => (value ? 1 : 0)

/**
 * The statement. Written with `$n` placeholders (and no `?`, which the
 * statement runner would renumber).
 *
 * READ COMMITTED gives a statement one snapshot, taken before it waits for the
 * row lock; only the locked row itself is re-read at its newest version. So
 * when another writer changed the session while we waited, the snapshot's view
 * of the inbox, the callbacks and the commit receipts is stale. Every writer of
 * those tables updates the session row in the same transaction, so comparing
 * the locked row's `ctid` with the one the snapshot sees detects exactly that
 * case (`current`); the statement then writes nothing and is run again.
 * Otherwise nothing of this session changed between the snapshot and the lock,
 * and nothing can change until the statement ends.
 *
 * Admitted messages (`$24` ids, `$25` commands) are refused when a ready item
 * would be left ahead of them, when the inbox holds one of their ids (`known`,
 * consumed or not), and when an id is listed twice: checked here, not left to
 * the inbox's unique index, which would fail the statement instead.
 */
export const statement = (clock: string) =>
  `WITH s AS MATERIALIZED (
    SELECT ctid AS version, head_seq, active_turn_id, open_callbacks, title, archived, closed,
      lease_owner, lease_epoch, lease_expires_at, inbox_head, ready_count
    FROM troupe_sessions WHERE id = $1 FOR UPDATE
  ),
  h AS MATERIALIZED (
    SELECT s.*, ${clock} AS now, s.version = (SELECT ctid FROM troupe_sessions WHERE id = $1) AS current
    FROM s
  ),
  ready AS MATERIALIZED (
    SELECT u.input_id, (
      SELECT i.ctid FROM troupe_inbox i WHERE i.session_id = $1 AND i.input_id = u.input_id AND i.consumed = 0
    ) AS item
    FROM unnest($6::text[]) AS u(input_id)
  ),
  replay AS MATERIALIZED (
    SELECT session_id, first_seq, head_seq, at FROM troupe_commits WHERE commit_id = $2
  ),
  known AS MATERIALIZED (
    SELECT input_id FROM troupe_inbox WHERE session_id = $1 AND input_id = ANY($24::text[])
  ),
  ok AS MATERIALIZED (
    SELECT h.* FROM h
    WHERE h.current AND NOT EXISTS (SELECT 1 FROM replay)
      AND h.lease_owner = $3::text AND h.lease_epoch = $4::bigint AND h.lease_expires_at > h.now
      AND h.head_seq = $5::bigint
      AND (SELECT count(DISTINCT item) FROM ready) = cardinality($6::text[])
      AND (cardinality($24::text[]) = 0 OR (
        h.ready_count - cardinality($6::text[]) <= 0 AND NOT EXISTS (SELECT 1 FROM known)
        AND (SELECT count(DISTINCT id) FROM unnest($24::text[]) AS id) = cardinality($24::text[])
      ))
  ),
  consume AS (
    UPDATE troupe_inbox SET consumed = 1
    WHERE ctid = ANY (ARRAY(SELECT item FROM ready)) AND consumed = 0
      AND EXISTS (SELECT 1 FROM ok)
    RETURNING 1
  ),
  admitted AS (
    INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at, consumed)
    SELECT $1, ok.inbox_head + a.ord, a.input_id, a.command, ok.now, 1
    FROM ok, unnest($24::text[], $25::text[]) WITH ORDINALITY AS a(input_id, command, ord)
  ),
  log AS (
    INSERT INTO troupe_log (session_id, seq, at, commit_id, body)
    SELECT $1, ok.head_seq + r.ord, ok.now, $2, r.body
    FROM ok, unnest($7::text[]) WITH ORDINALITY AS r(body, ord)
  ),
  ops AS (
    INSERT INTO troupe_operations (${operationColumns.join(", ")})
    SELECT ${operationColumns.map((c) => `o.${c}`).join(", ")}
    FROM ok, json_to_recordset($8::json) AS o(operation_id text, session_id text, turn_id text, kind text,
      name text, status text, input text, output text, is_error integer, started_seq bigint, ended_seq bigint)
    ON CONFLICT (operation_id) DO UPDATE SET status = excluded.status, output = excluded.output,
      is_error = excluded.is_error, ended_seq = excluded.ended_seq
  ),
  opened AS (
    INSERT INTO troupe_callbacks (${callbackColumns.join(", ")})
    SELECT ${callbackColumns.map((c) => (c === "opened_at" ? "ok.now" : `c.${c}`)).join(", ")}
    FROM ok, json_to_recordset($9::json) AS c(callback_id text, session_id text, turn_id text, operation_id text,
      kind text, request text, opened_seq bigint)
  ),
  closed AS (
    DELETE FROM troupe_callbacks
    WHERE session_id = $1 AND callback_id = ANY($10::text[]) AND EXISTS (SELECT 1 FROM ok)
    RETURNING 1
  ),
  head AS (
    UPDATE troupe_sessions t SET
      head_seq = ok.head_seq + cardinality($7::text[]),
      active_turn_id = CASE
        WHEN ok.active_turn_id IS NULL THEN $11::text
        WHEN ok.active_turn_id = ANY($12::text[]) THEN ($13::text[])[array_position($12::text[], ok.active_turn_id)]
        WHEN $14::boolean THEN ok.active_turn_id
        ELSE $15::text END,
      open_callbacks = ok.open_callbacks + $16::integer - $17::integer - (SELECT count(*) FROM closed),
      title = CASE WHEN $18::boolean THEN ok.title ELSE $19::text END,
      archived = CASE WHEN ok.archived = 1 THEN $21::integer ELSE $20::integer END,
      closed = CASE WHEN ok.closed = 1 THEN $23::integer ELSE $22::integer END,
      ready_count = t.ready_count - (SELECT count(*) FROM consume),
      inbox_head = ok.inbox_head + cardinality($24::text[]),
      updated_at = ok.now
    FROM ok
    WHERE t.id = $1
  ),
  receipt AS (
    INSERT INTO troupe_commits (commit_id, session_id, first_seq, head_seq, at)
    SELECT $2, $1, ok.head_seq + 1, ok.head_seq + cardinality($7::text[]), ok.now FROM ok
  )
  SELECT h.head_seq, h.lease_owner, h.lease_epoch, h.lease_expires_at, h.now, h.current,
    CASE WHEN EXISTS (SELECT 1 FROM ok) THEN NULL
      ELSE (SELECT array_agg(input_id) FROM ready WHERE item IS NOT NULL) END AS ready,
    h.ready_count,
    CASE WHEN EXISTS (SELECT 1 FROM ok) THEN NULL ELSE (SELECT array_agg(input_id) FROM known) END AS known,
    r.session_id AS replay_session, r.first_seq AS replay_first, r.head_seq AS replay_head, r.at AS replay_at,
    EXISTS (SELECT 1 FROM ok) AS applied
  FROM h LEFT JOIN replay r ON true`

/** The statement's parameters for `commit`, or undefined when its batch is beyond a `HeadPatch`. */
export const params = (commit: Commit): Array<unknown> | undefined => {
  const { patch, projection } = headPatch(commit.sessionId, commit.expectedHeadSeq, commit.records)
  if (patch === undefined) return undefined
  // A callback the batch resolves and then opens again is inserted, then
  // deleted by the other stores (they open before they close): it ends closed
  // and its deletion counts. A statement cannot delete a row it inserts, so
  // here it is not inserted and its deletion is counted up front.
  let opened = projection.callbacksOpened
  let reopened = 0
  if (projection.callbacksClosed.length > 0 && opened.length > 0) {
    const closedIds = new Set<string>(projection.callbacksClosed)
    opened = opened.filter((c) => !closedIds.has(c.callbackId))
    reopened = projection.callbacksOpened.length - opened.length
  }
  const admits = commit.admits ?? []
  return [
    commit.sessionId,
    commit.commitId,
    commit.owner,
    commit.epoch,
    commit.expectedHeadSeq,
    commit.consumes,
    commit.records.map(toJsonText),
    JSON.stringify(projection.operations.map((change) => operationRow(commit.sessionId, change))),
    JSON.stringify(opened.map(callbackRow)),
    projection.callbacksClosed,
    patch.activeTurn.ifNull,
    patch.activeTurn.from,
    patch.activeTurn.to,
    patch.activeTurn.keep,
    patch.activeTurn.otherwise,
    patch.openCallbacks,
    reopened,
    patch.title.keep,
    patch.title.value,
    flag(patch.archived[0]),
    flag(patch.archived[1]),
    flag(patch.closed[0]),
    flag(patch.closed[1]),
    admits.map((message) => message.inputId),
    admits.map(encodeMessage)
  ]
}

/** Why the statement, on the current row `row`, refused the messages `commit` admits, if it did (the stores' one rule). */
const admitRefusal = (commit: Commit, row: AppendRow): Conflict | undefined => {
  const known = new Set<string>(row.known ?? [])
  return admitsRefusal(commit.admits ?? [], Number(row.ready_count) - commit.consumes.length, (id) => known.has(id))
}

/**
 * A commit in one statement. `clock` is the store clock's SQL text (epoch ms,
 * no parameters), evaluated once, after the lock; `execute` runs the statement
 * (default: the store's runner, unnamed). When another writer changed the
 * session between the statement's snapshot and its lock, the statement wrote
 * nothing and runs again with a fresh snapshot; after `attempts` (default 3)
 * such runs the store's transaction of several statements takes over.
 */
export const strategy = (
  clock: string,
  options: { readonly attempts?: number | undefined; readonly execute?: Named | undefined } = {}
): AppendStrategy =>
({ inTransaction, query }) => {
  const attempts = options.attempts ?? 3
  const sql = statement(clock)
  const name = statementName("append", sql)
  const execute = options.execute
  const run = (commit: Commit, values: ReadonlyArray<unknown>, attempt: number) =>
    Effect.flatMap(
      (execute === undefined ? query<AppendRow>(sql, values) : execute(name, sql, values)) as Effect.Effect<
        ReadonlyArray<AppendRow>,
        SqlError
      >,
      (rows): ReturnType<ReturnType<AppendStrategy>> => {
        if (rows.length === 0) return Effect.fail(new SessionNotFound({ sessionId: commit.sessionId }))
        const row = rows[0]!
        if (row.applied) {
          return Effect.succeed(
            Trusted.make(CommitReceipt, {
              commitId: commit.commitId,
              sessionId: commit.sessionId,
              firstSeq: commit.expectedHeadSeq + 1,
              headSeq: commit.expectedHeadSeq + commit.records.length,
              at: Number(row.now)
            })
          )
        }
        if (!row.current) return attempt < attempts ? run(commit, values, attempt + 1) : inTransaction(commit)
        // The row is current: no copy of this commit can have landed on this
        // session unseen (it would have changed the row), so this is final.
        if (row.replay_session !== null) return replayOf(commit, row)
        if (
          row.lease_owner !== commit.owner || Number(row.lease_epoch) !== commit.epoch ||
          Number(row.lease_expires_at) <= Number(row.now)
        ) {
          return Effect.fail(new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner }))
        }
        if (Number(row.head_seq) !== commit.expectedHeadSeq) {
          return Effect.fail(
            new SequenceConflict({
              sessionId: commit.sessionId,
              expected: commit.expectedHeadSeq,
              actual: Number(row.head_seq)
            })
          )
        }
        if (new Set(commit.consumes).size !== commit.consumes.length) {
          return Effect.fail(
            new Conflict({ entity: "input", key: commit.consumes[0]!, reason: "consumed twice in one commit" })
          )
        }
        const ready = new Set(row.ready ?? [])
        const missing = commit.consumes.find((id) => !ready.has(id))
        if (missing !== undefined) {
          return Effect.fail(new Conflict({ entity: "input", key: missing, reason: "not a ready inbox item" }))
        }
        const refused = admitRefusal(commit, row)
        if (refused !== undefined) return Effect.fail(refused)
        // Unreachable when the checks above mirror the statement's; never guess.
        return inTransaction(commit)
      }
    )
  return (commit) =>
    Effect.suspend(() => {
      const values = params(commit)
      return values === undefined ? inTransaction(commit) : run(commit, values, 1)
    })
}
