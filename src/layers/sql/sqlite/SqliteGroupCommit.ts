/**
 * Group commit on SQLite: when several sessions write at once, their write
 * transactions (commits, pushes, creates) run in one `BEGIN IMMEDIATE …
 * COMMIT`, each inside its own savepoint. Each one still runs all its own
 * checks (its lease epoch, its expected head, its inputs) against the rows as
 * the transactions before it in the batch left them, and a refusal rolls back
 * its savepoint only: the others commit. What is saved is the `COMMIT` (the
 * WAL frames and locks, the larger part of a small transaction's cost) and
 * the pages several sessions share (their rows of `troupe_sessions`, the
 * leaves their log rows land in).
 *
 * It is off unless the layer is asked for it (`groupCommit`; decision 0018).
 * A batch forms only when company is likely: a transaction for one session
 * that comes within `recentMicros` of a transaction of another session leads
 * a batch and waits for the event loop's current turn to end (every fiber
 * that can run has run; a `setImmediate`), or until `maxBatch` transactions
 * joined, whichever is first. A lone writer (one session's turn after
 * another, or one transaction in a quiet while) commits at once, as before.
 * Nothing is acknowledged before its batch's `COMMIT` returned: durability is
 * that of a transaction of its own.
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/** How group commit is tuned. */
export interface Options {
  /** At most this many transactions in one batch (default 64). */
  readonly maxBatch?: number | undefined
  /** A transaction leads a batch when another session's came less than this long before (µs; default 1000). */
  readonly recentMicros?: number | undefined
  /** Told the size of every batch that ran (for benchmarks and diagnostics). */
  readonly onBatch?: ((size: number) => void) | undefined
}

/** One transaction waiting in a batch: runs inside the batch's transaction, throwing what `run` throws. */
interface Waiting {
  readonly run: () => unknown
  done: boolean
  outcome: Outcome | undefined
  readonly resume: Array<() => void>
}

