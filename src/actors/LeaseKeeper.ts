/**
 * The heartbeat of a host's actors: one fiber renews every lease the host
 * holds, each every third of the TTL, and tells an actor the moment its
 * renewal is refused (`LeaseLost`), so it stops before it could write with a
 * stale epoch. A store outage is retried every quarter period for one renewal
 * period, then the actor is told `StoreUnavailable`. Either way it must stop.
 *
 * One keeper per host instead of one fiber per actor: an idle actor costs no
 * timer of its own. Every lease is renewed the same period after its last
 * renewal, so the regular entries stay in due order as they are inserted and
 * the fiber sleeps until the first one only; the few being retried are kept
 * beside them. Whatever is due at once is renewed in one store call
 * (`renewAll`: a statement per few hundred leases), so a host with thousands
 * of idle actors spends a statement, not thousands, on each tick.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import type { LeaseLost, StoreUnavailable } from "../schema/Errors.js"
import { Lease } from "../schema/Lease.js"
import * as Doorbell from "../internal/Doorbell.js"
import { SessionStore } from "../services/SessionStore.js"
import * as LeaseDeadline from "./LeaseDeadline.js"

/** Why a kept lease ended: the actor holding it must stop. */
export type Loss = LeaseLost | StoreUnavailable

/** The host's lease keeper. */
export interface LeaseKeeper {
  /**
   * Renews `lease` (updating the ref) until the scope closes; `lost` is called
   * once if a renewal is refused or the store stays unavailable for a period.
   * Each renewal confirmed moves `deadline` on (to when it was asked for).
   */
  readonly keep: (
    lease: Ref.Ref<Lease>,
    lost: (loss: Loss) => Effect.Effect<void>,
    deadline?: LeaseDeadline.LeaseDeadline
  ) => Effect.Effect<void, never, Scope.Scope>
  /** `keep`, for as long as `scope` is open. */
  readonly keepIn: (
    scope: Scope.Scope,
    lease: Ref.Ref<Lease>,
    lost: (loss: Loss) => Effect.Effect<void>,
    deadline?: LeaseDeadline.LeaseDeadline
  ) => Effect.Effect<void>
  /** Renews forever; the host forks it in its scope. */
  readonly run: Effect.Effect<never>
}

interface Entry {
  readonly lease: Ref.Ref<Lease>
  readonly lost: (loss: Loss) => Effect.Effect<void>
  readonly deadline: LeaseDeadline.LeaseDeadline | undefined
  /** When renewals began to fail for want of the store, if they do. */
  failingSince: number | undefined
  kept: boolean
}

/** A keeper for leases of `ttl`. */
export const make = (ttl: Duration.Duration): Effect.Effect<LeaseKeeper, never, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const clock = yield* Effect.clock
    const ttlMillis = Duration.toMillis(ttl)
    const every = ttlMillis / 3
    const retryEvery = every / 4
    // Regular entries, in due order; entries being retried, with their retry time.
    const due = new Map<Entry, number>()
    const retrying = new Map<Entry, number>()
    const someone = Doorbell.make()
    const now = () => clock.unsafeCurrentTimeMillis()

    /** The entry is no longer kept: no renewal of it will be made or applied. */
    const forget = (entry: Entry) => {
      entry.kept = false
      due.delete(entry)
      retrying.delete(entry)
    }

    // The finalizer first: interrupted before the entry is kept, there is nothing to forget.
    const keepIn: LeaseKeeper["keepIn"] = (scope, lease, lost, deadline) =>
      Effect.suspend(() => {
        const entry: Entry = { lease, lost, deadline, failingSince: undefined, kept: true }
        return Effect.map(Scope.addFinalizer(scope, Effect.sync(() => forget(entry))), () => {
          due.set(entry, now() + every)
          if (due.size === 1) someone.ring()
        })
      })

    const end = (entry: Entry, loss: Loss) =>
      Effect.suspend(() => {
        if (!entry.kept) return Effect.void
        forget(entry)
        return entry.lost(loss)
      })

    const renewed = (entry: Entry, next: Lease, askedAt: number) =>
      Effect.suspend(() => {
        if (!entry.kept) return Effect.void
        if (entry.deadline !== undefined) LeaseDeadline.confirm(entry.deadline, askedAt)
        entry.failingSince = undefined
        retrying.delete(entry)
        due.set(entry, now() + every)
        return Ref.set(entry.lease, next)
      })

    const failed = (entry: Entry, error: Loss) =>
      Effect.suspend(() => {
        if (error._tag === "LeaseLost") return end(entry, error)
        const at = now()
        const since = entry.failingSince ?? (entry.failingSince = at)
        if (at - since >= every) return end(entry, error)
        if (entry.kept) retrying.set(entry, at + retryEvery)
        return Effect.void
      })

    /** Renews `entries` in one store call: each renewed, lost, or (the store being down) retried. */
    const renew = (entries: ReadonlyArray<Entry>) => {
      // Asked for now: the store's new expiry is at least this plus the TTL.
      let askedAt = 0
      return Effect.forEach(entries, (entry) => Ref.get(entry.lease)).pipe(
        Effect.flatMap((leases) => {
          askedAt = LeaseDeadline.monotonicMillis(clock)
          return store.renewAll(leases, ttlMillis)
        }),
        Effect.matchEffect({
          onFailure: (error) => Effect.forEach(entries, (entry) => failed(entry, error), { discard: true }),
          onSuccess: (results) =>
            Effect.forEach(entries, (entry, i) => {
              const result = results[i]!
              return result instanceof Lease ? renewed(entry, result, askedAt) : failed(entry, result)
            }, { discard: true })
        })
      )
    }

    /** The entries due by `at`, taken out of their maps; the time of the next one after them otherwise. */
    const takeDue = (at: number): Array<Entry> | number => {
      const ready: Array<Entry> = []
      let next = Infinity
      for (const [entry, when] of due) {
        if (when > at) {
          next = when
          break
        }
        ready.push(entry)
      }
      for (const [entry, when] of retrying) {
        if (when <= at) ready.push(entry)
        else next = Math.min(next, when)
      }
      if (ready.length === 0) return next
      for (const entry of ready) {
        due.delete(entry)
        retrying.delete(entry)
      }
      return ready
    }

    const run = Effect.gen(function*() {
      for (;;) {
        const ready = takeDue(now())
        if (typeof ready !== "number") {
          yield* renew(ready)
          continue
        }
        if (ready === Infinity) yield* someone.wait
        else yield* Effect.sleep(Duration.millis(ready - now()))
      }
    })

    return {
      // Forgotten when the keeper's caller's scope closes (`Scope.addFinalizer`: nothing to restore).
      keep: (lease, lost, deadline) => Effect.flatMap(Effect.scope, (scope) => keepIn(scope, lease, lost, deadline)),
      keepIn,
      run
    }
  })
