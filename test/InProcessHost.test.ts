/**
 * The in-process host: passivation, crash recovery at start-up, and handing
 * a SQLite file's unfinished work from one host to the next.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Exit, Fiber, Layer, Option, Queue, Ref, Scope, Supervisor, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { makeTurnId } from "../src/schema/Ids.js"
import { TurnStarted } from "../src/schema/Record.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Troupe from "../src/Troupe.js"
import {
  assertTurnsSerial,
  collectUntil,
  endsOf,
  eventually,
  gatedModel,
  lastUser,
  logOf,
  neverReleases,
  some,
  startsOf
} from "./support/actors.js"
import { agent, commit, message, principal } from "./support/fixtures.js"

const IDLE = 30_000

/** True once the actor's idle timer (started when it ran out of work) is pending on the TestClock. */
const idleTimerSet = Effect.gen(function*() {
  const now = yield* TestClock.currentTimeMillis
  const sleeps = yield* TestClock.sleeps()
  return Chunk.some(sleeps, (at) => at === now + IDLE)
})

const freshFile = () => join(mkdtempSync(join(tmpdir(), "troupe-host-")), "sessions.db")

describe("InProcessHost", () => {
  describe("busy actors", () => {
    it.effect("with maxBusyActors 1, a second session's turn waits until the first session is idle", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const a = yield* sessions.create(me, { agent: agent() })
          const b = yield* sessions.create(me, { agent: agent() })
          const first = yield* sessions.send(me, a.id, { text: "a" })
          const held = yield* Queue.take(model.held)
          assert.strictEqual(held.text, "a")
          // b's actor cannot get a permit while a's turn runs: its send waits, its message stays in the inbox.
          const second = yield* Effect.fork(sessions.send(me, b.id, { text: "b" }))
          for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
          assert.strictEqual(yield* Queue.size(model.held), 0)
          assert.strictEqual((yield* sessions.snapshot(me, b.id)).pendingInputs, 1)
          yield* held.release("done a")
          yield* sessions.awaitTurn(me, a.id, first.turnId!)
          const next = yield* Queue.take(model.held)
          assert.strictEqual(next.text, "b")
          yield* next.release("done b")
          const accepted = yield* Fiber.join(second)
          assert.strictEqual((yield* sessions.awaitTurn(me, b.id, accepted.turnId!)).output, "done b")
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, host: { maxBusyActors: 1 } })))
      }))
    it.effect("with every busy slot taken, a message to an idle actor is pushed and waits in the inbox, not in memory", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const a = yield* sessions.create(me, { agent: agent() })
          const b = yield* sessions.create(me, { agent: agent() })
          // b's actor ran a turn and waits idle, its slot given back; a's turn then takes the only slot.
          const warm = yield* sessions.send(me, b.id, { text: "warm" })
          yield* (yield* Queue.take(model.held)).release("warm")
          yield* sessions.awaitTurn(me, b.id, warm.turnId!)
          const first = yield* sessions.send(me, a.id, { text: "a" })
          const held = yield* Queue.take(model.held)
          const second = yield* Effect.fork(sessions.send(me, b.id, { text: "b" }))
          for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
          assert.strictEqual(yield* Queue.size(model.held), 0)
          assert.strictEqual((yield* sessions.snapshot(me, b.id)).pendingInputs, 1)
          yield* held.release("done a")
          yield* sessions.awaitTurn(me, a.id, first.turnId!)
          yield* (yield* Queue.take(model.held)).release("done b")
          const accepted = yield* Fiber.join(second)
          assert.strictEqual((yield* sessions.awaitTurn(me, b.id, accepted.turnId!)).output, "done b")
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, host: { maxBusyActors: 1 } })))
      }))
    it.effect("sessions woken while every busy slot is taken wait without an actor (no fiber, no lease) and start in arrival order", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        // Every fiber the runtime forks is tracked from here.
        const supervisor = yield* Supervisor.track
        const live = Effect.map(supervisor.value, (fibers) => new Set(fibers.map((fiber) => fiber.id().id)))
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const host = yield* SessionHost
          const me = principal()
          const a = yield* sessions.create(me, { agent: agent() })
          const waiting = yield* Effect.forEach([1, 2, 3], () => sessions.create(me, { agent: agent() }))
          const first = yield* sessions.send(me, a.id, { text: "a" })
          const heldA = yield* Queue.take(model.held)
          const before = yield* live
          const sends: Array<Fiber.RuntimeFiber<unknown, unknown>> = []
          for (const [i, session] of waiting.entries()) {
            sends.push(yield* Effect.fork(sessions.send(me, session.id, { text: `m${i}` })))
            for (let k = 0; k < 50; k++) yield* Effect.yieldNow()
          }
          // The only new fibers are the senders', waiting for their decisions: no actor waits for a slot.
          const added = [...(yield* live)].filter((id) => !before.has(id)).sort()
          assert.deepStrictEqual(added, sends.map((send) => send.id().id).sort())
          for (const session of waiting) {
            // Driven here, yet no actor of it has started: its lease is free for anyone to take.
            assert.isTrue(yield* host.drives(session.id))
            const probe = yield* store.acquire(session.id, "probe", 60_000)
            assert.isTrue(Option.isSome(probe))
            yield* store.release(Option.getOrThrow(probe))
          }
          yield* heldA.release("done a")
          yield* sessions.awaitTurn(me, a.id, first.turnId!)
          for (let i = 0; i < waiting.length; i++) {
            const held = yield* Queue.take(model.held)
            assert.strictEqual(held.text, `m${i}`)
            yield* held.release(`done ${i}`)
          }
          for (const send of sends) yield* Fiber.join(send)
        }).pipe(
          Effect.provide(Troupe.layerTest({ model: model.layer, host: { maxBusyActors: 1 } })),
          Effect.supervised(supervisor)
        )
      }))
  })

  describe("passivation", () => {
    it.effect("past maxLiveActors, an actor that goes idle while another waits for a busy slot passivates at once", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const host = yield* SessionHost
          const me = principal()
          const a = yield* sessions.create(me, { agent: agent() })
          const b = yield* sessions.create(me, { agent: agent() })
          const first = yield* sessions.send(me, a.id, { text: "a" })
          const heldA = yield* Queue.take(model.held)
          // b's actor waits for the one slot.
          const second = yield* Effect.fork(sessions.send(me, b.id, { text: "b" }))
          for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
          yield* heldA.release("done a")
          yield* sessions.awaitTurn(me, a.id, first.turnId!)
          const heldB = yield* Queue.take(model.held)
          // No clock moved: a's idle timeout (a day) is far, yet a is gone, and its lease with it.
          yield* eventually(Effect.map(host.running, (running) => !running.includes(a.id)), "a to passivate")
          assert.deepStrictEqual(yield* host.running, [b.id])
          // Nobody waits now: b, idle after its turn, stays until its idle timeout.
          yield* heldB.release("done b")
          yield* sessions.awaitTurn(me, b.id, (yield* Fiber.join(second)).turnId!)
          for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
          assert.deepStrictEqual(yield* host.running, [b.id])
          // a's next message starts it again.
          const again = yield* sessions.send(me, a.id, { text: "again" })
          const heldAgain = yield* Queue.take(model.held)
          yield* heldAgain.release("done again")
          assert.strictEqual((yield* sessions.awaitTurn(me, a.id, again.turnId!)).output, "done again")
        }).pipe(
          Effect.provide(Troupe.layerTest({ model: model.layer, host: { maxBusyActors: 1, maxLiveActors: 1, idleTimeout: "1 day" } }))
        )
      }))


    it.effect("an actor with nothing to do for the idle timeout stops, holds no fiber and frees its lease", () =>
      Effect.gen(function*() {
        // Every fiber the runtime forks (poller, actors, keepers, turns) is tracked from here.
        const supervisor = yield* Supervisor.track
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const host = yield* SessionHost
          const store = yield* SessionStore
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          yield* eventually(Effect.map(supervisor.value, (fibers) => fibers.length > 0), "the poller to start")
          const ids = Effect.map(supervisor.value, (fibers) => new Set(fibers.map((fiber) => fiber.id().id)))
          const baseline = yield* ids

          const accepted = yield* sessions.send(me, session.id, { text: "hello" })
          yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
          assert.deepStrictEqual(yield* host.running, [session.id])
          yield* eventually(idleTimerSet, "the actor to go idle")
          // The actor's fibers (and the poller's, which come and go with its ticks): none of them may outlive it.
          const actorFibers = [...(yield* ids)].filter((id) => !baseline.has(id))
          assert.isAbove(actorFibers.length, 1, "the actor and its keeper are fibers")

          // Not a moment before the idle timeout.
          yield* TestClock.adjust(IDLE - 1)
          assert.deepStrictEqual(yield* host.running, [session.id])
          assert.isTrue(Option.isNone(yield* store.acquire(session.id, "other", 1_000)), "the lease is still held")

          yield* TestClock.adjust(1)
          yield* eventually(Effect.map(host.running, (running) => running.length === 0), "the actor to passivate")
          yield* eventually(Effect.map(ids, (now) => actorFibers.every((id) => !now.has(id))), "the actor's fibers to end")
          const lease = yield* some(yield* store.acquire(session.id, "other", 1_000), "the lease to be free")
          yield* store.release(lease)

          // Passivation is not death: an interrupt of the old turn wakes a fresh actor that knows it ended,
          const late = yield* sessions.interrupt(me, session.id, accepted.turnId!)
          assert.strictEqual(late.outcome, "already_ended")
          // and the next message starts a turn.
          const again = yield* sessions.send(me, session.id, { text: "again" })
          assert.strictEqual(again.disposition, "started")
          assert.strictEqual((yield* sessions.awaitTurn(me, session.id, again.turnId!)).output, "You said: again")
          assert.deepStrictEqual(yield* host.running, [session.id])
          assertTurnsSerial(yield* logOf(session.id))
        }).pipe(Effect.provide(Troupe.layerTest()), Effect.supervised(supervisor))
      }))

    it.effect("an actor never passivates while its turn runs, and keeps renewing its lease", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const host = yield* SessionHost
          const store = yield* SessionStore
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          const accepted = yield* sessions.send(me, session.id, { text: "slow" })
          const call = yield* Queue.take(model.held)
          // Four idle timeouts and eight lease TTLs, one renewal period at a time.
          for (let i = 0; i < 24; i++) {
            yield* TestClock.adjust("5 seconds")
            for (let j = 0; j < 10; j++) yield* Effect.yieldNow()
          }
          assert.deepStrictEqual(yield* host.running, [session.id])
          assert.isTrue(Option.isNone(yield* store.acquire(session.id, "other", 1_000)), "the lease was kept alive")
          assert.isFalse(yield* Deferred.isDone(call.interrupted))
          yield* call.release("finally")
          assert.strictEqual((yield* sessions.awaitTurn(me, session.id, accepted.turnId!)).output, "finally")
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))
  })

  describe("crash recovery", () => {
    /**
     * A crashed owner's leftovers, written through the store: a turn started
     * (its message consumed) but never ended, and a message queued behind it.
     */
    const crashedSession = (store: SessionStore["Type"], lease: "expired" | "released") =>
      Effect.gen(function*() {
        const me = principal()
        const session = yield* store.create({ principal: me, agent: agent() })
        const started = message("unfinished business")
        const queued = message("next in line")
        yield* store.push(session.id, started)
        yield* store.push(session.id, queued)
        const held = yield* some(yield* store.acquire(session.id, "dead-host", 5_000), "a lease")
        const turnId = yield* makeTurnId
        yield* store.append(
          yield* commit(held, 1, [new TurnStarted({ turnId, inputId: started.inputId, text: started.text })], [
            started.inputId
          ])
        )
        if (lease === "released") yield* store.release(held)
        return { me, sessionId: session.id, turnId }
      })

    for (const lease of ["expired", "released"] as const) {
      it.effect(`a new host resumes an active turn left with ${lease === "expired" ? "an expired" : "a released"} lease at start-up and completes it`, () =>
        Effect.gen(function*() {
          const store = yield* MemorySessionStore.make
          const { me, sessionId, turnId } = yield* crashedSession(store, lease)
          if (lease === "expired") yield* TestClock.adjust("6 seconds")
          const model = yield* gatedModel(() => false)
          yield* Effect.gen(function*() {
            const sessions = yield* Sessions
            // Nobody sends anything: the host finds the session through `runnable` on its own.
            const result = yield* sessions.awaitTurn(me, sessionId, turnId)
            assert.strictEqual(result.output, "You said: unfinished business")
            yield* collectUntil(sessions.events(me, sessionId), (r) => r._tag === "turn_ended" && r.output === "You said: next in line")
            const log = yield* logOf(sessionId)
            assertTurnsSerial(log)
            assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["unfinished business", "next in line"])
            assert.strictEqual(startsOf(log)[0]!.turnId, turnId, "the same turn was resumed, not restarted")
            assert.deepStrictEqual(endsOf(log).map((e) => e.outcome), ["completed", "completed"])
            // The resumed call saw its message once, not twice.
            const requests = yield* Ref.get(model.requests)
            assert.deepStrictEqual(requests[0]!.messages.map((m) => m.content), ["unfinished business"])
            assert.deepStrictEqual(requests.map(lastUser), ["unfinished business", "next in line"])
          }).pipe(Effect.provide(Troupe.layer(Layer.succeed(SessionStore, store), { model: model.layer })))
        }))
    }

    it.effect("a host that does not claim (troupe run) leaves a runnable session it was not sent to alone, polls or not", () =>
      Effect.gen(function*() {
        const store = yield* MemorySessionStore.make
        const { me, sessionId } = yield* crashedSession(store, "released")
        yield* Effect.gen(function*() {
          const host = yield* SessionHost
          const sessions = yield* Sessions
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          yield* TestClock.adjust("1 minute")
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          assert.deepStrictEqual(yield* host.running, [])
          assert.strictEqual((yield* sessions.snapshot(me, sessionId)).pendingInputs, 1)
        }).pipe(Effect.provide(Troupe.layer(Layer.succeed(SessionStore, store), { host: { claims: false, leaseTtl: "2 seconds" } })))
      }))

    it.effect("a host that runs nothing (troupe inspect) admits a message and leaves it in the store; a host that runs takes it up", () =>
      Effect.gen(function*() {
        const store = yield* MemorySessionStore.make
        const me = principal()
        const { sessionId, inputId } = yield* Effect.gen(function*() {
          const host = yield* SessionHost
          const sessions = yield* Sessions
          const session = yield* sessions.create(me, { agent: agent() })
          // The send follows the log for a while (another process may start the turn): the clock moves past it.
          const sending = yield* Effect.fork(sessions.send(me, session.id, { text: "for whoever drives it" }))
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          yield* TestClock.adjust("1 minute")
          const accepted = yield* Fiber.join(sending)
          // Admitted, not started: no actor here decided it, and none runs.
          assert.isUndefined(accepted.turnId)
          assert.deepStrictEqual(yield* host.running, [])
          assert.strictEqual((yield* sessions.snapshot(me, session.id)).pendingInputs, 1)
          assert.deepStrictEqual(startsOf(yield* logOf(session.id)), [])
          return { sessionId: session.id, inputId: accepted.inputId }
        }).pipe(Effect.provide(Troupe.layer(Layer.succeed(SessionStore, store), { host: { runs: false } })))
        // A host that runs sessions on the same store claims it and runs the turn.
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          yield* collectUntil(sessions.events(me, sessionId), (r) => r._tag === "turn_ended")
          const [started] = startsOf(yield* logOf(sessionId))
          assert.strictEqual(started?.inputId, inputId)
        }).pipe(Effect.provide(Troupe.layer(Layer.succeed(SessionStore, store), { host: { leaseTtl: "2 seconds" } })))
      }))

    it.effect("a live lease of a crashed owner is waited out: the turn resumes at the first poll after it expires", () =>
      Effect.gen(function*() {
        const store = yield* MemorySessionStore.make
        const { me, sessionId, turnId } = yield* crashedSession(store, "expired")
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const host = yield* SessionHost
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          assert.deepStrictEqual(yield* host.running, [], "the dead owner's lease still stands")
          assert.strictEqual((yield* store.get(sessionId)).activeTurnId, turnId)
          // Polls every 2 s; the dead lease expires at 5 s.
          yield* TestClock.adjust("4 seconds")
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          assert.isNull(endsOf(yield* logOf(sessionId))[0] ?? null)
          yield* TestClock.adjust("2 seconds")
          const result = yield* sessions.awaitTurn(me, sessionId, turnId)
          assert.strictEqual(result.output, "You said: unfinished business")
        }).pipe(Effect.provide(Troupe.layer(Layer.succeed(SessionStore, store), { host: { leaseTtl: "2 seconds" } })))
      }))
  })

  describe("hand-over on a SQLite file", () => {
    /**
     * Host 1 runs on `file` with a held model: a turn runs, two messages queue
     * behind it. Then its layer scope is closed mid-turn.
     */
    const firstHost = (file: string, crash: boolean) =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        const scope = yield* Scope.make()
        const options: Troupe.RuntimeOptions = { model: model.layer, host: { leaseTtl: "2 seconds", owner: "host-1" } }
        const runtime = crash
          ? Troupe.layer(neverReleases(SqliteSessionStore.layer({ filename: file })), options)
          : Troupe.layerSqlite({ filename: file }, options)
        const context = yield* Layer.buildWithScope(runtime, scope)
        const work = yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          const first = yield* sessions.send(me, session.id, { text: "one" })
          const call = yield* Queue.take(model.held)
          assert.strictEqual((yield* sessions.send(me, session.id, { text: "two" })).disposition, "queued")
          assert.strictEqual((yield* sessions.send(me, session.id, { text: "three" })).disposition, "queued")
          return { me, sessionId: session.id, turnId: first.turnId!, call }
        }).pipe(Effect.provide(context))
        // Closing the scope interrupts host 1's actors mid-turn. Its actor's
        // finalizer gives the lease back (a clean shutdown) unless `crash`, where
        // the store never releases: the lease is left to expire, as after a kill -9.
        yield* Scope.close(scope, Exit.void)
        assert.isTrue(yield* Deferred.isDone(work.call.interrupted), "host 1's model call was cut off")
        return work
      })

    for (const crash of [false, true]) {
      it.effect(
        crash
          ? "after host 1 crashes mid-turn, host 2 on the same file waits out the lease and finishes all queued work"
          : "after host 1 shuts down mid-turn, host 2 on the same file finishes all queued work at start-up",
        () =>
          Effect.gen(function*() {
            const file = freshFile()
            const { me, sessionId, turnId } = yield* firstHost(file, crash)
            yield* Effect.gen(function*() {
              const sessions = yield* Sessions
              const store = yield* SessionStore
              const host = yield* SessionHost
              // What host 1 left: an active turn and two queued messages, nothing ended.
              const left = yield* store.get(sessionId)
              assert.strictEqual(left.activeTurnId, turnId)
              assert.strictEqual((yield* store.readInbox(sessionId)).length, 2)
              if (crash) {
                for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
                assert.deepStrictEqual(yield* host.running, [], "host 1's lease still stands")
                assert.strictEqual((yield* store.get(sessionId)).headSeq, left.headSeq)
                // The lease's TTL, and one claim tick of a host on a shared file (a second, ±25 %) after it.
                yield* TestClock.adjust("3300 millis")
              }
              yield* collectUntil(
                sessions.events(me, sessionId),
                (r) => r._tag === "turn_ended" && r.output === "You said: three"
              )
              const log = yield* logOf(sessionId)
              assertTurnsSerial(log)
              assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["one", "two", "three"])
              assert.strictEqual(startsOf(log)[0]!.turnId, turnId)
              assert.deepStrictEqual(endsOf(log).map((e) => [e.outcome, e.output]), [
                ["completed", "You said: one"],
                ["completed", "You said: two"],
                ["completed", "You said: three"]
              ])
              assert.strictEqual((yield* sessions.snapshot(me, sessionId)).pendingInputs, 0)
              assert.isNull((yield* store.get(sessionId)).activeTurnId)
            }).pipe(Effect.provide(Troupe.layerSqlite({ filename: file }, { host: { leaseTtl: "2 seconds", owner: "host-2" } })))
          }),
        { timeout: 20_000 }
      )
    }
  })

  it.effect("drain waits for busy turns to finish or park, up to its grace period", () =>
    Effect.gen(function*() {
      const model = yield* gatedModel()
      return yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const host = yield* SessionHost
        const me = principal()
        // Nothing busy: drained at once.
        assert.isTrue(yield* host.drain("1 second"))
        const session = yield* sessions.create(me, { agent: agent() })
        const accepted = yield* sessions.send(me, session.id, { text: "slow" })
        const call = yield* Queue.take(model.held)
        // A turn inside a model call is busy: the grace period runs out.
        const draining = yield* Effect.fork(host.drain("5 seconds"))
        yield* TestClock.adjust("5 seconds")
        assert.isFalse(yield* Fiber.join(draining))
        // Once it finishes, the host drains.
        const again = yield* Effect.fork(host.drain("5 seconds"))
        yield* call.release("done")
        yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        assert.isTrue(yield* Fiber.join(again))
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
    }))
})
