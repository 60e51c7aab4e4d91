/**
 * The `SessionStore` on `@effect/sql`'s abstract `SqlClient`, shared by the
 * SQLite and PostgreSQL layers. What differs between them is a small
 * `Dialect`: how a write transaction starts, how the session row is locked, and
 * whose clock leases run on.
 *
 * Every mutation locks the session row first, reads the clock after the lock,
 * checks the lease epoch and the expected head, then writes.
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Option, Schedule, Schema } from "effect"
import { Agent } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import { OpenCallback } from "../schema/Callback.js"
import {
  Conflict,
  InvalidInput,
  LeaseLost,
  SequenceConflict,
  SessionClosed,
  SessionNotFound,
  type SpawnRefused,
  StaleCallback,
  StoreUnavailable
} from "../schema/Errors.js"
import { type CommitId, type InputId, makeSessionId, type OperationId, type SessionId, type TurnId } from "../schema/Ids.js"
import { Admission, type CallbackAnswer, Command, InboxItem, type Message } from "../schema/Inbox.js"
import { canonical } from "../schema/Json.js"
import { type Commit, CommitReceipt, Lease } from "../schema/Lease.js"
import { OperationReceipt } from "../schema/Operation.js"
import { SubagentPolicy } from "../schema/Policy.js"
import { Principal } from "../schema/Principal.js"
import { fromJsonText, LogPage, LogRecord, toJsonText } from "../schema/Record.js"
import { ChildEntry, ChildPage, maxTreeNodes, Session, SessionPage, SessionTree, TreeNode } from "../schema/Session.js"
import * as Trusted from "../schema/Trusted.js"
import * as ListCursor from "../internal/ListCursor.js"
import { type OperationChange, project, statusOf } from "../internal/LogProjection.js"
import {
  agentJson,
  aliasFor,
  childInput,
  childTurnRefusal,
  createdRecord,
  draft,
  printOf,
  spawnRecord,
  spawnRefusal,
  tenantOf
} from "../internal/SessionDraft.js"
import {
  type ActorStart,
  type AdmitChildTurn,
  admitsRefusal,
  answerRefusal,
  closedReason,
  type CreateSession,
  type ListSessions,
  type MetadataPatch,
  type PageRequest,
  type Pushable,
  SessionStore,
  type SpawnChild,
  type Spawned,
  type StartLimits
} from "../services/SessionStore.js"
import * as Migrations from "./SessionStoreMigrations.js"
import * as SqlStatements from "../internal/SqlStatements.js"

/** What differs between SQL databases. */
export interface Dialect {
  readonly placeholders: SqlStatements.Placeholders
  /** The store clock (epoch ms) as SQL text and the parameters that text takes. */
  readonly clock: Effect.Effect<Clock>
  /** Appended to the query that reads the session row inside a write transaction. */
  readonly lockRow: string
  /** Runs `effect` in a write transaction that serialises with every other writer. */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** Runs one statement outside a transaction (default: on a connection reserved for it). */
  readonly outside?: SqlStatements.Executor | undefined
  /** Commits another way than the default transaction of several statements (PostgreSQL: one statement). */
  readonly append?: AppendStrategy | undefined
  /** Admits a plain push another way than the default transaction of several statements (PostgreSQL: one statement). */
  readonly push?: PushStrategy | undefined
  /**
   * Runs the statements of a write transaction (`Steps`) its own way, giving
   * them the store clock (SQLite: all at once, synchronously). By default each
   * statement is one Effect inside `transaction`. `session` names the session
   * the transaction writes (SQLite groups several sessions' transactions).
   */
  readonly transact?:
    | (<A, E>(steps: (clock: Clock) => Steps<A, E>, session: string | undefined) => Effect.Effect<A, E | SqlError>)
    | undefined
}

/** What `append` fails with besides the driver's `SqlError`. */
export type AppendError = SessionNotFound | Conflict | LeaseLost | SequenceConflict

/** An `append` of `commit`: every check, write and projection of a commit, all or nothing. */
export type Append = (commit: Commit) => Effect.Effect<CommitReceipt, AppendError | SqlError>

/**
 * A dialect's own way to commit, given the store's statement runner and its
 * default append (one transaction of several statements), to fall back on.
 */
export type AppendStrategy = (store: {
  readonly query: SqlStatements.Statements["query"]
  readonly inTransaction: Append
}) => Append

/** A plain push (not an answer) of the command `inputId` whose canonical JSON is `print`. */
export type Push = (
  sessionId: SessionId,
  inputId: InputId,
  print: string
) => Effect.Effect<Admission, SessionNotFound | Conflict | SessionClosed | SqlError>

/** A dialect's own push, given the store's push (one transaction of `pushSteps`) to fall back on. */
export type PushStrategy = (inTransaction: Push) => Push

/** The store clock in a statement: `text` where it goes, `params` it binds. */
export interface Clock {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}

interface SessionRow {
  readonly id: string
  readonly principal: string
  readonly agent: string
  readonly parent_id: string | null
  readonly root_id: string
  readonly path: string
  readonly agent_path: string
  readonly alias: string | null
  readonly title: string | null
  readonly archived: number
  readonly closed: number
  readonly active_turn_id: string | null
  readonly open_callbacks: number
  readonly busy_policy: string
  readonly budgets: string | null
  readonly subagent_policy: string | null
  readonly metadata: string
  readonly fingerprint: string
  readonly head_seq: number | string
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly tenant: string
}

const decodeOperation = Schema.decodeUnknown(OperationReceipt)
const decodeCallback = Schema.decodeUnknown(OpenCallback)
const decodeCommand = Schema.decodeUnknownSync(Command)
const encodeCommand = Schema.encodeSync(Command)
const encodePrincipal = Schema.encodeSync(Principal)
const encodeBudgets = Schema.encodeSync(Budgets)
const encodePolicy = Schema.encodeSync(SubagentPolicy)

const json = (text: string | null): unknown => (text === null ? undefined : JSON.parse(text))
const jsonOrNull = (value: unknown): string | null => (value === undefined ? null : JSON.stringify(value))

const sessionColumns = `id, principal, agent, parent_id, root_id, path, agent_path, alias, title, archived, closed,
  active_turn_id, open_callbacks, busy_policy, budgets, subagent_policy, metadata, fingerprint, head_seq,
  created_at, updated_at, tenant`

/** Sessions looked up by one `withPendingInbox` statement. */
const pendingChunk = 500

/** Leases renewed by one statement (three parameters each). */
const renewChunk = 200