/** What the group needs from the layer. */
export interface Driver {
  /** Runs `batch` (which calls every item's `run`, each in a savepoint) in one `BEGIN IMMEDIATE` transaction, now. */
  readonly inOneTransaction: (batch: () => void) => void
  /** Runs `run` in a savepoint of the open transaction; throws what it throws, after rolling the savepoint back. */
  readonly inSavepoint: (run: () => unknown) => unknown
  /** Whether the connection is still inside the batch's transaction (a failing statement may have ended it). */
  readonly inTransaction: () => boolean
  /** Runs `now` when nothing else holds the connection (the layer's `atomic`). */
  readonly atomic: <A, E>(now: () => Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** `atomic` for a caller that is already running in its fiber: `now` is called at once when nothing else holds the connection. */
  readonly atomicNow: <A, E>(now: () => Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** Whether nothing else holds the connection now (no transaction of several Effect steps is open): `atomicNow` would call at once. */
  readonly idle: () => boolean
}

/** How a transaction went: its value, or what it threw. */
export type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown }

// A batch's parts are functions of their own, with indexed loops (a `for…of` compiles to the
// iterator protocol inside a try/finally): one body holding them all compiled into one large piece.

/** Runs each item in a savepoint of the batch's transaction, keeping its outcome. */
const runEach = (driver: Driver, pending: ReadonlyArray<Waiting>) => {
  for (let i = 0; i < pending.length; i++) {
    const item = pending[i]!
    try {
      item.outcome = { ok: true, value: driver.inSavepoint(item.run) }
    } catch (error) {
      // A failure that ended the whole transaction takes the batch with it.
      if (!driver.inTransaction()) throw error
      item.outcome = { ok: false, error }
    }
  }
}

/** Marks every item done and resumes its waiters. */
const resumeAll = (pending: ReadonlyArray<Waiting>) => {
  for (let i = 0; i < pending.length; i++) {
    const item = pending[i]!
    item.done = true
    for (let r = 0; r < item.resume.length; r++) item.resume[r]!()
  }
}

/**
 * The group: a function `(key, solo, grouped, settle)` that returns the
 * effect of one write transaction for the session `key`. `solo(clock)` runs
 * it alone (as the layer did before); `grouped(clock)` is its body inside a
 * batch's transaction (it throws a refusal, which rolls back its savepoint),
 * and `settle` turns the body's outcome into the caller's effect. Nothing
 * happens when the function is called: the returned effect decides on company
 * when it runs (in its one `Effect.clockWith` step, which also gives the
 * transaction the fiber's clock), and a lone transaction runs in that same
 * step (no `Effect.suspend` of its own). An effect built early and run later,
 * or run twice, decides each time it runs.
 */
export const make = (driver: Driver, options: Options = {}) => {
  const maxBatch = options.maxBatch ?? 64
  const recentMicros = options.recentMicros ?? 1000
  let lastKey: string | undefined
  let lastAt = -Infinity
  let forming: Array<Waiting> | undefined

  /** Runs the batch `items` now, in one transaction; every item gets its outcome. */
  const runBatch = (items: Array<Waiting>) => {
    if (forming === items) forming = undefined
    const pending = items.filter((item) => !item.done)
    if (pending.length === 0) return
    try {
      driver.inOneTransaction(() => runEach(driver, pending))
    } catch (error) {
      for (let i = 0; i < pending.length; i++) pending[i]!.outcome = { ok: false, error }
    }
    resumeAll(pending)
    try {
      options.onBatch?.(pending.length)
    } catch {
      // An observer's failure is not the writers'.
    }
  }

  const flush = (items: Array<Waiting>) => driver.atomic(() => Effect.sync(() => runBatch(items)))

  const outcomeOf = <A, E>(item: Waiting, settle: (outcome: Outcome) => Effect.Effect<A, E | SqlError>) =>
    Effect.suspend(() => settle(item.outcome!))

  // The waits below are uninterruptible: once queued, the transaction runs, and its caller hears how.

  /** Joins the batch forming: resumed with `item`'s outcome by whoever runs the batch. */
  const joined = <A, E>(item: Waiting, settle: (outcome: Outcome) => Effect.Effect<A, E | SqlError>) =>
    Effect.uninterruptible(Effect.async<A, E | SqlError>((resume) => {
      if (item.done) return resume(settle(item.outcome!))
      item.resume.push(() => resume(settle(item.outcome!)))
    }))

  /**
   * Leads the batch `items` (its first, `item`): once the event loop's current turn has ended (every
   * fiber that could run has had its go; a `setImmediate`), runs it right there when nothing else
   * holds the connection, else under the lock (`flush`); resumed with `item`'s outcome.
   */
  const led = <A, E>(items: Array<Waiting>, item: Waiting, settle: (outcome: Outcome) => Effect.Effect<A, E | SqlError>) =>
    Effect.uninterruptible(Effect.async<A, E | SqlError>((resume) => {
      setImmediate(() => {
        if (!driver.idle()) return resume(Effect.zipRight(flush(items), outcomeOf(item, settle)))
        runBatch(items)
        resume(settle(item.outcome!))
      })
    }))

  /** Runs one transaction: alone, or in the batch forming (leading one when company is likely). Called as the fiber runs. */
  const decide = <A, E>(
    key: string | undefined,
    solo: () => Effect.Effect<A, E | SqlError>,
    grouped: () => unknown,
    settle: (outcome: Outcome) => Effect.Effect<A, E | SqlError>
  ): Effect.Effect<A, E | SqlError> => {
    const now = performance.now() * 1000
    const company = forming !== undefined || (key !== undefined && lastKey !== undefined && key !== lastKey && now - lastAt < recentMicros)
    lastKey = key
    lastAt = now
    if (!company) return driver.atomicNow(solo)
    const item: Waiting = { run: grouped, done: false, outcome: undefined, resume: [] }
    if (forming !== undefined) {
      const batch = forming
      batch.push(item)
      return batch.length >= maxBatch
        ? Effect.zipRight(Effect.uninterruptible(flush(batch)), outcomeOf(item, settle))
        : joined(item, settle)
    }
    const batch = [item]
    forming = batch
    return led(batch, item, settle)
  }

  return <A, E>(
    key: string | undefined,
    solo: (clock: Clock.Clock) => Effect.Effect<A, E | SqlError>,
    grouped: (clock: Clock.Clock) => unknown,
    settle: (outcome: Outcome) => Effect.Effect<A, E | SqlError>
  ): Effect.Effect<A, E | SqlError> =>
    Effect.clockWith((clock) => decide<A, E>(key, () => solo(clock), () => grouped(clock), settle))
}
