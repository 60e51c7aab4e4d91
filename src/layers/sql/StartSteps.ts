/**
 * The statements that take a session's lease: `acquire`, and `start`
 * (the lease, the session row, the log's first page and the inbox at once).
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { SessionNotFound } from "../../schema/Errors.js"
import { type SessionId } from "../../schema/Ids.js"
import { type ActorStart } from "../../services/SessionStore.js"
import * as SqlStatements from "./SqlStatements.js"
import type { Clock } from "./Dialect.js"
import type { Step, Steps } from "./Steps.js"
import { leaseOf, sessionColumns, sessionOf, type SessionRow } from "./Rows.js"
import { inboxItemsOf, type InboxRow, inboxStep, logPageOf, type LogRow, logStep } from "./LogSteps.js"

const acquireText = SqlStatements.shaped((clockText: string, columns: string) =>
  `UPDATE troupe_sessions
  SET lease_owner = ?, lease_epoch = lease_epoch + 1, lease_expires_at = ${clockText} + ?
  WHERE id = ? AND (lease_owner IS NULL OR lease_expires_at <= ${clockText})
  RETURNING ${columns}lease_epoch, lease_expires_at`
)

/**
 * Takes the lease of `sessionId` when it is free or expired (bumping the
 * epoch), reading the session row back in the same statement: `acquire` and
 * `start`. No row: the lease is held, or there is no such session.
 */
export const acquireStep = (sessionId: SessionId, owner: string, ttlMillis: number, clock: Clock, columns: string): Step => ({
  text: acquireText(clock.text, columns),
  params: [owner, ...clock.params, ttlMillis, sessionId, ...clock.params]
})

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