/** Maps a driver failure to `StoreUnavailable`, keeping the driver error as the cause. */
const unavailable = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E | SqlError, R>) =>
  Effect.catchIf(
    effect,
    (error): error is SqlError => (error as { _tag?: string })?._tag === "SqlError",
    (cause) => Effect.fail(new StoreUnavailable({ operation, cause }))
  ) as Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable, R>

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

interface OperationRow {
  readonly operation_id: string
  readonly turn_id: string
  readonly kind: string
  readonly name: string
  readonly status: string
  readonly input: string | null
  readonly output: string | null
  readonly is_error: number
  readonly started_seq: number | string
  readonly ended_seq: number | string | null
}

interface CallbackRow {
  readonly callback_id: string
  readonly turn_id: string
  readonly operation_id: string
  readonly kind: string
  readonly request: string
  readonly opened_seq: number | string
  readonly opened_at: number | string
}

/**
 * Decodes JSON column text through `schema`, remembering recent results:
 * sessions of one agent share its frozen definition, and decoding an `Agent`
 * is the costliest part of reading a session row.
 */
const cachedDecoder = <A, I>(schema: Schema.Schema<A, I>, capacity = 512) => {
  const decode = Schema.decodeUnknownSync(schema)
  const cache = new Map<string, A>()
  return (text: string): A => {
    let value = cache.get(text)
    if (value === undefined) {
      value = decode(JSON.parse(text))
      if (cache.size >= capacity) cache.clear()
      cache.set(text, value)
    }
    return value
  }
}

const agentOf = cachedDecoder(Agent)
const principalOf = cachedDecoder(Principal)
const budgetsOf = cachedDecoder(Budgets)
const subagentPolicyOf = cachedDecoder(SubagentPolicy)

// The JSON columns go through their schemas (cached); the scalar columns were
// written by this store from validated values. A row that does not decode is a defect.
const sessionOf = (row: SessionRow): Session =>
      Trusted.make(Session, {
        id: row.id as SessionId,
        principal: principalOf(row.principal),
        agent: agentOf(row.agent),
        parentId: row.parent_id as SessionId | null,
        rootId: row.root_id as SessionId,
        agentPath: JSON.parse(row.agent_path),
        alias: row.alias,
        title: row.title,
        archived: Number(row.archived) === 1,
        status: statusOf({
          closed: Number(row.closed) === 1,
          activeTurnId: row.active_turn_id as TurnId | null,
          openCallbacks: Number(row.open_callbacks)
        }),
        activeTurnId: row.active_turn_id as TurnId | null,
        busyPolicy: row.busy_policy as Session["busyPolicy"],
        budgets: row.budgets === null ? null : budgetsOf(row.budgets),
        subagentPolicy: row.subagent_policy === null ? null : subagentPolicyOf(row.subagent_policy),
        metadata: JSON.parse(row.metadata),
        headSeq: Number(row.head_seq),
        createdAt: Number(row.created_at),
        updatedAt: Number(row.updated_at)
      })

const toSession = (row: SessionRow) => Effect.sync(() => sessionOf(row))

const hasDuplicates = (ids: ReadonlyArray<string>) => new Set(ids).size !== ids.length

/** The columns of `troupe_operations` an append writes, in the order `operationRow` lists them. */
export const operationColumns = [
  "operation_id",
  "session_id",
  "turn_id",
  "kind",
  "name",
  "status",
  "input",
  "output",
  "is_error",
  "started_seq",
  "ended_seq"
] as const

/** The `troupe_operations` row a change upserts (an end without a start inserts a placeholder start). */
export const operationRow = (
  sessionId: SessionId,
  change: OperationChange
): { readonly [K in typeof operationColumns[number]]: unknown } => ({
  operation_id: change.operationId,
  session_id: sessionId,
  turn_id: change.turnId,
  kind: change.start?.kind ?? "tool",
  name: change.start?.name ?? "",
  status: change.end?.status ?? "started",
  input: jsonOrNull(change.start?.input),
  output: jsonOrNull(change.end?.output),
  is_error: change.end?.isError ? 1 : 0,
  started_seq: change.start?.seq ?? change.end!.seq,
  ended_seq: change.end?.seq ?? null
})

/** The columns of `troupe_callbacks`, in the order `callbackRow` lists them. */
export const callbackColumns = [
  "callback_id",
  "session_id",
  "turn_id",
  "operation_id",
  "kind",
  "request",
  "opened_seq",
  "opened_at"
] as const

/** The `troupe_callbacks` row of an opened callback. */
export const callbackRow = (
  callback: OpenCallback
): { readonly [K in typeof callbackColumns[number]]: unknown } => ({
  callback_id: callback.callbackId,
  session_id: callback.sessionId,
  turn_id: callback.turnId,
  operation_id: callback.operationId,
  kind: callback.kind,
  request: JSON.stringify(callback.request ?? null),
  opened_seq: callback.openedSeq,
  opened_at: callback.openedAt
})

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

/** One statement of a commit: `?`-placeholder text and the parameters it binds. */
export interface Step {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}

/**
 * A write transaction as a sequence of statements: it yields each one and is
 * resumed with that statement's rows; it returns its result, or why it is
 * refused (the caller then rolls the transaction back). Whoever runs it holds
 * the write transaction: the SQL store runs the statements one Effect at a
 * time, the SQLite layer all at once inside one synchronous transaction.
 */
export type Steps<A, E> = Generator<Step, Either.Either<A, E>, ReadonlyArray<never>>

/** The statements of a commit. */
export type CommitSteps = Steps<CommitReceipt, AppendError>

/** What a new session row holds besides the session itself. */
interface NewRow {
  readonly session: Session
  readonly tenant: string
  /** Its ids from the root down, each followed by `/` (descendants share the prefix). */
  readonly path: string
  readonly idempotencyKey: string | null
  readonly fingerprint: string
  /** The creation time: a value, or the store clock. */
  readonly at: Clock
  /** The parent commit that spawned it, if a spawn did. */
  readonly spawnCommit: string | null
  /** Inbox items admitted with it (a spawn's first message: 1). */
  readonly inbox: number
}

