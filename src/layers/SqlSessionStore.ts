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
import * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Option, Schema } from "effect"
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
  StoreUnavailable
} from "../schema/Errors.js"
import { CommitId, makeSessionId, type SessionId, type TurnId } from "../schema/Ids.js"
import { Admission, Command, InboxItem } from "../schema/Inbox.js"
import { canonical } from "../schema/Json.js"
import { CommitReceipt, Lease } from "../schema/Lease.js"
import { OperationReceipt } from "../schema/Operation.js"
import { SubagentPolicy } from "../schema/Policy.js"
import { Principal } from "../schema/Principal.js"
import { LogPage, LogRecord, RecordBody } from "../schema/Record.js"
import { Session, SessionPage } from "../schema/Session.js"
import * as ListCursor from "../services/ListCursor.js"
import { project, statusOf } from "../services/LogProjection.js"
import { createdRecord, draft, fingerprint } from "../services/SessionDraft.js"
import { SessionStore } from "../services/SessionStore.js"
import * as Migrations from "./SessionStoreMigrations.js"

/** What differs between SQL databases. */
export interface Dialect {
  /** The store clock as a SQL expression or parameter (epoch ms). */
  readonly now: Effect.Effect<Fragment>
  /** Appended to the query that reads the session row inside a write transaction. */
  readonly lockRow: Fragment
  /** Runs `effect` in a write transaction that serialises with every other writer. */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
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
}

const decodeSession = Schema.decodeUnknown(Session)
const decodeRecord = Schema.decodeUnknownSync(RecordBody)
const encodeRecord = Schema.encodeSync(RecordBody)
const decodeCommand = Schema.decodeUnknownSync(Command)
const encodeCommand = Schema.encodeSync(Command)
const encodeAgent = Schema.encodeSync(Agent)
const encodePrincipal = Schema.encodeSync(Principal)
const encodeBudgets = Schema.encodeSync(Budgets)
const encodePolicy = Schema.encodeSync(SubagentPolicy)

const json = (text: string | null): unknown => (text === null ? undefined : JSON.parse(text))
const jsonOrNull = (value: unknown): string | null => (value === undefined ? null : JSON.stringify(value))

const sessionColumns = `id, principal, agent, parent_id, root_id, path, agent_path, alias, title, archived, closed,
  active_turn_id, open_callbacks, busy_policy, budgets, subagent_policy, metadata, fingerprint, head_seq,
  created_at, updated_at`

/** Maps a driver failure to `StoreUnavailable`, keeping the driver error as the cause. */
const unavailable = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E | SqlError, R>) =>
  Effect.catchIf(
    effect,
    (error): error is SqlError => (error as { _tag?: string })?._tag === "SqlError",
    (cause) => Effect.fail(new StoreUnavailable({ operation, cause }))
  ) as Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable, R>

