/**
 * A lease's local deadline (src/actors/LeaseDeadline.ts, decision 0031): the
 * rule at its margin, under the test clock; then what an actor does with it
 * when it wakes from a pause between a commit and the tool body that commit
 * announced (the store's reply held, as a stopped process would hold it):
 * past the deadline it renews first, and runs the body only if the renewal
 * succeeds; when the lease was taken over meanwhile it stops with
 * `LeaseLost` and the body never runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Layer, Option, Ref, Schema, TestClock } from "effect"
import * as LeaseDeadline from "../src/actors/LeaseDeadline.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { eventually, logOf } from "./support/actors.js"
import { principal } from "./support/fixtures.js"

describe("LeaseDeadline", () => {
  it("keeps a fifth of the TTL as its margin, at most two seconds", () => {
    assert.strictEqual(LeaseDeadline.marginFor(3000), 600)
    assert.strictEqual(LeaseDeadline.marginFor(15_000), 2000)
    assert.strictEqual(LeaseDeadline.marginFor(60_000), 2000)
  })

  it.effect("is live until the TTL less the margin after the renewal was asked for, and moves only forward", () =>
    Effect.gen(function*() {
      const clock = yield* Effect.clock
      yield* TestClock.adjust("10 seconds")
      const asked = LeaseDeadline.monotonicMillis(clock)
      assert.strictEqual(asked, 10_000, "the test clock is the monotonic clock under test")
      const deadline = LeaseDeadline.make(3000, asked)
      assert.strictEqual(LeaseDeadline.at(deadline), 12_400)
      yield* TestClock.adjust("2399 millis")
      assert.isTrue(LeaseDeadline.isLive(deadline, LeaseDeadline.monotonicMillis(clock)), "one millisecond before the margin")
      yield* TestClock.adjust("1 millis")
      assert.isFalse(LeaseDeadline.isLive(deadline, LeaseDeadline.monotonicMillis(clock)), "at the margin: renew first")
      // A renewal confirmed late but asked for earlier than the newest changes nothing.
      LeaseDeadline.confirm(deadline, 9000)
      assert.strictEqual(deadline.confirmedAt, 10_000)
      LeaseDeadline.confirm(deadline, 12_000)
      assert.isTrue(LeaseDeadline.isLive(deadline, LeaseDeadline.monotonicMillis(clock)))
      assert.strictEqual(LeaseDeadline.at(deadline), 14_400)
    }))
})

describe("an actor that wakes past its lease's local deadline", () => {
  /**
   * A session whose turn calls the `effect` tool once; the store's reply to the commit that
   * records the call as started is held until `wake` (the process is paused right after its
   * commit), and the keeper's renewals wait until `renewals` opens (a pause lets none through).
   */
  const paused = Effect.gen(function*() {
    const store = yield* MemorySessionStore.make
    const woken = yield* Deferred.make<void>()
    const held = yield* Deferred.make<void>()
    const renewals = yield* Effect.makeLatch(false)
    const ran = yield* Ref.make(0)
    const pausing = Layer.succeed(
      SessionStore,
      SessionStore.of({
        ...store,
        renewAll: (leases, ttl) => Effect.zipRight(renewals.await, store.renewAll(leases, ttl)),
        append: (commit) =>
          Effect.tap(store.append(commit), () =>
            commit.records.some((r) => r._tag === "operation_started" && r.kind === "tool")
              ? Effect.zipRight(Deferred.succeed(held, undefined), Deferred.await(woken))
              : Effect.void)
      })
    )
    const tool = Tool.make({
      name: "effect",
      description: "Has an effect outside.",
      parameters: Schema.Struct({}),
      success: Schema.Number,
      metadata: { sideEffect: "external", idempotency: "unsupported" },
      handler: () => Ref.updateAndGet(ran, (n) => n + 1)
    })
    const model = ScriptedModel.layer({
      fallback: (request) =>
        request.messages.some((m) => m.role === "tool")
          ? { text: "done" }
          : { toolCalls: [{ id: "c1", name: "effect", arguments: "{}" }] }
    })
    const runtime = Troupe.layer(pausing, { model, tools: Toolkit.layer([tool]), host: { leaseTtl: "3 seconds" } })
    const agent = new Agent({ name: "doer", instructions: "x", model: new ModelRef({ name: "scripted" }), tools: [tool.spec] })
    return { store, woken, held, renewals, ran, runtime, agent }
  })

  it.effect("renews first when the lease is still its own, then runs the tool", () =>
    Effect.gen(function*() {
      const { agent, held, ran, runtime, store, woken } = yield* paused
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent })
        const sent = yield* sessions.send(me, session.id, { text: "go" })
        yield* Deferred.await(held)
        // Past the deadline (2.4 s), not yet past the store's expiry (3 s): a renewal is still accepted.
        yield* TestClock.adjust("2500 millis")
        yield* Deferred.succeed(woken, undefined)
        const end = yield* sessions.awaitTurn(me, session.id, sent.turnId!)
        assert.strictEqual(end.output, "done")
        assert.strictEqual(yield* Ref.get(ran), 1)
        // The keeper's renewals never went through: the lease outlives its first TTL by the check's renewal.
        yield* TestClock.adjust("1 second")
        assert.isTrue(Option.isNone(yield* store.acquire(session.id, "other", 60_000)), "renewed before the tool ran")
      }).pipe(Effect.provide(runtime))
    }))

  it.effect("stops with LeaseLost, starting nothing, when the lease was taken over during the pause", () =>
    Effect.gen(function*() {
      const { agent, held, ran, renewals, runtime, store, woken } = yield* paused
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const host = yield* SessionHost
        const me = principal()
        const session = yield* sessions.create(me, { agent })
        yield* sessions.send(me, session.id, { text: "go" })
        yield* Deferred.await(held)
        yield* TestClock.adjust("4 seconds")
        const thief = yield* store.acquire(session.id, "thief", 60_000)
        assert.isTrue(Option.isSome(thief), "the lease expired in the store")
        const head = (yield* store.get(session.id)).headSeq
        // Woken: the commit's reply arrives; the tool body is next.
        yield* Deferred.succeed(woken, undefined)
        yield* eventually(Effect.map(host.running, (running) => running.length === 0), "the actor to stop")
        yield* renewals.open
        for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
        assert.strictEqual(yield* Ref.get(ran), 0, "the tool body never ran")
        assert.strictEqual((yield* logOf(session.id)).length, head, "nothing more was written")
        assert.isAtLeast(yield* Clock.currentTimeMillis, 4000)
      }).pipe(Effect.provide(runtime))
    }))
})