// The texts of the writes every session makes once (create, start, push), by shape (`SqlStatements.shaped`).
const insertSessionText = SqlStatements.shaped((atText: string) =>
  `INSERT INTO troupe_sessions (id, workspace_id, tenant, principal, agent, parent_id, root_id, path, agent_path,
      alias, title, busy_policy, budgets, subagent_policy, metadata, idempotency_key, fingerprint, head_seq,
      spawn_commit, inbox_head, ready_count, created_at, updated_at)
    VALUES (${SqlStatements.list(21)}, ${atText}, ${atText}) ON CONFLICT DO NOTHING RETURNING id`
)
const createdText = SqlStatements.shaped((atText: string) =>
  `INSERT INTO troupe_log (session_id, seq, at, commit_id, body) VALUES (?, 1, ${atText}, ?, ?)`
)
const acquireText = SqlStatements.shaped((clockText: string, columns: string) =>
  `UPDATE troupe_sessions
  SET lease_owner = ?, lease_epoch = lease_epoch + 1, lease_expires_at = ${clockText} + ?
  WHERE id = ? AND (lease_owner IS NULL OR lease_expires_at <= ${clockText})
  RETURNING ${columns}lease_epoch, lease_expires_at`
)
const lockSessionText = SqlStatements.shaped((lockRow: string, clockText: string) =>
  `WITH s AS (
      SELECT ${sessionColumns}, lease_owner, lease_epoch, lease_expires_at, child_turns, inbox_head
      FROM troupe_sessions WHERE id = ? ${lockRow}
    )
    SELECT s.*, ${clockText} AS now FROM s`
)
const pushHeadText = SqlStatements.shaped((lockRow: string) =>
  `SELECT closed, inbox_head, active_turn_id FROM troupe_sessions WHERE id = ? ${lockRow}`
)
const pushText = SqlStatements.shaped((clockText: string) =>
  `INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at)
    VALUES (?, ?, ?, ?, ${clockText})`
)

/** The insert of a new session row; it returns the id, or no row when the id, key or alias is taken. */
export const insertSession = (row: NewRow): Step => {
  const session = row.session
  return {
    text: insertSessionText(row.at.text),
    params: [
      session.id,
      session.principal.workspaceId.toLowerCase(),
      row.tenant,
      JSON.stringify(encodePrincipal(session.principal)),
      agentJson(session.agent),
      session.parentId,
      session.rootId,
      row.path,
      JSON.stringify(session.agentPath),
      session.alias,
      session.title,
      session.busyPolicy,
      session.budgets ? JSON.stringify(encodeBudgets(session.budgets)) : null,
      session.subagentPolicy ? JSON.stringify(encodePolicy(session.subagentPolicy)) : null,
      JSON.stringify(session.metadata),
      row.idempotencyKey,
      row.fingerprint,
      1,
      row.spawnCommit,
      row.inbox,
      row.inbox,
      ...row.at.params,
      ...row.at.params
    ]
  }
}

/** The `session_created` record of a new session, at seq 1. */
const createdStep = (session: Session, at: Clock): Step => ({
  text: createdText(at.text),
  params: [session.id, ...at.params, `commit_${session.id.slice(4)}`, toJsonText(createdRecord(session))]
})

/** The session of `tenant` under the idempotency `key`: none, the one made with the same request, or a `Conflict`. */
function* keyed(tenant: string, key: string, print: string): Generator<Step, Either.Either<Session, Conflict> | undefined, ReadonlyArray<never>> {
  const rows: ReadonlyArray<SessionRow> = yield {
    text: `SELECT ${sessionColumns} FROM troupe_sessions WHERE tenant = ? AND idempotency_key = ?`,
    params: [tenant, key]
  }
  if (rows.length === 0) return undefined
  if (rows[0]!.fingerprint !== print) {
    return Either.left(new Conflict({ entity: "session", key, reason: "idempotency key reused with a different request" }))
  }
  return Either.right(sessionOf(rows[0]!))
}

/**
 * The statements of `create`: the replay of an idempotency key, the parent
 * (of the caller's tenancy) and its aliases, then the new row (`id`, unless a
 * concurrent create of the same key or alias got there first) and its
 * `session_created` record, at the store clock read inside the transaction.
 */
export function* createSteps(input: CreateSession, id: SessionId, clock: Clock): Steps<Session, Conflict | SessionNotFound> {
  const tenant = tenantOf(input.principal)
  const print = printOf(input)
  if (input.idempotencyKey !== undefined) {
    const found = yield* keyed(tenant, input.idempotencyKey, print)
    if (found !== undefined) return found
  }
  let parent: { session: Session; path: string } | undefined
  if (input.parentId !== undefined) {
    const rows: ReadonlyArray<SessionRow & { readonly path: string }> = yield {
      text: `SELECT ${sessionColumns} FROM troupe_sessions WHERE id = ? AND tenant = ?`,
      params: [input.parentId, tenant]
    }
    if (rows.length === 0) return Either.left(new SessionNotFound({ sessionId: input.parentId }))
    parent = { session: sessionOf(rows[0]!), path: rows[0]!.path }
    if (input.alias !== undefined) {
      const taken: ReadonlyArray<unknown> = yield {
        text: `SELECT id FROM troupe_sessions WHERE parent_id = ? AND alias = ?`,
        params: [input.parentId, input.alias]
      }
      if (taken.length > 0) return Either.left(new Conflict({ entity: "alias", key: input.alias, reason: "alias already taken" }))
    }
  }
  const now: ReadonlyArray<{ now: number | string }> = yield { text: `SELECT ${clock.text} AS now`, params: clock.params }
  const at = Number(now[0]!.now)
  const session = draft(id, input, parent?.session, at)
  const inserted: ReadonlyArray<unknown> = yield insertSession({
    session,
    tenant,
    path: `${parent?.path ?? "/"}${id}/`,
    idempotencyKey: input.idempotencyKey ?? null,
    fingerprint: print,
    at: { text: "?", params: [at] },
    spawnCommit: null,
    inbox: 0
  })
  if (inserted.length === 0) {
    // A concurrent create with the same key (or alias) committed first.
    if (input.idempotencyKey !== undefined) {
      const found = yield* keyed(tenant, input.idempotencyKey, print)
      if (found !== undefined) return found
    }
    return Either.left(new Conflict({ entity: "alias", key: input.alias ?? id, reason: "alias already taken" }))
  }
  yield createdStep(session, { text: "?", params: [at] })
  return Either.right(session)
}

/** A row of `troupe_log` as the reads select it. */
interface LogRow {
  readonly seq: number | string
  readonly at: number | string
  readonly commit_id: string
  readonly body: string
}

/** A row of `troupe_inbox` as the reads select it. */
interface InboxRow {
  readonly position: number | string
  readonly command: string
  readonly received_at: number | string
}

