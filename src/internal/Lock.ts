/**
 * Mutual exclusion for the actors, in fewer Effect steps than a semaphore of
 * one permit: a free lock is taken in one uninterruptible region with no
 * extra fiber steps (~7 Effect steps a round, against ~20 for
 * `withPermitsIfAvailable` and ~30 for `withPermits`), and the actors take
 * their locks several times per turn. A held lock queues its waiters in
 * arrival order and hands itself to the first on release.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"

/** Runs an effect holding the lock: at once when it is free, else once it is handed over. */
export type Exclusive = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** A lock: called, it runs an effect holding it, interruptible as the caller was. */
export interface Lock extends Exclusive {
  /**
   * Runs an effect holding the lock, uninterruptible once it holds it (waiting for it stays
   * interruptible): for a short write that must finish once begun, in two Effect steps fewer
   * than the lock around `Effect.uninterruptible`.
   */
  readonly atomic: Exclusive
}

interface Waiter {
  /** Set when the lock was handed to this waiter: from then on it must be released. */
  granted: boolean
  resume: ((effect: Effect.Effect<void>) => void) | undefined
}

/** A new, free lock. */
export const make = (): Lock => {
  let held = false
  const waiting: Array<Waiter> = []
  const release = () => {
    const next = waiting.shift()
    if (next === undefined) {
      held = false
      return
    }
    next.granted = true
    next.resume!(Effect.void)
  }
  // Runs `effect` (interruptible as the caller was) and releases the lock however it ends.
  const holding = <A, E, R>(
    restore: <AX, EX, RX>(effect: Effect.Effect<AX, EX, RX>) => Effect.Effect<AX, EX, RX>,
    effect: Effect.Effect<A, E, R>
  ) =>
    Effect.matchCauseEffect(restore(effect), {
      onFailure: (cause) => {
        release()
        return Effect.failCause(cause)
      },
      onSuccess: (value) => {
        release()
        return Effect.succeed(value)
      }
    })
  const uninterruptibly = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect
  const take = (atomic: boolean) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.uninterruptibleMask((restore) => {
      if (!held) {
        held = true
        return holding(atomic ? uninterruptibly : restore, effect)
      }
      const waiter: Waiter = { granted: false, resume: undefined }
      const wait = Effect.async<void>((resume) => {
        waiter.resume = resume
        waiting.push(waiter)
        return Effect.sync(() => {
          const i = waiting.indexOf(waiter)
          if (i >= 0) waiting.splice(i, 1)
        })
      })
      return Effect.matchCauseEffect(restore(wait), {
        // Interrupted while waiting: a lock handed over meanwhile goes to the next waiter.
        onFailure: (cause) => {
          if (waiter.granted) release()
          return Effect.failCause(cause)
        },
        onSuccess: () => holding(atomic ? uninterruptibly : restore, effect)
      })
    })
  return Object.assign(take(false), { atomic: take(true) })
}