/** Builds the store over the `SqlClient` in context, after running migrations. */
export const make = (dialect: Dialect) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* Migrations.run.pipe(
      Effect.mapError((cause) => new StoreUnavailable({ operation: "migrate", cause }))
    )
    const columns = sql.literal(sessionColumns)

    const toSession = (row: SessionRow) =>
      decodeSession({
        id: row.id,
        principal: JSON.parse(row.principal),
        agent: JSON.parse(row.agent),
        parentId: row.parent_id,
        rootId: row.root_id,
        agentPath: JSON.parse(row.agent_path),
        alias: row.alias,
        title: row.title,
        archived: Number(row.archived) === 1,
        status: statusOf({
          closed: Number(row.closed) === 1,
          activeTurnId: row.active_turn_id as TurnId | null,
          openCallbacks: Number(row.open_callbacks)
        }),
        activeTurnId: row.active_turn_id,
        busyPolicy: row.busy_policy,
        budgets: json(row.budgets) ?? null,
        subagentPolicy: json(row.subagent_policy) ?? null,
        metadata: JSON.parse(row.metadata),
        headSeq: Number(row.head_seq),
        createdAt: Number(row.created_at),
        updatedAt: Number(row.updated_at)
      }).pipe(Effect.orDie)

    const selectSession = (sessionId: string) =>
      sql<SessionRow>`SELECT ${columns} FROM troupe_sessions WHERE id = ${sessionId}`

    const readClock = Effect.flatMap(dialect.now, (clock) => sql<{ now: number | string }>`SELECT ${clock} AS now`).pipe(
      Effect.map((rows) => Number(rows[0]!.now))
    )
    const now = unavailable("now")(readClock)

    const create = Effect.fn("SessionStore.create")(function*(input: Parameters<SessionStore["Type"]["create"]>[0]) {
      const workspaceId = input.principal.workspaceId.toLowerCase()
      const print = fingerprint(input)
      const existing = (key: string) =>
        Effect.gen(function*() {
          const rows = yield* sql<SessionRow>`SELECT ${columns} FROM troupe_sessions
            WHERE workspace_id = ${workspaceId} AND idempotency_key = ${key}`
          if (rows.length === 0) return Option.none<Session>()
          if (rows[0]!.fingerprint !== print) {
            return yield* new Conflict({
              entity: "session",
              key,
              reason: "idempotency key reused with a different request"
            })
          }
          return Option.some(yield* toSession(rows[0]!))
        })
      return yield* dialect.transaction(Effect.gen(function*() {
        if (input.idempotencyKey !== undefined) {
          const found = yield* existing(input.idempotencyKey)
          if (Option.isSome(found)) return found.value
        }
        let parent: { session: Session; path: string } | undefined
        if (input.parentId !== undefined) {
          const rows = yield* sql<SessionRow>`SELECT ${columns} FROM troupe_sessions
            WHERE id = ${input.parentId} AND workspace_id = ${workspaceId}`
          if (rows.length === 0) return yield* new SessionNotFound({ sessionId: input.parentId })
          parent = { session: yield* toSession(rows[0]!), path: rows[0]!.path }
          if (input.alias !== undefined) {
            const taken = yield* sql`SELECT id FROM troupe_sessions
              WHERE parent_id = ${input.parentId} AND alias = ${input.alias}`
            if (taken.length > 0) {
              return yield* new Conflict({ entity: "alias", key: input.alias, reason: "alias already taken" })
            }
          }
        }
        const at = yield* readClock
        const id = yield* makeSessionId
        const session = draft(id, input, parent?.session, at)
        const inserted = yield* sql`INSERT INTO troupe_sessions ${
          sql.insert({
            id,
            workspace_id: workspaceId,
            principal: JSON.stringify(encodePrincipal(session.principal)),
            agent: JSON.stringify(encodeAgent(session.agent)),
            parent_id: session.parentId,
            root_id: session.rootId,
            path: `${parent?.path ?? "/"}${id}/`,
            agent_path: JSON.stringify(session.agentPath),
            alias: session.alias,
            title: session.title,
            busy_policy: session.busyPolicy,
            budgets: session.budgets ? JSON.stringify(encodeBudgets(session.budgets)) : null,
            subagent_policy: session.subagentPolicy ? JSON.stringify(encodePolicy(session.subagentPolicy)) : null,
            metadata: JSON.stringify(session.metadata),
            idempotency_key: input.idempotencyKey ?? null,
            fingerprint: print,
            head_seq: 1,
            created_at: at,
            updated_at: at
          })
        } ON CONFLICT DO NOTHING RETURNING id`
        if (inserted.length === 0) {
          // A concurrent create with the same key (or alias) committed first.
          if (input.idempotencyKey !== undefined) {
            const found = yield* existing(input.idempotencyKey)
            if (Option.isSome(found)) return found.value
          }
          return yield* new Conflict({ entity: "alias", key: input.alias ?? id, reason: "alias already taken" })
        }
        yield* sql`INSERT INTO troupe_log ${
          sql.insert({
            session_id: id,
            seq: 1,
            at,
            commit_id: `commit_${id.slice(4)}`,
            body: JSON.stringify(encodeRecord(createdRecord(session)))
          })
        }`
        return session
      }))
    }, unavailable("create"))

    const get = Effect.fn("SessionStore.get")(function*(sessionId: SessionId) {
      const rows = yield* selectSession(sessionId)
      if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
      return yield* toSession(rows[0]!)
    }, unavailable("get"))

    const list = Effect.fn("SessionStore.list")(function*(request: Parameters<SessionStore["Type"]["list"]>[0]) {
      const limit = yield* ListCursor.limitOf(request.limit)
      const before = request.cursor === undefined ? undefined : yield* ListCursor.decode(request.cursor)
      const workspaceId = request.workspaceId.toLowerCase()
      const clauses: Array<Fragment> = [sql`workspace_id = ${workspaceId}`]
      if (request.scope === "roots") {
        clauses.push(sql`parent_id IS NULL`)
      } else {
        const anchorId = "children" in request.scope ? request.scope.children : request.scope.tree
        const anchor = yield* sql<{ root_id: string; path: string }>`SELECT root_id, path FROM troupe_sessions
          WHERE id = ${anchorId} AND workspace_id = ${workspaceId}`
        if (anchor.length === 0) return yield* new SessionNotFound({ sessionId: anchorId })
        if ("children" in request.scope) {
          clauses.push(sql`parent_id = ${anchorId}`)
        } else {
          // Descendants share the anchor's root and extend its path; the prefix
          // is made of ids, so it holds no LIKE wildcards.
          clauses.push(sql`root_id = ${anchor[0]!.root_id}`)
          clauses.push(sql`path LIKE ${anchor[0]!.path + "%"}`)
          clauses.push(sql`id <> ${anchorId}`)
        }
      }
      if (!request.includeArchived) clauses.push(sql`archived = 0`)
      if (before !== undefined) clauses.push(sql`id < ${before}`)
      const rows = yield* sql<SessionRow>`SELECT ${columns} FROM troupe_sessions
        WHERE ${sql.and(clauses)} ORDER BY id DESC LIMIT ${limit + 1}`
      const items = yield* Effect.forEach(rows.slice(0, limit), toSession)
      return new SessionPage(
        rows.length > limit ? { items, nextCursor: ListCursor.encode(items[items.length - 1]!.id) } : { items }
      )
    }, (effect) => unavailable("list")(effect) as Effect.Effect<SessionPage, SessionNotFound | InvalidInput | StoreUnavailable>)

    const push = Effect.fn("SessionStore.push")(function*(sessionId: SessionId, command: Command) {
      const print = canonical(encodeCommand(command))
      return yield* dialect.transaction(Effect.gen(function*() {
        const rows = yield* sql<{ closed: number; inbox_head: number | string }>`SELECT closed, inbox_head
          FROM troupe_sessions WHERE id = ${sessionId} ${dialect.lockRow}`
        if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
        const known = yield* sql<{ position: number | string; command: string }>`SELECT position, command
          FROM troupe_inbox WHERE session_id = ${sessionId} AND input_id = ${command.inputId}`
        if (known.length > 0) {
          if (canonical(JSON.parse(known[0]!.command)) !== print) {
            return yield* new Conflict({
              entity: "input",
              key: command.inputId,
              reason: "inputId reused with a different command"
            })
          }
          return new Admission({
            sessionId,
            inputId: command.inputId,
            position: Number(known[0]!.position),
            duplicate: true
          })
        }
        if (Number(rows[0]!.closed) === 1) return yield* new SessionClosed({ sessionId })
        const position = Number(rows[0]!.inbox_head) + 1
        const at = yield* readClock
        yield* sql`INSERT INTO troupe_inbox ${
          sql.insert({ session_id: sessionId, position, input_id: command.inputId, command: print, received_at: at })
        }`
        yield* sql`UPDATE troupe_sessions SET inbox_head = ${position}, ready_count = ready_count + 1
          WHERE id = ${sessionId}`
        return new Admission({ sessionId, inputId: command.inputId, position, duplicate: false })
      }))
    }, unavailable("push"))

    const readInbox = Effect.fn("SessionStore.readInbox")(
      function*(sessionId: SessionId, options?: { readonly limit?: number | undefined }) {
        const rows = yield* sql<{ position: number | string; command: string; received_at: number | string }>`
          SELECT position, command, received_at FROM troupe_inbox
          WHERE session_id = ${sessionId} AND consumed = 0 ORDER BY position LIMIT ${options?.limit ?? 1000}`
        return rows.map((row) =>
          new InboxItem({
            sessionId,
            position: Number(row.position),
            receivedAt: Number(row.received_at),
            command: decodeCommand(JSON.parse(row.command))
          })
        )
      },
      unavailable("readInbox")
    )

    const acquire = Effect.fn("SessionStore.acquire")(function*(sessionId: SessionId, owner: string, ttlMillis: number) {
      const clock = yield* dialect.now
      const rows = yield* sql<{ lease_epoch: number | string; lease_expires_at: number | string }>`
        UPDATE troupe_sessions
        SET lease_owner = ${owner}, lease_epoch = lease_epoch + 1, lease_expires_at = ${clock} + ${ttlMillis}
        WHERE id = ${sessionId} AND (lease_owner IS NULL OR lease_expires_at <= ${clock})
        RETURNING lease_epoch, lease_expires_at`
      if (rows.length === 0) {
        const exists = yield* sql`SELECT id FROM troupe_sessions WHERE id = ${sessionId}`
        if (exists.length === 0) return yield* new SessionNotFound({ sessionId })
        return Option.none<Lease>()
      }
      return Option.some(
        new Lease({
          sessionId,
          owner,
          epoch: Number(rows[0]!.lease_epoch),
          expiresAt: Number(rows[0]!.lease_expires_at)
        })
      )
    }, unavailable("acquire"))

    const renew = Effect.fn("SessionStore.renew")(function*(lease: Lease, ttlMillis: number) {
      const clock = yield* dialect.now
      const rows = yield* sql<{ lease_expires_at: number | string }>`UPDATE troupe_sessions
        SET lease_expires_at = ${clock} + ${ttlMillis}
        WHERE id = ${lease.sessionId} AND lease_owner = ${lease.owner} AND lease_epoch = ${lease.epoch}
          AND lease_expires_at > ${clock}
        RETURNING lease_expires_at`
      if (rows.length === 0) {
        return yield* new LeaseLost({ sessionId: lease.sessionId, epoch: lease.epoch, owner: lease.owner })
      }
      return new Lease({ ...lease, expiresAt: Number(rows[0]!.lease_expires_at) })
    }, unavailable("renew"))

    const release = Effect.fn("SessionStore.release")(function*(lease: Lease) {
      yield* sql`UPDATE troupe_sessions SET lease_owner = NULL, lease_expires_at = 0
        WHERE id = ${lease.sessionId} AND lease_owner = ${lease.owner} AND lease_epoch = ${lease.epoch}`
    }, unavailable("release"))

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
      readonly now: number | string
      readonly replay_session: string | null
      readonly replay_first: number | string | null
      readonly replay_head: number | string | null
      readonly replay_at: number | string | null
    }

    const append = Effect.fn("SessionStore.append")(function*(commit: Parameters<SessionStore["Type"]["append"]>[0]) {
      return yield* dialect.transaction(Effect.gen(function*() {
        const clock = yield* dialect.now
        // Lock first, then read the clock and any earlier receipt of this commit.
        const rows = yield* sql<HeadRow>`WITH s AS (
            SELECT head_seq, active_turn_id, open_callbacks, title, archived, closed,
              lease_owner, lease_epoch, lease_expires_at
            FROM troupe_sessions WHERE id = ${commit.sessionId} ${dialect.lockRow}
          )
          SELECT s.*, ${clock} AS now, c.session_id AS replay_session, c.first_seq AS replay_first,
            c.head_seq AS replay_head, c.at AS replay_at
          FROM s LEFT JOIN troupe_commits c ON c.commit_id = ${commit.commitId}`
        if (rows.length === 0) {
          // The commit may name an unknown session, or replay one that belongs elsewhere.
          return yield* new SessionNotFound({ sessionId: commit.sessionId })
        }
        const row = rows[0]!
        if (row.replay_session !== null) {
          if (row.replay_session !== commit.sessionId) {
            return yield* new Conflict({
              entity: "commit",
              key: commit.commitId,
              reason: "commitId already used by another session"
            })
          }
          return new CommitReceipt({
            commitId: commit.commitId,
            sessionId: commit.sessionId,
            firstSeq: Number(row.replay_first),
            headSeq: Number(row.replay_head),
            at: Number(row.replay_at)
          })
        }
        const at = Number(row.now)
        if (
          row.lease_owner !== commit.owner || Number(row.lease_epoch) !== commit.epoch ||
          Number(row.lease_expires_at) <= at
        ) {
          return yield* new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner })
        }
        const headSeq = Number(row.head_seq)
        if (headSeq !== commit.expectedHeadSeq) {
          return yield* new SequenceConflict({
            sessionId: commit.sessionId,
            expected: commit.expectedHeadSeq,
            actual: headSeq
          })
        }
        if (commit.consumes.length > 0) {
          const consumed = yield* sql`UPDATE troupe_inbox SET consumed = 1
            WHERE session_id = ${commit.sessionId} AND consumed = 0 AND ${sql.in("input_id", commit.consumes)}
            RETURNING input_id`
          if (consumed.length !== new Set(commit.consumes).size || consumed.length !== commit.consumes.length) {
            const got = new Set(consumed.map((r) => (r as { input_id: string }).input_id))
            const missing = commit.consumes.find((id) => !got.has(id)) ?? commit.consumes[0]!
            // Failing here rolls the whole transaction back.
            return yield* new Conflict({ entity: "input", key: missing, reason: "not a ready inbox item" })
          }
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
          yield* sql`INSERT INTO troupe_log ${
            sql.insert(commit.records.map((body, i) => ({
              session_id: commit.sessionId,
              seq: headSeq + 1 + i,
              at,
              commit_id: commit.commitId,
              body: JSON.stringify(encodeRecord(body))
            })))
          }`
        }
        if (projection.operations.length > 0) {
          yield* sql`INSERT INTO troupe_operations ${
            sql.insert(projection.operations.map((change) => ({
              operation_id: change.operationId,
              session_id: commit.sessionId,
              turn_id: change.turnId,
              kind: change.start?.kind ?? "tool",
              name: change.start?.name ?? "",
              status: change.end?.status ?? "started",
              input: jsonOrNull(change.start?.input),
              output: jsonOrNull(change.end?.output),
              is_error: change.end?.isError ? 1 : 0,
              started_seq: change.start?.seq ?? change.end!.seq,
              ended_seq: change.end?.seq ?? null
            })))
          } ON CONFLICT (operation_id) DO UPDATE SET status = excluded.status, output = excluded.output,
            is_error = excluded.is_error, ended_seq = excluded.ended_seq`
        }
        if (projection.callbacksOpened.length > 0) {
          yield* sql`INSERT INTO troupe_callbacks ${
            sql.insert(projection.callbacksOpened.map((callback) => ({
              callback_id: callback.callbackId,
              session_id: commit.sessionId,
              turn_id: callback.turnId,
              operation_id: callback.operationId,
              kind: callback.kind,
              request: JSON.stringify(callback.request ?? null),
              opened_seq: callback.openedSeq,
              opened_at: callback.openedAt
            })))
          }`
        }
        let closedCallbacks = 0
        if (projection.callbacksClosed.length > 0) {
          const deleted = yield* sql`DELETE FROM troupe_callbacks
            WHERE session_id = ${commit.sessionId} AND ${sql.in("callback_id", projection.callbacksClosed)}
            RETURNING callback_id`
          closedCallbacks = deleted.length
        }
        const head = projection.head
        yield* sql`UPDATE troupe_sessions SET head_seq = ${head.headSeq}, active_turn_id = ${head.activeTurnId},
          open_callbacks = ${head.openCallbacks - closedCallbacks}, title = ${head.title},
          archived = ${head.archived ? 1 : 0}, closed = ${head.closed ? 1 : 0},
          ready_count = ready_count - ${commit.consumes.length}, updated_at = ${at}
          WHERE id = ${commit.sessionId}`
        const receipt = new CommitReceipt({
          commitId: commit.commitId,
          sessionId: commit.sessionId,
          firstSeq: headSeq + 1,
          headSeq: head.headSeq,
          at
        })
        yield* sql`INSERT INTO troupe_commits ${
          sql.insert({
            commit_id: commit.commitId,
            session_id: commit.sessionId,
            first_seq: receipt.firstSeq,
            head_seq: receipt.headSeq,
            at
          })
        }`
        return receipt
      }))
    }, unavailable("append"))

    const readLog = Effect.fn("SessionStore.readLog")(function*(
      sessionId: SessionId,
      options?: { readonly after?: number | undefined; readonly limit?: number | undefined }
    ) {
      const after = options?.after ?? 0
      const limit = options?.limit ?? 500
      const rows = yield* sql<{ seq: number | string; at: number | string; commit_id: string; body: string }>`
        SELECT seq, at, commit_id, body FROM troupe_log
        WHERE session_id = ${sessionId} AND seq > ${after} ORDER BY seq LIMIT ${limit + 1}`
      const page = rows.length > limit ? rows.slice(0, limit) : rows
      const records = page.map((row) =>
        new LogRecord({
          sessionId,
          seq: Number(row.seq),
          at: Number(row.at),
          commitId: CommitId.make(row.commit_id),
          body: decodeRecord(JSON.parse(row.body))
        }, { disableValidation: true })
      )
      return new LogPage({
        records,
        cursor: records.length > 0 ? records[records.length - 1]!.seq : after,
        more: rows.length > limit
      }, { disableValidation: true })
    }, unavailable("readLog"))

    const operations = Effect.fn("SessionStore.operations")(function*(sessionId: SessionId, turnId?: TurnId) {
      const rows = yield* sql<{
        operation_id: string
        turn_id: string
        kind: string
        name: string
        status: string
        input: string | null
        output: string | null
        is_error: number
        started_seq: number | string
        ended_seq: number | string | null
      }>`SELECT operation_id, turn_id, kind, name, status, input, output, is_error, started_seq, ended_seq
        FROM troupe_operations WHERE session_id = ${sessionId}
        ${turnId === undefined ? sql.literal("") : sql`AND turn_id = ${turnId}`} ORDER BY started_seq`
      return yield* Effect.forEach(rows, (row) =>
        Schema.decodeUnknown(OperationReceipt)({
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

    const openCallbacks = Effect.fn("SessionStore.openCallbacks")(function*(sessionId: SessionId) {
      const rows = yield* sql<{
        callback_id: string
        turn_id: string
        operation_id: string
        kind: string
        request: string
        opened_seq: number | string
        opened_at: number | string
      }>`SELECT callback_id, turn_id, operation_id, kind, request, opened_seq, opened_at
        FROM troupe_callbacks WHERE session_id = ${sessionId} ORDER BY opened_seq`
      return yield* Effect.forEach(rows, (row) =>
        Schema.decodeUnknown(OpenCallback)({
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

    const runnable = Effect.fn("SessionStore.runnable")(function*(options?: { readonly limit?: number | undefined }) {
      const clock = yield* dialect.now
      const rows = yield* sql<{ id: SessionId }>`SELECT id FROM troupe_sessions
        WHERE closed = 0 AND (lease_owner IS NULL OR lease_expires_at <= ${clock})
          AND (active_turn_id IS NOT NULL OR ready_count > 0)
        ORDER BY id LIMIT ${options?.limit ?? 100}`
      return rows.map((row) => row.id)
    }, unavailable("runnable"))

    return SessionStore.of({
      now,
      create,
      get,
      list,
      push,
      readInbox,
      acquire,
      renew,
      release,
      append,
      readLog,
      operations,
      openCallbacks,
      runnable
    })
  })
