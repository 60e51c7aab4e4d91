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
 * A host keeps one per session it holds, queued for a busy slot or running,
 * so it is one object with its methods on the prototype, and its `wait` is
 * made the first time an actor waits (a queued session never does).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type { Message } from "../schema/Inbox.js"
import type { Decision } from "../services/SessionHost.js"

/** What a wait ended with. */
export type Woken = "rung" | "expired"

/**
 * A message handed to an idle actor in memory (`SessionHost.offer`), and where its decision goes:
 * `decided` is called once, with the decision, or with undefined when the actor does not take it
 * (then nothing of it was written, and the sender pushes it instead).
 */
export interface Offer {
  readonly message: Message
  readonly decided: (decision: Decision | undefined) => void
}

/** One actor's doorbell. */
export class Doorbell {
  private rung = false
  private expired = false
  private count = 0
  private waiter: ((woken: Woken) => void) | undefined = undefined
  private waitEffect: Effect.Effect<Woken> | undefined = undefined
  private accepts: (() => boolean) | undefined = undefined
  private offered: Offer | undefined = undefined

  /** Wakes the waiter, or is kept for the next wait: something outside the actor may have changed (its inbox). */
  ring(): void {
    this.count++
    this.nudge()
  }

  /** Wakes like `ring`, for a change the actor made itself (its turn ended): not counted in `rings`. */
  nudge(): void {
    if (this.waiter !== undefined) this.wake("rung")
    else this.rung = true
  }

  /** How many times it was rung (not nudged) so far: an actor that read its inbox at `n` need not read it again while it is `n`. */
  rings(): number {
    return this.count
  }

  /** Ends the current wait (or the next, when nobody waits) with "expired", unless it is rung first. */
  expire(): void {
    if (this.waiter !== undefined) this.wake("expired")
    else this.expired = true
  }

  /** Forgets an expiry no wait took yet (the actor is busy again). */
  clearExpiry(): void {
    this.expired = false
  }

  /** Takes offers while `accepts` says so (the actor is between turns and caught up with its inbox); none once undefined. */
  acceptOffersWhile(accepts: (() => boolean) | undefined): void {
    this.accepts = accepts
  }

  /** Hands `offer` to the actor, waking it like a nudge; false when it takes none now (busy, or one is held). */
  offer(offer: Offer): boolean {
    if (this.accepts === undefined || this.offered !== undefined || !this.accepts()) return false
    this.offered = offer
    this.nudge()
    return true
  }

  /** The offer handed over since the last call, taken. */
  takeOffer(): Offer | undefined {
    const offer = this.offered
    this.offered = undefined
    return offer
  }

  /** Whether a ring is kept that no wait took yet. */
  pending(): boolean {
    return this.rung
  }

  /** Waits for a ring (a kept one at once) or an expiry. */
  get wait(): Effect.Effect<Woken> {
    return this.waitEffect ??= Effect.async<Woken>((resume) => {
      if (this.rung || this.expired) {
        const woken: Woken = this.rung ? "rung" : "expired"
        this.rung = false
        this.expired = false
        return resume(Effect.succeed(woken))
      }
      this.waiter = (woken) => resume(Effect.succeed(woken))
      return Effect.sync(() => {
        this.waiter = undefined
      })
    })
  }

  private wake(woken: Woken) {
    const resume = this.waiter!
    this.waiter = undefined
    resume(woken)
  }
}

/** A new doorbell, not rung. */
export const make = (): Doorbell => new Doorbell()
