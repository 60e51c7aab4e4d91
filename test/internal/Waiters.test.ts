/**
 * The one waiter primitive: a registry of one-shot answers by key, and
 * `SessionHost.interested`, which withdraws an interest however its use ends.
 * An answer is had before or after it came; settling a key answers all its
 * waiters and no other; a key nobody waits on holds nothing, and the owner is
 * told when the registry empties; an interrupted wait leaves nothing behind.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option } from "effect"
import * as Waiters from "../../src/internal/Waiters.js"
import { interested } from "../../src/services/SessionHost.js"

describe("Waiters.registry", () => {
  it.effect("an answer is had by waiters registered before it, awaiting before or after it came", () =>
    Effect.gen(function*() {
      const registry = Waiters.registry<string, number, string>()
      const early = registry.register("a")
      const waiting = yield* Effect.fork(early.await)
      yield* Effect.yieldNow()
      const late = registry.register("a")
      const other = registry.register("b")
      registry.settle("a", Exit.succeed(1))
      assert.strictEqual(yield* Fiber.join(waiting), 1)
      assert.strictEqual(yield* late.await, 1)
      // Settling "a" left "b" waiting; a failure reaches it as a failure.
      assert.strictEqual(registry.size(), 1)
      registry.settle("b", Exit.fail("no"))
      assert.strictEqual(yield* Effect.flip(other.await), "no")
      // Settled once: a second settling changes nothing for those who had it.
      registry.settle("a", Exit.succeed(2))
      assert.strictEqual(yield* late.await, 1)
    }))

  it.effect("withdrawing the last waiter empties the registry and tells its owner; settleAll answers everyone", () =>
    Effect.gen(function*() {
      let emptied = 0
      const registry = Waiters.registry<string, string, never>(() => emptied++)
      const a = registry.register("a")
      const b = registry.register("b")
      a.withdraw()
      a.withdraw()
      assert.strictEqual(registry.size(), 1)
      assert.strictEqual(emptied, 0)
      b.withdraw()
      assert.strictEqual(registry.size(), 0)
      assert.strictEqual(emptied, 1)
      // A withdrawn waiter is not answered, and a settle of nobody does nothing.
      registry.settle("a", Exit.succeed("late"))
      assert.strictEqual(emptied, 1)
      const c = registry.register("c")
      const d = registry.register("d")
      registry.settleAll(Exit.succeed("all"))
      assert.deepStrictEqual([yield* c.await, yield* d.await], ["all", "all"])
      assert.strictEqual(emptied, 2)
    }))
})

describe("Waiters.grouped", () => {
  it.effect("answers a key within its group, or a whole group at once, and keeps no group nobody waits on", () =>
    Effect.gen(function*() {
      const waiters = Waiters.grouped<string, string, number, never>()
      const a1 = waiters.register("a", "1")
      const a2 = waiters.register("a", "2")
      const b1 = waiters.register("b", "1")
      assert.strictEqual(waiters.size(), 2)
      // The same key in another group is another waiter.
      waiters.settle("a", "1", Exit.succeed(1))
      assert.strictEqual(yield* a1.await, 1)
      const other = yield* Effect.fork(b1.await)
      yield* Effect.yieldNow()
      assert.isTrue(Option.isNone(yield* Fiber.poll(other)), "b's key 1 is not answered")
      yield* Fiber.interrupt(other)
      waiters.settleAll("a", Exit.succeed(9))
      assert.strictEqual(yield* a2.await, 9)
      // Group a is answered and gone; b's last waiter withdrawing drops b.
      assert.strictEqual(waiters.size(), 1)
      b1.withdraw()
      assert.strictEqual(waiters.size(), 0)
      // Settling a group nobody waits on reaches nobody and throws nothing.
      waiters.settle("b", "1", Exit.succeed(2))
      waiters.settleAll("c", Exit.succeed(3))
      assert.strictEqual(waiters.size(), 0)
    }))
})

describe("SessionHost.interested", () => {
  it.effect("withdraws the interest however the use ends: success, failure, interruption", () =>
    Effect.gen(function*() {
      const registry = Waiters.registry<string, number, never>()
      const register = Effect.sync(() => registry.register("k"))
      assert.strictEqual(yield* interested(register, () => Effect.succeed("ok")), "ok")
      assert.strictEqual(registry.size(), 0)
      assert.strictEqual(yield* Effect.flip(interested(register, () => Effect.fail("bad"))), "bad")
      assert.strictEqual(registry.size(), 0)
      const blocked = yield* Effect.fork(interested(register, (interest) => interest.await))
      yield* Effect.yieldNow()
      assert.strictEqual(registry.size(), 1)
      yield* Fiber.interrupt(blocked)
      assert.strictEqual(registry.size(), 0)
      // The interrupted wait left no resumption: settling now reaches nobody and throws nothing.
      registry.settle("k", Exit.succeed(1))
      const answered = yield* Effect.fork(interested(register, (interest) => interest.await))
      yield* Effect.yieldNow()
      registry.settle("k", Exit.succeed(7))
      assert.strictEqual(yield* Fiber.join(answered), 7)
      assert.strictEqual(registry.size(), 0)
    }))
})
