/**
 * A lease's local deadline: how long this process may go on starting
 * operations (a model call, a tool body, a callback, a spawn) on a lease
 * without asking the store again, by its own monotonic clock.
 *
 * The store's expiry is the store's clock at a renewal plus the TTL; the
 * renewal ran after this process asked for it, so "when it was asked for +
 * TTL" is never later than the store's expiry, whatever the two clocks say
 * (only their rates matter, and those agree to parts per million). A margin
 * below that covers the moments between the check and the operation's start.
 * Past the deadline the lease may already be someone else's: the actor renews
 * it first, or stops with `LeaseLost`. A process that was paused (SIGSTOP, a
 * blocked event loop, a slow disk) finds its deadline past when it wakes,
 * before anything it does could reach the outside (decision 0031).
 *
 * Pure: times are milliseconds of a monotonic clock (`monotonicMillis`, which
 * under the test clock is the test clock).
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"

/** A lease's local deadline; `confirmedAt` only moves forward. */
export interface LeaseDeadline {
  readonly ttlMillis: number
  readonly marginMillis: number
  /** When the newest renewal the store confirmed was asked for (monotonic ms). */
  confirmedAt: number
}

/** The margin kept below the TTL: a fifth of it, at most two seconds (renewals come every third, so it is rarely reached). */
export const marginFor = (ttlMillis: number): number => Math.min(ttlMillis / 5, 2000)

/** The deadline of a lease of `ttlMillis` taken (or renewed) by a request made at `confirmedAt`. */
export const make = (ttlMillis: number, confirmedAt: number, marginMillis = marginFor(ttlMillis)): LeaseDeadline => ({
  ttlMillis,
  marginMillis,
  confirmedAt
})

/** Records a renewal the store confirmed, asked for at `askedAt`; an older one than the newest changes nothing. */
export const confirm = (deadline: LeaseDeadline, askedAt: number): void => {
  if (askedAt > deadline.confirmedAt) deadline.confirmedAt = askedAt
}

/** The time from which no operation starts on the lease without renewing it first. */
export const at = (deadline: LeaseDeadline): number => deadline.confirmedAt + deadline.ttlMillis - deadline.marginMillis

/** Whether an operation may start at `now` without asking the store. */
export const isLive = (deadline: LeaseDeadline, now: number): boolean => now < at(deadline)

/** Milliseconds of `clock`'s monotonic time (`process.hrtime` in Node; the test clock's time under `TestClock`). */
export const monotonicMillis = (clock: Clock.Clock): number => Number(clock.unsafeCurrentTimeNanos()) / 1e6
