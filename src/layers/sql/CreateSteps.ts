/**
 * The statements of `create`: a new session row and its `session_created`
 * record (a spawn's child row is written by the same `insertSession`).
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import { Conflict, SessionNotFound } from "../../schema/Errors.js"
import { type SessionId } from "../../schema/Ids.js"
import { toJsonText } from "../../schema/Record.js"
import { principalFields } from "../../schema/Principal.js"
import { Session } from "../../schema/Session.js"
import { agentJson, createdRecord, draft, printOf, tenantOf } from "../../internal/SessionDraft.js"
import { type CreateSession } from "../../services/SessionStore.js"
import * as SqlStatements from "./SqlStatements.js"
import { boundClock, type Clock } from "./Dialect.js"
import type { Step, Steps } from "./Steps.js"
import { encodeBudgets, encodePolicy, sessionColumns, sessionOf, type SessionRow } from "./Rows.js"

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

/** The insert of a new session row; it returns the id, or no row when the id, key or alias is taken. */
export const insertSession = (row: NewRow): Step => {
  const session = row.session
  return {
    text: insertSessionText(row.at.text),
    params: [
      session.id,
      session.principal.workspaceId.toLowerCase(),
      row.tenant,
      JSON.stringify(principalFields(session.principal)),
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
export const createdStep = (session: Session, at: Clock): Step => ({
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

/** The store clock read in the transaction, where it is not a value of this process already. */
function* storeNow(clock: Clock): Generator<Step, number, ReadonlyArray<never>> {
  const rows: ReadonlyArray<{ now: number | string }> = yield { text: `SELECT ${clock.text} AS now`, params: clock.params }
  return Number(rows[0]!.now)
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
  const at = clock.value ?? (yield* storeNow(clock))
  const session = draft(id, input, parent?.session, at)
  const inserted: ReadonlyArray<unknown> = yield insertSession({
    session,
    tenant,
    path: `${parent?.path ?? "/"}${id}/`,
    idempotencyKey: input.idempotencyKey ?? null,
    fingerprint: print,
    at: boundClock(at),
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
  yield createdStep(session, boundClock(at))
  return Either.right(session)
}
