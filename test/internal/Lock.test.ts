/**
 * The actors' lock: one holder at a time, waiters served in arrival order,
 * and released however the holder ends (success, failure, defect, interruption),
 * also when a waiter is interrupted while the lock is being handed to it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as Lock from "../../src/internal/Lock.js"

describe("Lock", () => {
  it.effect("runs one holder at a time, waiters in arrival order", () =>
    Effect.gen(function*() {
      const lock = Lock.make()
      const order: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const first = yield* Effect.fork(lock(Effect.zipRight(Effect.sync(() => order.push("a+")), Deferred.await(gate)).pipe(
        Effect.zipRight(Effect.sync(() => order.push("a-")))
      )))
      yield* Effect.yieldNow()
      const rest = yield* Effect.forEach(["b", "c"], (name) =>
        Effect.fork(lock(Effect.sync(() => order.push(name)))).pipe(Effect.tap(() => Effect.yieldNow())))
      assert.deepStrictEqual(order, ["a+"])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Effect.forEach(rest, Fiber.join)
      assert.deepStrictEqual(order, ["a+", "a-", "b", "c"])
      // Free again: taken at once.
      assert.strictEqual(yield* lock(Effect.succeed(1)), 1)
    }))

  it.effect("is released when the holder fails, dies or is interrupted", () =>
    Effect.gen(function*() {
      const lock = Lock.make()
      assert.isTrue(Exit.isFailure(yield* Effect.exit(lock(Effect.fail("no")))))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(lock(Effect.die("boom")))))
      const holder = yield* Effect.fork(lock(Effect.never))
      yield* Effect.yieldNow()
      const waiter = yield* Effect.fork(lock(Effect.succeed("after")))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(holder)
      assert.strictEqual(yield* Fiber.join(waiter), "after")
    }))

  it.effect("a waiter interrupted while waiting neither holds nor blocks the lock", () =>
    Effect.gen(function*() {
      const lock = Lock.make()
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(lock(Deferred.await(gate)))
      yield* Effect.yieldNow()
      const quitter = yield* Effect.fork(lock(Effect.succeed("never")))
      const next = yield* Effect.fork(lock(Effect.succeed("next")))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(quitter)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      assert.strictEqual(yield* Fiber.join(next), "next")
      assert.strictEqual(yield* lock(Effect.succeed(1)), 1)
    }))

  it.effect("a waiter interrupted as the lock is handed to it passes it on", () =>
    Effect.gen(function*() {
      const lock = Lock.make()
      const waiters = yield* lock(Effect.gen(function*() {
        const quitter = yield* Effect.fork(lock(Effect.succeed("quitter")))
        const next = yield* Effect.fork(lock(Effect.succeed("next")))
        yield* Effect.yieldNow()
        return { quitter, next }
      }))
      // The release handed the lock to `quitter`, which has not run yet: it is interrupted first.
      const quitted = yield* Fiber.interrupt(waiters.quitter)
      assert.isTrue(Exit.isInterrupted(quitted))
      assert.strictEqual(yield* Fiber.join(waiters.next), "next")
      assert.strictEqual(yield* lock(Effect.succeed(1)), 1)
    }))

  it.effect("atomic: the holder runs to its end when interrupted, a waiter stays interruptible", () =>
    Effect.gen(function*() {
      const lock = Lock.make()
      const gate = yield* Deferred.make<void>()
      const done: Array<string> = []
      const holder = yield* Effect.fork(lock.atomic(Effect.zipRight(Deferred.await(gate), Effect.sync(() => done.push("holder")))))
      yield* Effect.yieldNow()
      const waiter = yield* Effect.fork(lock.atomic(Effect.sync(() => done.push("waiter"))))
      yield* Effect.yieldNow()
      // Waiting for the lock: interrupted at once, having run nothing.
      assert.isTrue(Exit.isInterrupted(yield* Fiber.interrupt(waiter)))
      // Holding it: the interruption waits for the effect's end.
      const interrupting = yield* Effect.fork(Fiber.interrupt(holder))
      yield* Effect.yieldNow()
      assert.deepStrictEqual(done, [])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(interrupting)
      assert.deepStrictEqual(done, ["holder"])
      assert.strictEqual(yield* lock(Effect.succeed(1)), 1)
    }))
})
