/**
 * The host's busy-slot semaphore: waiters are served first come, first served;
 * a release wakes only the waiters it satisfies (no stampede of every waiter);
 * a waiter interrupted while queued leaves the queue, and one interrupted after
 * its permit was reserved gives it back, so no permit is lost; the load it
 * reports (`busy`) is the permits taken plus those waited for.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import * as Permits from "../../src/internal/Permits.js"

/** Lets every fiber that can run, run. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

describe("Permits", () => {
  it.effect("serves waiters in arrival order, one release waking one waiter", () =>
    Effect.gen(function*() {
      const permits = Permits.make(2)
      yield* permits.take(1)
      yield* permits.take(1)
      const order: Array<number> = []
      const waiters = yield* Effect.forEach(
        Array.from({ length: 500 }, (_, i) => i),
        (i) => Effect.fork(Effect.zipRight(permits.take(1), Effect.sync(() => void order.push(i))))
      )
      yield* settle
      assert.deepStrictEqual(order, [])
      yield* permits.release(1)
      yield* settle
      assert.deepStrictEqual(order, [0])
      yield* permits.release(2)
      yield* settle
      assert.deepStrictEqual(order, [0, 1, 2])
      // A newcomer does not overtake the queue, even when a permit is free for it.
      assert.isTrue(Option.isNone(yield* permits.withPermitsIfAvailable(1)(Effect.void)))
      // More permits: the rest are served, still in order.
      yield* permits.resize(502)
      yield* Effect.forEach(waiters, Fiber.join, { discard: true })
      assert.deepStrictEqual(order, Array.from({ length: 500 }, (_, i) => i))
    }))

  it.effect("an interrupted waiter leaves the queue; one interrupted once served gives its permit back", () =>
    Effect.gen(function*() {
      const permits = Permits.make(1)
      yield* permits.take(1)
      const first = yield* Effect.fork(permits.take(1))
      const second = yield* Effect.fork(permits.take(1))
      yield* settle
      // The load: one permit taken, two waited for.
      assert.strictEqual(permits.busy(), 3)
      yield* Fiber.interrupt(first)
      assert.strictEqual(permits.busy(), 2)
      // The permit goes past the interrupted waiter to the next.
      yield* permits.release(1)
      assert.strictEqual(yield* Fiber.join(second), 1)
      // Reserved for a waiter that is interrupted before it runs: the permit comes back.
      const third = yield* Effect.fork(permits.take(1))
      yield* settle
      yield* Effect.zipRight(permits.release(1), Fiber.interrupt(third))
      // Nothing held, nothing waited for: the reservation came back with the interrupted waiter.
      assert.strictEqual(permits.busy(), 0)
      assert.isTrue(Option.isSome(yield* permits.withPermitsIfAvailable(1)(Effect.void)))
      // withPermits holds one and gives it back however the effect ends.
      yield* Effect.ignore(permits.withPermits(1)(Effect.fail("no")))
      assert.strictEqual(yield* permits.take(1), 1)
    }))
  it.effect("tryTake takes free permits at once, never past the queue or the total", () =>
    Effect.gen(function*() {
      const permits = Permits.make(2)
      assert.isTrue(permits.tryTake(1))
      assert.isFalse(permits.tryTake(2))
      assert.isTrue(permits.tryTake(1))
      assert.isFalse(permits.tryTake(1))
      const waiter = yield* Effect.fork(permits.take(1))
      yield* settle
      yield* permits.release(1)
      yield* settle
      // The released permit went to the waiter, not to a newcomer.
      assert.isFalse(permits.tryTake(1))
      yield* Fiber.join(waiter)
      assert.strictEqual(permits.busy(), 2)
    }))
})
