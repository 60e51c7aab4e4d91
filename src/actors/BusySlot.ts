/**
 * An actor's permit to be busy, one of the host's shared `maxBusyActors`: an
 * actor holds it from waking until it is idle with no running turn, and a turn
 * parked on a callback or on the user gives it back meanwhile. The slot knows
 * whether it is held, so giving it twice, or giving one never taken, is a no-op,
 * and closing the scope it was made in gives it back.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"

/** One actor's busy slot. */
export interface BusySlot {
  /** Waits for a permit, unless this slot holds one. */
  readonly take: Effect.Effect<void>
  /** Gives the permit back, if held. */
  readonly give: Effect.Effect<void>
  /** Runs `effect` without the permit (it is parked), then takes it again. */
  readonly park: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Whether the permit is held now (false while a turn is parked). */
  readonly held: () => boolean
}

/**
 * A slot over the host's permits; given back when `scope` closes. `taken`: the
 * caller already took one permit for it (the host does, before it starts an actor).
 */
export const make = (permits: Effect.Semaphore, scope: Scope.Scope, taken = false): Effect.Effect<BusySlot> =>
  Effect.suspend(() => {
    let held = taken
    const take = Effect.suspend(() =>
      held ? Effect.void : Effect.zipRight(permits.take(1), Effect.sync(() => (held = true)))
    )
    const give = Effect.suspend(() => {
      if (!held) return Effect.void
      held = false
      return permits.release(1)
    })
    // Captures all it uses: no need for `Effect.addFinalizer`'s restoring of fiber refs.
    return Effect.as(Scope.addFinalizer(scope, give), {
      take,
      give,
      park: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.zipRight(give, Effect.zipLeft(effect, take)),
      held: () => held
    })
  })
