/**
 * An actor's doorbell and the host's idleness: rings while nobody waits are
 * kept as one, and counted (a nudge, the actor's own "my turn ended", wakes but
 * is not); an expiry reaches a waiter (or the next wait) unless a ring
 * comes first, and is forgotten when the actor is busy again; an interrupted
 * wait leaves nothing behind; an offer (a message handed over in memory) is taken
 * only while the actor accepts one, one at a time. Idleness expires each idle actor's bell its
 * timeout after it went idle, in that order, and never one that became busy.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, TestClock } from "effect"
import * as Idleness from "../../src/actors/Idleness.js"
import * as Doorbell from "../../src/internal/Doorbell.js"
import { InputId } from "../../src/schema/Ids.js"
import { Message } from "../../src/schema/Inbox.js"

describe("Doorbell", () => {
  it.effect("rings before a wait are kept as one; a waiter is woken by the next ring", () =>
    Effect.gen(function*() {
      const bell = Doorbell.make()
      bell.ring()
      bell.ring()
      assert.isTrue(bell.pending())
      assert.strictEqual(yield* bell.wait, "rung")
      assert.isFalse(bell.pending())
      const waiting = yield* Effect.fork(bell.wait)
      yield* Effect.yieldNow()
      assert.isNull(waiting.unsafePoll())
      bell.ring()
      assert.strictEqual(yield* Fiber.join(waiting), "rung")
    }))

  it.effect("an offer is taken only while the actor says it accepts, one at a time; it wakes like a nudge", () =>
    Effect.gen(function*() {
      const bell = Doorbell.make()
      const message = new Message({ inputId: InputId.make("in-1"), text: "hi" })
      const offer = (): Doorbell.Offer => ({ message, decided: () => {} })
      assert.isFalse(bell.offer(offer()), "no actor accepts yet")
      let accepting = false
      bell.acceptOffersWhile(() => accepting)
      assert.isFalse(bell.offer(offer()), "the actor is busy")
      accepting = true
      const waiting = yield* Effect.fork(bell.wait)
      yield* Effect.yieldNow()
      const first = offer()
      assert.isTrue(bell.offer(first))
      assert.isFalse(bell.offer(offer()), "one is held already")
      assert.strictEqual(yield* Fiber.join(waiting), "rung")
      assert.strictEqual(bell.rings(), 0)
      assert.strictEqual(bell.takeOffer(), first)
      assert.isUndefined(bell.takeOffer())
      bell.acceptOffersWhile(undefined)
      assert.isFalse(bell.offer(offer()), "the actor stopped")
    }))

  it.effect("a nudge wakes like a ring but is not counted: rings counts what came from outside", () =>
    Effect.gen(function*() {
      const bell = Doorbell.make()
      assert.strictEqual(bell.rings(), 0)
      bell.nudge()
      assert.isTrue(bell.pending())
      assert.strictEqual(yield* bell.wait, "rung")
      assert.strictEqual(bell.rings(), 0)
      const waiting = yield* Effect.fork(bell.wait)
      yield* Effect.yieldNow()
      bell.nudge()
      assert.strictEqual(yield* Fiber.join(waiting), "rung")
      bell.ring()
      bell.ring()
      assert.strictEqual(bell.rings(), 2)
      assert.strictEqual(yield* bell.wait, "rung")
    }))

  it.effect("an expiry wakes a waiter, or the next wait; a ring beats it; a busy actor forgets it", () =>
    Effect.gen(function*() {
      const bell = Doorbell.make()
      const waiting = yield* Effect.fork(bell.wait)
      yield* Effect.yieldNow()
      bell.expire()
      assert.strictEqual(yield* Fiber.join(waiting), "expired")
      // Nobody waits: the expiry is kept for the next wait, unless a ring comes first.
      bell.expire()
      assert.strictEqual(yield* bell.wait, "expired")
      bell.expire()
      bell.ring()
      assert.strictEqual(yield* bell.wait, "rung")
      bell.expire()
      bell.clearExpiry()
      const next = yield* Effect.fork(bell.wait)
      yield* Effect.yieldNow()
      assert.isNull(next.unsafePoll())
      yield* Fiber.interrupt(next)
      // The interrupted wait took nothing with it: a later ring is had by the next wait.
      bell.ring()
      assert.strictEqual(yield* bell.wait, "rung")
    }))
})

describe("Idleness", () => {
  it.scoped("expires each idle bell its timeout after it went idle, in that order, and none that became busy", () =>
    Effect.gen(function*() {
      const idleness = yield* Idleness.make(Duration.seconds(30))
      yield* Effect.forkScoped(idleness.run)
      const [a, b, c] = [Doorbell.make(), Doorbell.make(), Doorbell.make()]
      const woken: Array<string> = []
      const watch = (name: string, bell: Doorbell.Doorbell) =>
        Effect.forkScoped(Effect.flatMap(bell.wait, (how) => Effect.sync(() => void woken.push(`${name} ${how}`))))
      yield* idleness.idle(a)
      yield* watch("a", a)
      yield* TestClock.adjust("10 seconds")
      yield* idleness.idle(b)
      yield* watch("b", b)
      yield* idleness.idle(c)
      yield* watch("c", c)
      // c becomes busy again: no expiry for it.
      idleness.busy(c)
      yield* TestClock.adjust("19 seconds")
      assert.deepStrictEqual(woken, [])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(woken, ["a expired"])
      yield* TestClock.adjust("10 seconds")
      assert.deepStrictEqual(woken, ["a expired", "b expired"])
      yield* TestClock.adjust("1 minute")
      assert.deepStrictEqual(woken, ["a expired", "b expired"])
      // Idle again later: a fresh deadline from then.
      yield* idleness.idle(a)
      yield* watch("a", a)
      yield* TestClock.adjust("29 seconds")
      assert.strictEqual(woken.length, 2)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(woken, ["a expired", "b expired", "a expired"])
    }))
})
