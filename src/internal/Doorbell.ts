/**
 * An actor's doorbell: "something may have changed, look again", with no
 * fiber and no queue behind it. Rings while nobody waits are kept as one (a
 * look covers them all); `expire` is the host's "you have been idle long
 * enough", which a waiting actor sees only if nothing rang meanwhile.
 *
 * It replaces a sliding queue of one plus a timed take per idle actor: an
 * idle actor is then one suspended fiber, and its timeout is kept by the
 * host's `Idleness` (one fiber for every actor).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"

/** What a wait ended with. */
export type Woken = "rung" | "expired"

/** One actor's doorbell. */
export interface Doorbell {
  /** Wakes the waiter, or is kept for the next wait: something outside the actor may have changed (its inbox). */
  readonly ring: () => void
  /** Wakes like `ring`, for a change the actor made itself (its turn ended): not counted in `rings`. */
  readonly nudge: () => void
  /** How many times it was rung (not nudged) so far: an actor that read its inbox at `n` need not read it again while it is `n`. */
  readonly rings: () => number
  /** Ends the current wait (or the next, when nobody waits) with "expired", unless it is rung first. */
  readonly expire: () => void
  /** Forgets an expiry no wait took yet (the actor is busy again). */
  readonly clearExpiry: () => void
  /** Whether a ring is kept that no wait took yet. */
  readonly pending: () => boolean
  /** Waits for a ring (a kept one at once) or an expiry. */
  readonly wait: Effect.Effect<Woken>
}

/** A new doorbell, not rung. */
export const make = (): Doorbell => {
  let rung = false
  let expired = false
  let count = 0
  let waiter: ((woken: Woken) => void) | undefined
  const wake = (woken: Woken) => {
    const resume = waiter!
    waiter = undefined
    resume(woken)
  }
  const nudge = () => {
    if (waiter !== undefined) wake("rung")
    else rung = true
  }
  return {
    ring: () => {
      count++
      nudge()
    },
    nudge,
    rings: () => count,
    expire: () => {
      if (waiter !== undefined) wake("expired")
      else expired = true
    },
    clearExpiry: () => {
      expired = false
    },
    pending: () => rung,
    wait: Effect.async<Woken>((resume) => {
      if (rung || expired) {
        const woken: Woken = rung ? "rung" : "expired"
        rung = false
        expired = false
        return resume(Effect.succeed(woken))
      }
      waiter = (woken) => resume(Effect.succeed(woken))
      return Effect.sync(() => {
        waiter = undefined
      })
    })
  }
}
