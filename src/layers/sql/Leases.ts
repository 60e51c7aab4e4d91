/**
 * The SQL store's lease writes: take (`acquire`, `start`), renew, release, and
 * the sessions a worker may claim (`runnable`). All but `start` are one statement.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { LeaseLost, SessionNotFound } from "../../schema/Errors.js"
import { type SessionId } from "../../schema/Ids.js"
import { Lease } from "../../schema/Lease.js"
import { type StartLimits } from "../../services/SessionStore.js"
import type { Clock } from "./Dialect.js"
import { leaseOf } from "./Rows.js"
import { unavailable } from "./Unavailable.js"
import { acquireStep, startSteps } from "./StartSteps.js"
import type { Runner } from "./Runner.js"

/** Leases renewed by one statement (three parameters each). */
const renewChunk = 200

/** The leases of a store run by `runner`. */
export const make = (runner: Runner) => {
  const { dialect, query, drive } = runner

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

  return { acquire, start, renew, renewAll, release, releaseIdle, runnable }
}
