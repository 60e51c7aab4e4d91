/**
 * A semaphore whose waiters queue first come, first served, and a release
 * wakes only the waiters it can satisfy. Effect's own semaphore wakes every
 * waiter on each release (each looks again and waits again), which is
 * quadratic when thousands of actors wait for a host's `maxBusyActors`: a
 * fan-out of 10,000 sessions over 64 slots spent most of its time there.
 *
 * A release hands the permits to the head of the queue (reserved for it); a
 * waiter interrupted before its take returns gives its reservation back, so
 * no permit is ever lost. It has the shape of `Effect.Semaphore`, and knows
 * its load (`busy`): what a worker of a pool reads to decide what to claim.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"

interface Waiter {
  readonly n: number
  /** Set once a release reserved its permits and woke it. */
  granted: boolean
  wake: (() => void) | undefined
}

/** A semaphore that knows how many of its permits are taken or waited for. */
export interface Permits extends Effect.Semaphore {
  /** Permits taken (or reserved for a woken waiter) plus permits waited for, right now. */
  readonly busy: () => number
  /** Takes `n` permits now if they are free and nobody waits before; false (nothing taken) otherwise. */
  readonly tryTake: (n: number) => boolean
}

/** A first-come-first-served semaphore with `permits` permits. */
export const make = (permits: number): Permits => {
  let total = permits
  let taken = 0
  // Permits asked for by the waiters still queued.
  let waiting = 0
  // Waiters in arrival order; `head` is the first still queued (the array is compacted now and then).
  let queue: Array<Waiter | undefined> = []
  let head = 0

  const first = (): Waiter | undefined => {
    while (head < queue.length && queue[head] === undefined) head++
    if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head)
      head = 0
    }
    return queue[head]
  }

  /** Wakes the waiters at the head of the queue that the free permits satisfy, reserving their permits. */
  const grant = () => {
    for (let next = first(); next !== undefined && total - taken >= next.n; next = first()) {
      queue[head++] = undefined
      waiting -= next.n
      taken += next.n
      next.granted = true
      next.wake?.()
    }
  }

  const giveBack = (n: number) => {
    taken = Math.max(0, taken - n)
    grant()
  }

  const tryTake = (n: number): boolean => {
    if (first() !== undefined || total - taken < n) return false
    taken += n
    return true
  }

  const take = (n: number): Effect.Effect<number> =>
    Effect.suspend(() => {
      if (tryTake(n)) return Effect.succeed(n)
      const waiter: Waiter = { n, granted: false, wake: undefined }
      queue.push(waiter)
      waiting += n
      return Effect.async<number>((resume) => {
        if (waiter.granted) return resume(Effect.succeed(n))
        waiter.wake = () => resume(Effect.succeed(n))
      }).pipe(
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            if (waiter.granted) return giveBack(n)
            const at = queue.indexOf(waiter, head)
            if (at < 0) return
            queue[at] = undefined
            waiting -= n
          })
        )
      )
    })

  const release = (n: number): Effect.Effect<number> =>
    Effect.sync(() => {
      giveBack(n)
      return total - taken
    })

  return {
    busy: () => taken + waiting,
    tryTake,
    take,
    release,
    releaseAll: Effect.sync(() => {
      taken = 0
      grant()
      return total
    }),
    resize: (next) =>
      Effect.sync(() => {
        total = next
        grant()
      }),
    withPermits: (n) => (self) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(restore(take(n)), (got) => Effect.ensuring(restore(self), release(got)))
      ),
    withPermitsIfAvailable: (n) => (self) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          if (!tryTake(n)) return Effect.succeedNone
          return Effect.ensuring(Effect.asSome(restore(self)), release(n))
        })
      )
  }
}
