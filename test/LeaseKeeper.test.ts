/**
 * The host's lease keeper, one fiber for every lease the host holds: each is
 * renewed every third of the TTL for as long as its holder's scope lasts (and
 * not after), a lease taken over is reported lost at its next renewal, and a
 * store outage is retried for one renewal period before the holder is told
 * `StoreUnavailable`. On the memory store, under the test clock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Ref, Scope, TestClock } from "effect"
import * as LeaseKeeper from "../src/actors/LeaseKeeper.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import { StoreUnavailable } from "../src/schema/Errors.js"
import type { Lease } from "../src/schema/Lease.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { agent, principal } from "./support/fixtures.js"

const ttl = Duration.seconds(3)

/** The memory store, whose renewals fail while `down` is set. */
const flakyStore = (down: { value: boolean }) =>
  Layer.effect(
    SessionStore,
    Effect.map(SessionStore, (store) =>
      SessionStore.of({
        ...store,
        renewAll: (leases, ttlMillis) =>
          down.value ? Effect.fail(new StoreUnavailable({ operation: "renew", cause: "down" })) : store.renewAll(leases, ttlMillis)
      }))
  ).pipe(Layer.provide(MemorySessionStore.layer))

/** A session with a lease held by "a", kept by `keeper` in `scope`; its losses go to `losses`. */
const kept = (keeper: LeaseKeeper.LeaseKeeper, scope: Scope.Scope, losses: Array<string>) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const session = yield* store.create({ principal: principal(), agent: agent() })
    const acquired = Option.getOrThrow(yield* store.acquire(session.id, "a", Duration.toMillis(ttl)))
    const lease = yield* Ref.make<Lease>(acquired)
    yield* keeper.keep(lease, (loss) => Effect.sync(() => void losses.push(loss._tag))).pipe(Scope.extend(scope))
    return { session, lease }
  })

describe("LeaseKeeper", () => {
  it.scoped("renews every lease every third of the TTL while its scope lasts, and stops when it closes", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const keeper = yield* LeaseKeeper.make(ttl)
      yield* Effect.forkScoped(keeper.run)
      const losses: Array<string> = []
      const first = yield* Scope.make()
      const one = yield* kept(keeper, first, losses)
      yield* TestClock.adjust("500 millis")
      const two = yield* kept(keeper, yield* Effect.scope, losses)
      // Well past the first TTL: both leases live on, renewed in turn.
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      const now = 10_500
      for (const { lease } of [one, two]) {
        const current = yield* Ref.get(lease)
        assert.isAtLeast(current.expiresAt, now + 1_000)
        assert.strictEqual(current.epoch, 1)
      }
      assert.isTrue(Option.isNone(yield* store.acquire(one.session.id, "b", 1_000)))
      // The first holder's scope closes: its lease is no longer renewed and lapses; the other's is.
      yield* Scope.close(first, Effect.void as never)
      yield* TestClock.adjust("4 seconds")
      assert.isTrue(Option.isSome(yield* store.acquire(one.session.id, "b", 1_000)))
      assert.isTrue(Option.isNone(yield* store.acquire(two.session.id, "b", 1_000)))
      assert.deepStrictEqual(losses, [])
    }).pipe(Effect.provide(MemorySessionStore.layer)))

  it.scoped("a lease taken over is reported lost once, at its next renewal", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const keeper = yield* LeaseKeeper.make(ttl)
      yield* Effect.forkScoped(keeper.run)
      const losses: Array<string> = []
      const { lease, session } = yield* kept(keeper, yield* Effect.scope, losses)
      yield* store.release(yield* Ref.get(lease))
      assert.isTrue(Option.isSome(yield* store.acquire(session.id, "b", 60_000)))
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(losses, ["LeaseLost"])
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(losses, ["LeaseLost"])
    }).pipe(Effect.provide(MemorySessionStore.layer)))

  it.scoped("an outage shorter than a renewal period is ridden out; a longer one is StoreUnavailable", () => {
    const down = { value: false }
    return Effect.gen(function*() {
      const keeper = yield* LeaseKeeper.make(ttl)
      yield* Effect.forkScoped(keeper.run)
      const losses: Array<string> = []
      const { lease } = yield* kept(keeper, yield* Effect.scope, losses)
      // Down from the first renewal (at 1 s) for 0.75 s: retried every 250 ms, renewed once it is back.
      down.value = true
      yield* TestClock.adjust("1500 millis")
      down.value = false
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(losses, [])
      assert.isAtLeast((yield* Ref.get(lease)).expiresAt, 4_500)
      // Down for longer than a period (1 s) after a renewal was due: the holder is told, once.
      down.value = true
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(losses, ["StoreUnavailable"])
    }).pipe(Effect.provide(flakyStore(down)))
  })
})