const logStep = (sessionId: SessionId, after: number, limit: number): Step => ({
  text: `SELECT seq, at, commit_id, body FROM troupe_log WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
  params: [sessionId, after, limit + 1]
})

const inboxStep = (sessionId: SessionId, limit: number): Step => ({
  text: `SELECT position, command, received_at FROM troupe_inbox
  WHERE session_id = ? AND consumed = 0 ORDER BY position LIMIT ?`,
  params: [sessionId, limit]
})

/** The page `logStep(sessionId, after, limit)` selected (it reads one row more, to tell whether there are more). */
const logPageOf = (sessionId: SessionId, rows: ReadonlyArray<LogRow>, after: number, limit: number) => {
  const page = rows.length > limit ? rows.slice(0, limit) : rows
  const records = page.map((row) =>
    Trusted.make(LogRecord, {
      sessionId,
      seq: Number(row.seq),
      at: Number(row.at),
      commitId: row.commit_id as CommitId,
      body: fromJsonText(row.body)
    })
  )
  return new LogPage({
    records,
    cursor: records.length > 0 ? records[records.length - 1]!.seq : after,
    more: rows.length > limit
  }, true)
}

const inboxItemsOf = (sessionId: SessionId, rows: ReadonlyArray<InboxRow>) =>
  rows.map((row) =>
    new InboxItem({
      sessionId,
      position: Number(row.position),
      receivedAt: Number(row.received_at),
      command: decodeCommand(JSON.parse(row.command))
    }, true)
  )

/**
 * Takes the lease of `sessionId` when it is free or expired (bumping the
 * epoch), reading the session row back in the same statement: `acquire` and
 * `start`. No row: the lease is held, or there is no such session.
 */
const acquireStep = (sessionId: SessionId, owner: string, ttlMillis: number, clock: Clock, columns: string): Step => ({
  text: acquireText(clock.text, columns),
  params: [owner, ...clock.params, ttlMillis, sessionId, ...clock.params]
})

/** The lease an `acquireStep` row stands for. */
const leaseOf = (sessionId: SessionId, owner: string, row: { readonly lease_epoch: number | string; readonly lease_expires_at: number | string }) =>
  new Lease({ sessionId, owner, epoch: Number(row.lease_epoch), expiresAt: Number(row.lease_expires_at) }, true)

/**
 * `start`'s statements: the lease (with the session row), then, holding it,
 * the log's first page and the inbox. `None` when the lease is held.
 */
export function* startSteps(
  sessionId: SessionId,
  owner: string,
  ttlMillis: number,
  clock: Clock,
  limits: { readonly log: number; readonly inbox: number }
): Steps<Option.Option<ActorStart>, SessionNotFound> {
  const leased: ReadonlyArray<SessionRow & { lease_epoch: number | string; lease_expires_at: number | string }> = yield acquireStep(
    sessionId,
    owner,
    ttlMillis,
    clock,
    `${sessionColumns}, `
  )
  if (leased.length === 0) {
    const exists: ReadonlyArray<unknown> = yield { text: `SELECT id FROM troupe_sessions WHERE id = ?`, params: [sessionId] }
    return exists.length === 0 ? Either.left(new SessionNotFound({ sessionId })) : Either.right(Option.none())
  }
  const log: ReadonlyArray<LogRow> = yield logStep(sessionId, 0, limits.log)
  const inbox: ReadonlyArray<InboxRow> = yield inboxStep(sessionId, limits.inbox)
  return Either.right(Option.some({
    lease: leaseOf(sessionId, owner, leased[0]!),
    session: sessionOf(leased[0]!),
    log: logPageOf(sessionId, log, 0, limits.log),
    inbox: inboxItemsOf(sessionId, inbox)
  }))
}

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

/** The earlier admission of `inputId` in a session's inbox: a duplicate, `Conflict` when its content differs. */
function* earlierAdmission(
  sessionId: SessionId,
  inputId: InputId,
  print: string
): Generator<Step, Either.Either<Admission, Conflict> | undefined, ReadonlyArray<never>> {
  const known: ReadonlyArray<{ position: number | string; command: string }> = yield {
    text: `SELECT position, command FROM troupe_inbox WHERE session_id = ? AND input_id = ?`,
    params: [sessionId, inputId]
  }
  if (known.length === 0) return undefined
  if (known[0]!.command !== print) {
    return Either.left(new Conflict({ entity: "input", key: inputId, reason: "inputId reused with a different command" }))
  }
  return Either.right(new Admission({ sessionId, inputId, position: Number(known[0]!.position), duplicate: true }, true))
}

/** A message as the inbox stores it (canonical JSON): a later push of the same message is its duplicate. */
export const encodeMessage = (message: Message) => canonical(encodeCommand(message))

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
    at: { text: "?", params: [at] },
    spawnCommit: commit.commitId,
    inbox: 1
  })
  if (inserted.length === 0) return Either.left(new Conflict({ entity: "session", key: childId, reason: "session id already taken" }))
  yield createdStep(child, { text: "?", params: [at] })
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

/**
 * A check a push runs under the session's lock, after its duplicate and
 * closed checks, on the locked row: a refusal, or undefined to admit (it may
 * write too: the push's transaction is its own).
 */
export type PushGuard<E> = (
  row: { readonly active_turn_id: string | null }
) => Generator<Step, E | undefined, ReadonlyArray<never>>

/** The statements of a push of the command `inputId` whose canonical JSON is `print`, checked by `guard` if given. */
export function* pushSteps<E = never>(
  sessionId: SessionId,
  inputId: InputId,
  print: string,
  clock: Clock,
  lockRow: string,
  guard?: PushGuard<E>
): Steps<Admission, SessionNotFound | Conflict | SessionClosed | E> {
  const rows: ReadonlyArray<{ closed: number; inbox_head: number | string; active_turn_id: string | null }> = yield {
    text: pushHeadText(lockRow),
    params: [sessionId]
  }
  if (rows.length === 0) return Either.left(new SessionNotFound({ sessionId }))
  const known: ReadonlyArray<{ position: number | string; command: string }> = yield {
    text: `SELECT position, command FROM troupe_inbox WHERE session_id = ? AND input_id = ?`,
    params: [sessionId, inputId]
  }
  if (known.length > 0) {
    if (known[0]!.command !== print) {
      return Either.left(new Conflict({ entity: "input", key: inputId, reason: "inputId reused with a different command" }))
    }
    return Either.right(
      new Admission({ sessionId, inputId, position: Number(known[0]!.position), duplicate: true }, true)
    )
  }
  if (Number(rows[0]!.closed) === 1) return Either.left(new SessionClosed({ sessionId }))
  if (guard !== undefined) {
    const refused = yield* guard(rows[0]!)
    if (refused !== undefined) return Either.left(refused)
  }
  const position = Number(rows[0]!.inbox_head) + 1
  yield {
    text: pushText(clock.text),
    params: [sessionId, position, inputId, print, ...clock.params]
  }
  yield {
    text: `UPDATE troupe_sessions SET inbox_head = ?, ready_count = ready_count + 1 WHERE id = ?`,
    params: [position, sessionId]
  }
  return Either.right(new Admission({ sessionId, inputId, position, duplicate: false }, true))
}

/**
 * The statements of an answer's admission (see `SessionStore.admitAnswer`):
 * a push guarded by the admission rule, which marks the callback's row with
 * the answer's input id. `closed` when the callback is not open: the caller
 * reads the log for the reason.
 */
export function* answerSteps(
  sessionId: SessionId,
  answer: CallbackAnswer,
  print: string,
  clock: Clock,
  lockRow: string
): Steps<Admission, SessionNotFound | Conflict | SessionClosed | StaleCallback | "closed"> {
  const callbackId = answer.callbackId
  return yield* pushSteps<StaleCallback | "closed">(sessionId, answer.inputId, print, clock, lockRow, function*(row) {
    const open: ReadonlyArray<{ turn_id: string; operation_id: string; answer_input_id: string | null }> = yield {
      text: `SELECT turn_id, operation_id, answer_input_id FROM troupe_callbacks WHERE callback_id = ? AND session_id = ?`,
      params: [callbackId, sessionId]
    }
    const target = open[0] && {
      turnId: open[0].turn_id as TurnId,
      operationId: open[0].operation_id as OperationId,
      answered: open[0].answer_input_id !== null
    }
    const refusal = answerRefusal(target, row.active_turn_id as TurnId | null, answer)
    if (refusal === "closed") return refusal
    if (refusal !== undefined) return new StaleCallback({ sessionId, callbackId, reason: refusal })
    // The session's lock already serialises answers; the condition keeps the rule on the row itself.
    const marked: ReadonlyArray<unknown> = yield {
      text: `UPDATE troupe_callbacks SET answer_input_id = ?
      WHERE callback_id = ? AND session_id = ? AND answer_input_id IS NULL RETURNING callback_id`,
      params: [answer.inputId, callbackId, sessionId]
    }
    return marked.length === 0 ? new StaleCallback({ sessionId, callbackId, reason: "answered" }) : undefined
  })
}

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
  const projection = project(commit.sessionId, {
    headSeq,
    activeTurnId: row.active_turn_id as TurnId | null,
    openCallbacks: Number(row.open_callbacks),
    title: row.title,
    archived: Number(row.archived) === 1,
    closed: Number(row.closed) === 1
  }, commit.records, at)
  if (commit.records.length > 0) {
    const params: Array<unknown> = []
    commit.records.forEach((body, i) =>
      params.push(commit.sessionId, headSeq + 1 + i, at, commit.commitId, toJsonText(body))
    )
    yield {
      text: logText(commit.records.length),
      params
    }
  }
  if (projection.operations.length > 0) {
    const params: Array<unknown> = []
    for (const change of projection.operations) {
      const row = operationRow(commit.sessionId, change)
      for (const column of operationColumns) params.push(row[column])
    }
    yield {
      text: operationsText(projection.operations.length),
      params
    }
  }
  if (projection.callbacksOpened.length > 0) {
    const params: Array<unknown> = []
    for (const callback of projection.callbacksOpened) {
      const row = callbackRow(callback)
      for (const column of callbackColumns) params.push(row[column])
    }
    yield {
      text: callbacksOpenedText(projection.callbacksOpened.length),
      params
    }
  }
  let closedCallbacks = 0
  if (projection.callbacksClosed.length > 0) {
    const deleted: ReadonlyArray<unknown> = yield {
      text: callbacksClosedText(projection.callbacksClosed.length),
      params: [commit.sessionId, ...projection.callbacksClosed]
    }
    closedCallbacks = deleted.length
  }
  const head = projection.head
  yield {
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
      admits.length,
      at,
      commit.sessionId
    ]
  }
  yield {
    text: `INSERT INTO troupe_commits (commit_id, session_id, first_seq, head_seq, at) VALUES (?, ?, ?, ?, ?)`,
    params: [commit.commitId, commit.sessionId, headSeq + 1, head.headSeq, at]
  }
  return Either.right(
    Trusted.make(CommitReceipt, { commitId: commit.commitId, sessionId: commit.sessionId, firstSeq: headSeq + 1, headSeq: head.headSeq, at })
  )
}

/**
 * Brings the store's tables up to date (idempotent). A failing migration is a
 * `StoreUnavailable`, not a crash; a first migration racing another process's
 * (both creating the migrations table) is retried.
 */
export const migrate = Migrations.run.pipe(
  Effect.catchAllDefect((defect) => Effect.fail(defect)),
  Effect.mapError((cause) => new StoreUnavailable({ operation: "migrate", cause })),
  Effect.retry({ times: 3, schedule: Schedule.spaced("100 millis") })
)

/** Builds the store over the `SqlClient` in context; the driver layer runs `migrate` first. */
export const make = (dialect: Dialect) =>
  Effect.gen(function*() {
    const { query } = yield* SqlStatements.make(dialect.placeholders, dialect.outside)

    const readClock = Effect.flatMap(dialect.clock, (clock) =>
      Effect.map(
        query<{ now: number | string }>(`SELECT ${clock.text} AS now`, clock.params),
        (rows) => Number(rows[0]!.now)
      ))

    const sessionById = (sessionId: string) =>
      query<SessionRow>(`SELECT ${sessionColumns} FROM troupe_sessions WHERE id = ?`, [sessionId])

    // The three ways SQL is run (docs/store.md, "How the store runs SQL: three paths"):
    // 1. `drive`: a write's `Steps`, one Effect per statement, inside `dialect.transaction`
    //    (PostgreSQL's writes; every write over a caller's SqlClient);
    // 2. `dialect.transact`: the same `Steps` in one synchronous SQLite transaction (SqliteSessionStore.layer);
    // 3. `dialect.append`: PostgreSQL's one-statement append (PgAppend), derived from `project`.
    // Reads and the one-statement writes (acquire, renew, release, updateMetadata) go through `query`.

    /** Path 1: runs steps one statement at a time, feeding each statement's rows back. */
    const drive = <A, E>(steps: Steps<A, E>): Effect.Effect<A, E | SqlError> => {
      const resume = (rows: ReadonlyArray<unknown> | undefined): Effect.Effect<A, E | SqlError> => {
        const next = steps.next(rows as ReadonlyArray<never>)
        if (next.done) return next.value
        return Effect.flatMap(query(next.value.text, next.value.params), resume)
      }
      return Effect.suspend(() => resume(undefined))
    }

    /** Runs the statements of a write transaction, the dialect's way (path 2) or one Effect each (path 1); a refusal rolls it back. */
    const transact = <A, E>(steps: (clock: Clock) => Steps<A, E>, session?: string): Effect.Effect<A, E | SqlError> =>
      dialect.transact !== undefined
        ? dialect.transact(steps, session)
        : dialect.transaction(Effect.flatMap(dialect.clock, (clock) => drive(steps(clock))))

    // One write transaction of statements (`createSteps`): on SQLite one synchronous transaction, like a commit.
    const create = Effect.fnUntraced(function*(input: CreateSession) {
      const id = input.sessionId ?? (yield* makeSessionId)
      return yield* transact((clock) => createSteps(input, id, clock), id)
    }, unavailable("create"))

    const get = Effect.fnUntraced(function*(sessionId: SessionId) {
      const rows = yield* sessionById(sessionId)
      if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
      return yield* toSession(rows[0]!)
    }, unavailable("get"))

    /** The anchor of a listing when it belongs to `principal`'s tenancy. */
    const anchorOf = (principal: Principal, sessionId: SessionId) =>
      Effect.flatMap(
        query<SessionRow & { readonly path: string }>(
          `SELECT ${sessionColumns}, path FROM troupe_sessions WHERE id = ? AND tenant = ?`,
          [sessionId, tenantOf(principal)]
        ),
        (rows) => (rows.length === 0 ? Effect.fail(new SessionNotFound({ sessionId })) : Effect.succeed(rows[0]!))
      )

    /** A newest-first page of the sessions `clauses` select, bound to the listing `of`. */
    const pageOf = (
      clauses: Array<string>,
      params: Array<unknown>,
      before: SessionId | undefined,
      limit: number,
      of: string
    ) =>
      Effect.gen(function*() {
        if (before !== undefined) {
          clauses.push("id < ?")
          params.push(before)
        }
        params.push(limit + 1)
        const rows = yield* query<SessionRow>(
          `SELECT ${sessionColumns} FROM troupe_sessions WHERE ${clauses.join(" AND ")} ORDER BY id DESC LIMIT ?`,
          params
        )
        const items = yield* Effect.forEach(rows.slice(0, limit), toSession)
        return { items, nextCursor: rows.length > limit ? ListCursor.encode(items[items.length - 1]!.id, of) : undefined }
      })

    const list = Effect.fnUntraced(function*(request: ListSessions) {
      const limit = yield* ListCursor.limitOf(request.limit)
      const includeArchived = request.includeArchived === true
      const of = ListCursor.listing(request.principal, { _tag: "list", scope: request.scope, includeArchived })
      const before = yield* ListCursor.positionOf(request.cursor, of)
      const clauses = ["tenant = ?"]
      const params: Array<unknown> = [tenantOf(request.principal)]
      if (request.scope === "roots") {
        clauses.push("parent_id IS NULL")
      } else {
        const anchorId = "children" in request.scope ? request.scope.children : request.scope.tree
        const anchor = yield* anchorOf(request.principal, anchorId)
        if ("children" in request.scope) {
          clauses.push("parent_id = ?")
          params.push(anchorId)
        } else {
          // Descendants share the anchor's root and extend its path; the path
          // is made of ids, so it holds no LIKE wildcards.
          clauses.push("root_id = ?", "path LIKE ?", "id <> ?")
          params.push(anchor.root_id, anchor.path + "%", anchorId)
        }
      }
      if (!includeArchived) clauses.push("archived = 0")
      const page = yield* pageOf(clauses, params, before, limit, of)
      return new SessionPage(page.nextCursor === undefined ? { items: page.items } : page, true)
    }, unavailable("list"))

    const children = Effect.fnUntraced(function*(principal: Principal, sessionId: SessionId, request: PageRequest = {}) {
      const limit = yield* ListCursor.limitOf(request.limit)
      const of = ListCursor.listing(principal, { _tag: "children", sessionId })
      const before = yield* ListCursor.positionOf(request.cursor, of)
      yield* anchorOf(principal, sessionId)
      const page = yield* pageOf(["tenant = ?", "parent_id = ?"], [tenantOf(principal), sessionId], before, limit, of)
      const items = page.items.map((session) =>
        new ChildEntry({ session, alias: session.alias, agent: session.agent.name, agentPath: session.agentPath }, true)
      )
      return new ChildPage(page.nextCursor === undefined ? { items } : { items, nextCursor: page.nextCursor }, true)
    }, unavailable("children"))

    const tree = Effect.fnUntraced(function*(
      principal: Principal,
      sessionId: SessionId,
      options: { readonly includeArchived?: boolean | undefined } = {}
    ) {
      const anchor = yield* anchorOf(principal, sessionId)
      // Ids grow with creation time, so id order puts every parent before its children.
      const rows = yield* query<SessionRow>(
        `SELECT ${sessionColumns} FROM troupe_sessions
        WHERE root_id = ? AND path LIKE ? AND id <> ? AND tenant = ? ${options.includeArchived ? "" : "AND archived = 0"}
        ORDER BY id LIMIT ?`,
        [anchor.root_id, anchor.path + "%", sessionId, anchor.tenant, maxTreeNodes + 1]
      )
      if (rows.length > maxTreeNodes) {
        return yield* new InvalidInput({
          what: "tree",
          reason: `more than ${maxTreeNodes} sessions below ${sessionId}: page with list({ scope: { tree } })`
        })
      }
      const nodes = rows.map((row) => {
        const session = sessionOf(row)
        return new TreeNode({ session, parentId: session.parentId!, alias: session.alias, agentPath: session.agentPath }, true)
      })
      return new SessionTree({ root: yield* toSession(anchor), nodes }, true)
    }, unavailable("tree"))

    const findChild = Effect.fnUntraced(function*(principal: Principal, parentId: SessionId, child: string) {
      // An id is never an alias of another child: ids are prefixed ULIDs, and a child found by id is that child.
      const rows = yield* query<SessionRow>(
        `SELECT ${sessionColumns} FROM troupe_sessions
        WHERE parent_id = ? AND tenant = ? AND (id = ? OR alias = ?) ORDER BY id = ? DESC LIMIT 1`,
        [parentId, tenantOf(principal), child, child, child]
      )
      if (rows.length === 0) return yield* new SessionNotFound({ sessionId: child })
      return yield* toSession(rows[0]!)
    }, unavailable("findChild"))

    const updateMetadata = Effect.fnUntraced(function*(principal: Principal, sessionId: SessionId, patch: MetadataPatch) {
      const clock = yield* dialect.clock
      // One statement: the row is written under its own lock, whoever holds the lease.
      const rows = yield* query<SessionRow>(
        `UPDATE troupe_sessions SET
          title = CASE WHEN ? = 1 THEN ? ELSE title END,
          archived = CASE WHEN ? = 1 THEN ? ELSE archived END,
          updated_at = ${clock.text}
        WHERE id = ? AND tenant = ?
        RETURNING ${sessionColumns}`,
        [
          patch.title === undefined ? 0 : 1,
          patch.title ?? null,
          patch.archived === undefined ? 0 : 1,
          patch.archived ? 1 : 0,
          ...clock.params,
          sessionId,
          tenantOf(principal)
        ]
      )
      if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
      return yield* toSession(rows[0]!)
    }, unavailable("updateMetadata"))

    const spawn = Effect.fnUntraced(function*(input: SpawnChild) {
      const childId = input.sessionId ?? (yield* makeSessionId)
      return yield* transact((clock) => spawnSteps(input, childId, clock, dialect.lockRow), input.commit.sessionId)
    }, unavailable("spawn"))

    const admitChildTurn = Effect.fnUntraced(function*(input: AdmitChildTurn) {
      return yield* transact((clock) => childTurnSteps(input, clock, dialect.lockRow), input.childId)
    }, unavailable("admitChildTurn"))

    const pushInTransaction: Push = (sessionId, inputId, print) =>
      transact((clock) => pushSteps(sessionId, inputId, print, clock, dialect.lockRow), sessionId)
    const pushWith = dialect.push === undefined ? pushInTransaction : dialect.push(pushInTransaction)

    const push = Effect.fnUntraced(function*(sessionId: SessionId, command: Pushable) {
      if ((command as Command)._tag === "callback_answer") {
        return yield* new Conflict({ entity: "input", key: command.inputId, reason: "a callback answer goes through admitAnswer" })
      }
      return yield* pushWith(sessionId, command.inputId, canonical(encodeCommand(command)))
    }, unavailable("push"))

    const readInbox = Effect.fnUntraced(
      function*(sessionId: SessionId, options?: { readonly limit?: number | undefined }) {
        const step = inboxStep(sessionId, options?.limit ?? 1000)
        return inboxItemsOf(sessionId, yield* query<InboxRow>(step.text, step.params))
      },
      unavailable("readInbox")
    )

    const withPendingInbox = Effect.fnUntraced(function*(sessionIds: ReadonlyArray<SessionId>) {
      const pending: Array<SessionId> = []
      for (let from = 0; from < sessionIds.length; from += pendingChunk) {
        const chunk = sessionIds.slice(from, from + pendingChunk)
        const rows = yield* query<{ session_id: SessionId }>(
          `SELECT DISTINCT session_id FROM troupe_inbox WHERE consumed = 0 AND session_id IN (${SqlStatements.list(chunk.length)})`,
          chunk
        )
        for (const row of rows) pending.push(row.session_id)
      }
      return pending
    }, unavailable("withPendingInbox"))

    const acquire = Effect.fnUntraced(function*(sessionId: SessionId, owner: string, ttlMillis: number) {
      const step = acquireStep(sessionId, owner, ttlMillis, yield* dialect.clock, "")
      const rows = yield* query<{ lease_epoch: number | string; lease_expires_at: number | string }>(step.text, step.params)
      if (rows.length === 0) {
        const exists = yield* query(`SELECT id FROM troupe_sessions WHERE id = ?`, [sessionId])
        if (exists.length === 0) return yield* new SessionNotFound({ sessionId })
        return Option.none<Lease>()
      }
      return Option.some(leaseOf(sessionId, owner, rows[0]!))
    }, unavailable("acquire"))

    // On SQLite one synchronous transaction (which group commit may share); elsewhere the
    // statements one after another, outside a transaction: once the lease is held, no one else
    // writes the log, and a push after the inbox read rings the actor anyway.
    const start = (sessionId: SessionId, owner: string, ttlMillis: number, limits?: StartLimits) => {
      const steps = (clock: Clock) =>
        startSteps(sessionId, owner, ttlMillis, clock, { log: limits?.log ?? 1000, inbox: limits?.inbox ?? 1000 })
      return unavailable("start")(
        dialect.transact !== undefined
          ? dialect.transact(steps, sessionId)
          : Effect.flatMap(dialect.clock, (clock) => drive(steps(clock)))
      )
    }

    const renew = Effect.fnUntraced(function*(lease: Lease, ttlMillis: number) {
      const clock = yield* dialect.clock
      const rows = yield* query<{ lease_expires_at: number | string }>(
        `UPDATE troupe_sessions SET lease_expires_at = ${clock.text} + ?
        WHERE id = ? AND lease_owner = ? AND lease_epoch = ? AND lease_expires_at > ${clock.text}
        RETURNING lease_expires_at`,
        [...clock.params, ttlMillis, lease.sessionId, lease.owner, lease.epoch, ...clock.params]
      )
      if (rows.length === 0) {
        return yield* new LeaseLost({ sessionId: lease.sessionId, epoch: lease.epoch, owner: lease.owner })
      }
      return new Lease({ ...lease, expiresAt: Number(rows[0]!.lease_expires_at) }, true)
    }, unavailable("renew"))

    const renewAll = Effect.fnUntraced(function*(leases: ReadonlyArray<Lease>, ttlMillis: number) {
      const clock = yield* dialect.clock
      const expiries = new Map<string, number>()
      for (let from = 0; from < leases.length; from += renewChunk) {
        const chunk = leases.slice(from, from + renewChunk)
        // An OR of exact matches rather than a row-value IN: both dialects type it without casts.
        const rows = yield* query<{ id: string; lease_expires_at: number | string }>(
          `UPDATE troupe_sessions SET lease_expires_at = ${clock.text} + ?
          WHERE lease_expires_at > ${clock.text}
          AND (${chunk.map(() => "(id = ? AND lease_owner = ? AND lease_epoch = ?)").join(" OR ")})
          RETURNING id, lease_expires_at`,
          [...clock.params, ttlMillis, ...clock.params, ...chunk.flatMap((lease) => [lease.sessionId, lease.owner, lease.epoch])]
        )
        for (const row of rows) expiries.set(row.id, Number(row.lease_expires_at))
      }
      return leases.map((lease): Lease | LeaseLost => {
        const expiresAt = expiries.get(lease.sessionId)
        return expiresAt === undefined
          ? new LeaseLost({ sessionId: lease.sessionId, epoch: lease.epoch, owner: lease.owner })
          : new Lease({ ...lease, expiresAt }, true)
      })
    }, unavailable("renew"))

    // One statement, never waiting for a group commit's batch: the host releases under its lock.
    const release = Effect.fnUntraced(function*(lease: Lease) {
      yield* query(
        `UPDATE troupe_sessions SET lease_owner = NULL, lease_expires_at = 0
        WHERE id = ? AND lease_owner = ? AND lease_epoch = ?`,
        [lease.sessionId, lease.owner, lease.epoch]
      )
    }, unavailable("release"))

    const releaseIdle = Effect.fnUntraced(function*(lease: Lease) {
      const released = yield* query(
        `UPDATE troupe_sessions SET lease_owner = NULL, lease_expires_at = 0
        WHERE id = ? AND lease_owner = ? AND lease_epoch = ? AND ready_count = 0 RETURNING id`,
        [lease.sessionId, lease.owner, lease.epoch]
      )
      if (released.length > 0) return true
      // Kept: an item is ready, unless the lease was not held any more (rare: a second look says which).
      const held = yield* query(
        `SELECT 1 AS held FROM troupe_sessions WHERE id = ? AND lease_owner = ? AND lease_epoch = ?`,
        [lease.sessionId, lease.owner, lease.epoch]
      )
      return held.length === 0
    }, unavailable("releaseIdle"))

    const inTransaction: Append = (commit) => transact((clock) => commitSteps(commit, clock, dialect.lockRow), commit.sessionId)

    // Path 3 when the dialect has one (PostgreSQL), falling back on `inTransaction` (path 1); else path 1 or 2.
    const commitWith = dialect.append === undefined ? inTransaction : dialect.append({ query, inTransaction })
    const append = (commit: Commit) => unavailable("append")(commitWith(commit))

    const readLog = Effect.fnUntraced(function*(
      sessionId: SessionId,
      options?: { readonly after?: number | undefined; readonly limit?: number | undefined }
    ) {
      const after = options?.after ?? 0
      const limit = options?.limit ?? 500
      const step = logStep(sessionId, after, limit)
      return logPageOf(sessionId, yield* query<LogRow>(step.text, step.params), after, limit)
    }, unavailable("readLog"))

    const admitAnswer = Effect.fnUntraced(function*(sessionId: SessionId, answer: CallbackAnswer) {
      const print = canonical(encodeCommand(answer))
      return yield* Effect.catchIf(
        transact((clock) => answerSteps(sessionId, answer, print, clock, dialect.lockRow), sessionId),
        (refusal): refusal is "closed" => refusal === "closed",
        // Closing is final: the log read after the refusing transaction tells how.
        () =>
          Effect.flatMap(
            closedReason(readLog, sessionId, answer.callbackId),
            (reason) => Effect.fail(new StaleCallback({ sessionId, callbackId: answer.callbackId, reason }))
          )
      )
    }, unavailable("admitAnswer"))

    const operations = Effect.fnUntraced(function*(sessionId: SessionId, turnId?: TurnId) {
      const rows = yield* query<OperationRow>(
        `SELECT operation_id, turn_id, kind, name, status, input, output, is_error, started_seq, ended_seq
        FROM troupe_operations WHERE session_id = ? ${turnId === undefined ? "" : "AND turn_id = ?"}
        ORDER BY started_seq`,
        turnId === undefined ? [sessionId] : [sessionId, turnId]
      )
      return yield* Effect.forEach(rows, (row) =>
        decodeOperation({
          operationId: row.operation_id,
          sessionId,
          turnId: row.turn_id,
          kind: row.kind,
          name: row.name,
          status: row.status,
          input: json(row.input),
          output: json(row.output),
          isError: Number(row.is_error) === 1,
          startedSeq: Number(row.started_seq),
          ...(row.ended_seq === null ? {} : { endedSeq: Number(row.ended_seq) })
        }).pipe(Effect.orDie))
    }, unavailable("operations"))

    const openCallbacks = Effect.fnUntraced(function*(sessionId: SessionId) {
      const rows = yield* query<CallbackRow>(
        `SELECT callback_id, turn_id, operation_id, kind, request, opened_seq, opened_at
        FROM troupe_callbacks WHERE session_id = ? ORDER BY opened_seq`,
        [sessionId]
      )
      return yield* Effect.forEach(rows, (row) =>
        decodeCallback({
          callbackId: row.callback_id,
          sessionId,
          turnId: row.turn_id,
          operationId: row.operation_id,
          kind: row.kind,
          request: JSON.parse(row.request),
          openedSeq: Number(row.opened_seq),
          openedAt: Number(row.opened_at)
        }).pipe(Effect.orDie))
    }, unavailable("openCallbacks"))

    const runnable = Effect.fnUntraced(function*(options?: { readonly limit?: number | undefined }) {
      const clock = yield* dialect.clock
      const rows = yield* query<{ id: SessionId }>(
        `SELECT id FROM troupe_sessions
        WHERE closed = 0 AND (lease_owner IS NULL OR lease_expires_at <= ${clock.text})
          AND (active_turn_id IS NOT NULL OR ready_count > 0)
        ORDER BY id LIMIT ?`,
        [...clock.params, options?.limit ?? 100]
      )
      return rows.map((row) => row.id)
    }, unavailable("runnable"))

    return SessionStore.of({
      now: unavailable("now")(readClock),
      create,
      get,
      list,
      children,
      tree,
      findChild,
      updateMetadata,
      spawn,
      admitChildTurn,
      push,
      admitAnswer,
      readInbox,
      withPendingInbox,
      acquire,
      start,
      renew,
      renewAll,
      release,
      releaseIdle,
      append,
      readLog,
      operations,
      openCallbacks,
      runnable
    })
  })
