/**
 * The host's admission of actors to their first busy slot: a session starts
 * at once when a permit is free and nobody waits; otherwise it waits as an id,
 * in arrival order, behind actors already waiting for a permit, and starts
 * holding the permit taken for it; a host that stops gives up the ones still
 * waiting, including the one whose permit it was waiting for.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope } from "effect"
import * as Admissions from "../src/actors/Admissions.js"
import * as Doorbell from "../src/internal/Doorbell.js"
import * as Permits from "../src/internal/Permits.js"
import type { SessionId } from "../src/schema/Ids.js"

const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

const id = (n: number) => `s_${n}` as SessionId

/** Admissions over `permits`, recording whom they launch and give up. */
const recording = (permits: Permits.Permits) =>
  Effect.gen(function*() {
    const launched: Array<SessionId> = []
    const givenUp: Array<SessionId> = []
    const admissions = yield* Admissions.make(
      permits,
      (sessionId) => Effect.sync(() => void launched.push(sessionId)),
      (sessionId) => Effect.sync(() => void givenUp.push(sessionId))
    )
    return { admissions, launched, givenUp }
  })

describe("Admissions", () => {
  it.scoped("starts at once while permits are free, then queues in arrival order, one start per freed permit", () =>
    Effect.gen(function*() {
      const permits = Permits.make(2)
      const { admissions, launched } = yield* recording(permits)
      for (let i = 0; i < 5; i++) yield* admissions.admit(id(i), Doorbell.make())
      // Started at once, in the caller's step: no fiber hop for a free slot.
      assert.deepStrictEqual(launched, [id(0), id(1)])
      assert.strictEqual(admissions.waiting(), 3)
      yield* settle
      // Two permits taken, one waited for (the next in the queue); the rest wait as ids only.
      assert.strictEqual(permits.busy(), 3)
      yield* permits.release(1)
      yield* settle
      assert.deepStrictEqual(launched, [id(0), id(1), id(2)])
      assert.strictEqual(admissions.waiting(), 2)
      yield* permits.release(2)
      yield* settle
      assert.deepStrictEqual(launched, [id(0), id(1), id(2), id(3), id(4)])
      assert.strictEqual(admissions.waiting(), 0)
      assert.strictEqual(permits.busy(), 2)
    }))

  it.scoped("a newcomer waits behind an actor already waiting for a permit, even when one is free for it", () =>
    Effect.gen(function*() {
      const permits = Permits.make(1)
      const { admissions, launched } = yield* recording(permits)
      yield* permits.take(1)
      // A live actor waking from idle waits for the permit first.
      const actor = yield* Effect.fork(permits.take(1))
      yield* settle
      yield* admissions.admit(id(1), Doorbell.make())
      assert.deepStrictEqual(launched, [])
      yield* permits.release(1)
      yield* settle
      // The permit went to the actor; the newcomer still waits.
      assert.isTrue((yield* Fiber.poll(actor))._tag === "Some")
      assert.deepStrictEqual(launched, [])
      yield* permits.release(1)
      yield* settle
      assert.deepStrictEqual(launched, [id(1)])
    }))

  it.effect("a host that stops gives up every session still waiting, and loses no permit", () =>
    Effect.gen(function*() {
      const permits = Permits.make(1)
      const scope = yield* Scope.make()
      const { admissions, givenUp, launched } = yield* Scope.extend(recording(permits), scope)
      for (let i = 0; i < 4; i++) yield* admissions.admit(id(i), Doorbell.make())
      yield* settle
      assert.deepStrictEqual(launched, [id(0)])
      yield* Scope.close(scope, Exit.void)
      // The one the admitting fiber held, waiting for the permit, is given up too.
      assert.deepStrictEqual(givenUp, [id(1), id(2), id(3)])
      // Only id(0)'s permit is taken: the waiting take was withdrawn.
      assert.strictEqual(permits.busy(), 1)
      yield* permits.release(1)
      assert.strictEqual(permits.busy(), 0)
    }))
})
