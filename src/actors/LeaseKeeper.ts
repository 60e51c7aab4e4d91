/**
 * The heartbeat of a session actor: renews its lease every third of the TTL
 * and fails with `LeaseLost` the moment a renewal is refused, so the actor
 * stops before it could write with a stale epoch.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Ref, Schedule } from "effect"
import type { LeaseLost, StoreUnavailable } from "../schema/Errors.js"
import type { Lease } from "../schema/Lease.js"
import { SessionStore } from "../services/SessionStore.js"

/**
 * Renews `lease` forever; never succeeds. Fails with `LeaseLost` when the
 * store refuses a renewal; a store outage is retried for one renewal period,
 * then fails with `StoreUnavailable`. Either way the actor must stop.
 */
export const run = (lease: Ref.Ref<Lease>, ttl: Duration.Duration) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const every = Duration.divide(ttl, 3).pipe((d) => (d._tag === "Some" ? d.value : ttl))
    const renew = Effect.flatMap(Ref.get(lease), (current) =>
      store.renew(current, Duration.toMillis(ttl)).pipe(Effect.flatMap((next) => Ref.set(lease, next))))
    return yield* renew.pipe(
      Effect.retry({
        while: (error: LeaseLost | StoreUnavailable) => error._tag === "StoreUnavailable",
        schedule: Schedule.spaced(Duration.divide(every, 4).pipe((d) => (d._tag === "Some" ? d.value : every))).pipe(
          Schedule.upTo(every)
        )
      }),
      Effect.repeat(Schedule.spaced(every)),
      Effect.delay(every),
      Effect.flatMap(() => Effect.never)
    )
  })
