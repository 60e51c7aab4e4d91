/**
 * The session actor, driven through the public `Sessions` API on the
 * in-process host: turn ordering, busy policies, exact interrupts, and what a
 * lost lease does. Model calls are held by a gated model, so "a turn is
 * running" is a fact the test controls rather than a timing hope.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Queue, Ref, TestClock } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import { ModelError } from "../src/schema/Errors.js"
import { makeTurnId, type SessionId, type TurnId } from "../src/schema/Ids.js"
import { Message, Steer } from "../src/schema/Inbox.js"
import { type InputApplied, type RecordBody, Renamed, TurnEnded, type TurnStarted } from "../src/schema/Record.js"
import { Usage } from "../src/schema/Budget.js"
import type { Lease } from "../src/schema/Lease.js"
import type { BusyPolicy } from "../src/schema/Policy.js"
import type { Principal } from "../src/schema/Principal.js"
import type * as Model from "../src/services/Model.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Troupe from "../src/Troupe.js"
import {
  assertTurnsSerial,
  collectUntil,
  endsOf,
  endsOfTurn,
  eventually,
  gatedModel,
  type GatedModel,
  type HeldCall,
  lastUser,
  logOf,
  mentions,
  some,
  stallable,
  startsOf
} from "./support/actors.js"
import { agent, commit, failure, inputId, principal } from "./support/fixtures.js"

/** A session whose first turn is running: its model call is held by the test. */
interface Busy {
  readonly sessions: Sessions["Type"]
  readonly store: SessionStore["Type"]
  readonly model: GatedModel
  readonly me: Principal
  readonly sessionId: SessionId
  readonly turnId: TurnId
  readonly call: HeldCall
}

/** Starts a session on `policy` with a turn for "first" running, and hands it to `body`. */
const whileBusy = <A, E>(
  policy: BusyPolicy,
  body: (busy: Busy) => Effect.Effect<A, E, Sessions | SessionStore | SessionHost>,
  hold: (request: Model.Request) => boolean = () => true
) =>
  Effect.gen(function*() {
    const model = yield* gatedModel(hold)
    return yield* Effect.gen(function*() {
      const sessions = yield* Sessions
      const store = yield* SessionStore
      const me = principal()
      const session = yield* sessions.create(me, { agent: agent(), busyPolicy: policy })
      const accepted = yield* sessions.send(me, session.id, { text: "first" })
      assert.strictEqual(accepted.disposition, "started")
      const call = yield* Queue.take(model.held)
      assert.strictEqual(call.text, "first")
      return yield* body({ sessions, store, model, me, sessionId: session.id, turnId: accepted.turnId!, call })
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

const turnEndedWith = (output: string) => (record: RecordBody) =>
  record._tag === "turn_ended" && record.output === output

describe("SessionActor", () => {
  it.effect("100 messages sent back to back run as 100 turns, in sending order, never two at once", () =>
    Effect.gen(function*() {
      // Only the first call is held, so the first 30 sends surely arrive while a
      // turn runs; the rest race with turns that finish as fast as they start.
      const model = yield* gatedModel((request) => lastUser(request) === "message 0")
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const texts = Array.from({ length: 100 }, (_, i) => `message ${i}`)
        const dispositions: Array<string> = []
        const startedTurns = new Map<number, TurnId>()
        const send = (i: number) =>
          Effect.gen(function*() {
            const accepted = yield* sessions.send(me, session.id, { text: texts[i]! })
            dispositions[i] = accepted.disposition
            if (accepted.disposition === "started") startedTurns.set(i, accepted.turnId!)
          })
        yield* send(0)
        const first = yield* Queue.take(model.held)
        for (let i = 1; i < 30; i++) yield* send(i)
        yield* first.release("You said: message 0")
        for (let i = 30; i < 100; i++) yield* send(i)
        yield* collectUntil(sessions.events(me, session.id), turnEndedWith("You said: message 99"))

        assert.strictEqual(dispositions[0], "started")
        assert.deepStrictEqual(dispositions.slice(1, 30), Array.from({ length: 29 }, () => "queued"))
        for (const d of dispositions) assert.include(["started", "queued"], d)

        const log = yield* logOf(session.id)
        const starts = startsOf(log)
        assert.deepStrictEqual(starts.map((s) => s.text), texts)
        assertTurnsSerial(log)
        const ends = endsOf(log)
        assert.strictEqual(ends.length, 100)
        ends.forEach((ended, i) => {
          assert.strictEqual(ended.turnId, starts[i]!.turnId)
          assert.strictEqual(ended.outcome, "completed")
          // Each turn's model call answered that turn's own message.
          assert.strictEqual(ended.output, `You said: ${texts[i]}`)
        })
        for (const [i, turnId] of startedTurns) assert.strictEqual(starts[i]!.turnId, turnId)
        const requests = yield* Ref.get(model.requests)
        assert.deepStrictEqual(requests.map(lastUser), texts)
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
    }))

  describe("busy policies", () => {
    it.effect("queue: a message during a turn is queued and runs as the next turn, after it", () =>
      whileBusy("queue", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const second = yield* sessions.send(me, sessionId, { text: "second" })
          assert.strictEqual(second.disposition, "queued")
          assert.isUndefined(second.turnId)
          assert.deepStrictEqual(startsOf(yield* logOf(sessionId)).map((s) => s.text), ["first"])
          assert.strictEqual((yield* sessions.snapshot(me, sessionId)).pendingInputs, 1)

          yield* call.release("one")
          const result = yield* sessions.awaitTurn(me, sessionId, turnId)
          assert.strictEqual(result.output, "one")
          const next = yield* Queue.take(model.held)
          assert.strictEqual(next.text, "second")
          // The queued turn sees the finished one in its history.
          assert.deepStrictEqual(next.request.messages.map((m) => m.content), ["first", "one", "second"])
          yield* next.release("two")
          yield* collectUntil(sessions.events(me, sessionId), turnEndedWith("two"))
          const log = yield* logOf(sessionId)
          assertTurnsSerial(log)
          assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["first", "second"])
          assert.deepStrictEqual(endsOf(log).map((e) => e.outcome), ["completed", "completed"])
        })))

    it.effect("steer: a message during a turn is steered into it, recorded and consumed", () =>
      whileBusy("steer", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const second = yield* sessions.send(me, sessionId, { text: "second" })
          assert.strictEqual(second.disposition, "steered")
          assert.strictEqual(second.turnId, turnId)
          const log = yield* logOf(sessionId)
          const applied = log.map((r) => r.body).filter((b): b is InputApplied => b._tag === "input_applied")
          assert.strictEqual(applied.length, 1)
          assert.strictEqual(applied[0]!.inputId, second.inputId)
          assert.strictEqual(applied[0]!.kind, "steer")
          assert.strictEqual(applied[0]!.turnId, turnId)
          assert.strictEqual((yield* sessions.snapshot(me, sessionId)).pendingInputs, 0)
          // A steer never starts a turn of its own.
          assert.strictEqual(startsOf(log).length, 1)
          yield* call.release("one")
          // The steer arrived during the first model call, so the turn answers it with a second call.
          const again = yield* Queue.take(model.held)
          assert.strictEqual(again.text, "second")
          yield* again.release("two")
          const result = yield* sessions.awaitTurn(me, sessionId, turnId)
          assert.strictEqual(result.output, "two")
          assert.strictEqual(result.usage.modelCalls, 2)
        })))

    it.effect("steers admitted together with the turn's message reach that turn's model call", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const host = yield* SessionHost
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          // Both are in the inbox before the actor looks: it starts the turn and
          // steers it in one pass, before the turn's first model call.
          yield* store.push(session.id, new Message({ inputId: inputId(), text: "first" }))
          yield* store.push(session.id, new Steer({ inputId: inputId(), text: "and also this" }))
          yield* host.wake(session.id)
          const call = yield* Queue.take(model.held)
          assert.deepStrictEqual(call.request.messages.map((m) => m.content), ["first", "and also this"])
          yield* call.release("both")
          yield* collectUntil(sessions.events(me, session.id), turnEndedWith("both"))
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))

    it.effect("a steer that arrives during the turn's model call reaches the turn's next model call", () =>
      whileBusy("steer", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const steered = yield* sessions.send(me, sessionId, { text: "please also do this" })
          assert.strictEqual(steered.disposition, "steered")
          yield* call.release("one")
          yield* sessions.awaitTurn(me, sessionId, turnId)
          // Either the running turn calls the model again with it, or a later turn sees it.
          const next = yield* sessions.send(me, sessionId, { text: "next" })
          yield* sessions.awaitTurn(me, sessionId, next.turnId!)
          const requests = yield* Ref.get(model.requests)
          assert.isTrue(
            requests.some((request) => mentions(request, "please also do this")),
            "the steered text never reached the model"
          )
        }), (request) => lastUser(request) === "first"))

    it.effect("a steer a turn consumed stays in the history of the next turn", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const host = yield* SessionHost
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          yield* store.push(session.id, new Message({ inputId: inputId(), text: "first" }))
          yield* store.push(session.id, new Steer({ inputId: inputId(), text: "and also this" }))
          yield* host.wake(session.id)
          yield* (yield* Queue.take(model.held)).release("both")
          yield* collectUntil(sessions.events(me, session.id), turnEndedWith("both"))
          yield* sessions.send(me, session.id, { text: "next" })
          const next = yield* Queue.take(model.held)
          assert.deepStrictEqual(next.request.messages.map((m) => m.content), ["first", "and also this", "both", "next"])
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))

    it.effect("reject: a message during a turn is SessionBusy, recorded as rejected, and never runs", () =>
      whileBusy("reject", ({ call, me, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const busy = yield* failure(sessions.send(me, sessionId, { text: "second", inputId: "in-second" }), "SessionBusy")
          assert.strictEqual(busy.sessionId, sessionId)
          assert.strictEqual(busy.activeTurnId, turnId)
          const log = yield* logOf(sessionId)
          const rejected = log.map((r) => r.body).filter((b): b is InputApplied => b._tag === "input_applied")
          assert.strictEqual(rejected.length, 1)
          assert.strictEqual(rejected[0]!.inputId, "in-second")
          assert.strictEqual(rejected[0]!.kind, "message")
          assert.strictEqual(rejected[0]!.turnId, turnId)
          assert.deepStrictEqual(rejected[0]!.detail, { rejected: "busy" })
          assert.strictEqual((yield* sessions.snapshot(me, sessionId)).pendingInputs, 0)
          // The running turn is untouched.
          assert.isFalse(yield* Deferred.isDone(call.interrupted))
          yield* call.release("one")
          assert.strictEqual((yield* sessions.awaitTurn(me, sessionId, turnId)).output, "one")
          const after = yield* logOf(sessionId)
          assert.deepStrictEqual(startsOf(after).map((s) => s.text), ["first"])
          // Once idle, a message starts a turn again.
          const third = yield* sessions.send(me, sessionId, { text: "third" })
          assert.strictEqual(third.disposition, "started")
        })))

    it.effect("interrupt: a message during a turn interrupts it and starts the next turn", () =>
      whileBusy("interrupt", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const second = yield* sessions.send(me, sessionId, { text: "second" })
          assert.strictEqual(second.disposition, "started")
          assert.notStrictEqual(second.turnId, turnId)
          // The held model call was really interrupted.
          yield* Deferred.await(call.interrupted)
          const stopped = yield* failure(sessions.awaitTurn(me, sessionId, turnId), "TurnInterrupted")
          assert.strictEqual(stopped.turnId, turnId)
          assert.strictEqual(stopped.reason, "superseded by a new message")
          const next = yield* Queue.take(model.held)
          assert.strictEqual(next.text, "second")
          yield* next.release("two")
          assert.strictEqual((yield* sessions.awaitTurn(me, sessionId, second.turnId!)).output, "two")
          const log = yield* logOf(sessionId)
          assertTurnsSerial(log)
          assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["first", "second"])
          assert.deepStrictEqual(endsOf(log).map((e) => e.outcome), ["interrupted", "completed"])
        })))

    it.effect("send with mode steer: steers a running turn, starts a turn on an idle session", () =>
      whileBusy("queue", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const steered = yield* sessions.send(me, sessionId, { text: "steer me", mode: "steer" })
          assert.strictEqual(steered.disposition, "steered")
          assert.strictEqual(steered.turnId, turnId)
          yield* call.release("one")
          const again = yield* Queue.take(model.held)
          assert.strictEqual(again.text, "steer me")
          yield* again.release("one again")
          yield* sessions.awaitTurn(me, sessionId, turnId)
          const started = yield* sessions.send(me, sessionId, { text: "idle steer", mode: "steer" })
          assert.strictEqual(started.disposition, "started")
          const next = yield* Queue.take(model.held)
          assert.strictEqual(next.text, "idle steer")
          yield* next.release("two")
          yield* sessions.awaitTurn(me, sessionId, started.turnId!)
          const log = yield* logOf(sessionId)
          assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["first", "idle steer"])
        })))
  })

  describe("interrupt", () => {
    it.effect("interrupts exactly the running turn: its model call stops and it ends interrupted", () =>
      whileBusy("queue", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const outcome = yield* sessions.interrupt(me, sessionId, turnId, "user pressed stop")
          assert.strictEqual(outcome.outcome, "interrupted")
          assert.strictEqual(outcome.turnId, turnId)
          assert.isTrue(yield* Deferred.isDone(call.interrupted), "the model call's onInterrupt ran before the decision")
          const log = yield* logOf(sessionId)
          const ends = endsOfTurn(log, turnId)
          assert.strictEqual(ends.length, 1)
          assert.strictEqual(ends[0]!.outcome, "interrupted")
          assert.strictEqual(ends[0]!.reason, "user pressed stop")
          const applied = log.map((r) => r.body).filter((b): b is InputApplied => b._tag === "input_applied")
          assert.deepStrictEqual(applied.map((a) => [a.kind, a.turnId, a.detail]), [
            ["interrupt", turnId, { outcome: "interrupted" }]
          ])
          // The model call never returned, so nothing of it is recorded.
          assert.isFalse(log.some((r) => r.body._tag === "operation_started"))
          const error = yield* failure(sessions.awaitTurn(me, sessionId, turnId), "TurnInterrupted")
          assert.strictEqual(error.reason, "user pressed stop")
          const session = yield* sessions.get(me, sessionId)
          assert.strictEqual(session.status, "idle")
          assert.isNull(session.activeTurnId)
          // The session goes on.
          const next = yield* sessions.send(me, sessionId, { text: "again" })
          assert.strictEqual(next.disposition, "started")
          yield* (yield* Queue.take(model.held)).release("fine")
          assert.strictEqual((yield* sessions.awaitTurn(me, sessionId, next.turnId!)).output, "fine")
        })))

    it.effect("a model error ends the turn failed; awaitTurn fails with TurnFailed and the session goes on", () =>
      whileBusy("queue", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          yield* call.fail(new ModelError({ reason: "overloaded", retryable: true }))
          const failed = yield* failure(sessions.awaitTurn(me, sessionId, turnId), "TurnFailed")
          assert.strictEqual(failed.failureCode, "model_error")
          assert.deepStrictEqual(failed.failure, { _tag: "ModelError", reason: "overloaded", retryable: true })
          const log = yield* logOf(sessionId)
          assert.deepStrictEqual(log.slice(1).map((r) => r.body._tag), [
            "turn_started",
            "operation_started",
            "operation_completed",
            "turn_ended"
          ])
          const next = yield* sessions.send(me, sessionId, { text: "retry" })
          assert.strictEqual(next.disposition, "started")
          yield* (yield* Queue.take(model.held)).release("ok")
          assert.strictEqual((yield* sessions.awaitTurn(me, sessionId, next.turnId!)).output, "ok")
        })))

    it.effect("a stale interrupt naming another turn is TurnMismatch and the running turn goes on", () =>
      whileBusy("queue", ({ call, me, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          const other = yield* makeTurnId
          const mismatch = yield* failure(sessions.interrupt(me, sessionId, other), "TurnMismatch")
          assert.strictEqual(mismatch.sessionId, sessionId)
          assert.strictEqual(mismatch.expectedTurnId, other)
          assert.strictEqual(mismatch.activeTurnId, turnId)
          assert.isFalse(yield* Deferred.isDone(call.interrupted))
          const session = yield* sessions.get(me, sessionId)
          assert.strictEqual(session.activeTurnId, turnId)
          assert.strictEqual(session.status, "running")
          yield* call.release("still here")
          const result = yield* sessions.awaitTurn(me, sessionId, turnId)
          assert.strictEqual(result.output, "still here")
          const log = yield* logOf(sessionId)
          assert.deepStrictEqual(endsOfTurn(log, turnId).map((e) => e.outcome), ["completed"])
          const applied = log.map((r) => r.body).filter((b): b is InputApplied => b._tag === "input_applied")
          assert.deepStrictEqual(applied.map((a) => [a.turnId, a.detail]), [[other, { outcome: "turn_mismatch" }]])
          // With nothing running, any turn id that never ran is a mismatch too.
          const idle = yield* failure(sessions.interrupt(me, sessionId, other), "TurnMismatch")
          assert.isNull(idle.activeTurnId)
        })))

    it.effect("interrupting a turn that already ended reports already_ended and changes nothing", () =>
      whileBusy("queue", ({ call, me, model, sessionId, sessions, turnId }) =>
        Effect.gen(function*() {
          yield* call.release("done")
          yield* sessions.awaitTurn(me, sessionId, turnId)
          const outcome = yield* sessions.interrupt(me, sessionId, turnId)
          assert.strictEqual(outcome.outcome, "already_ended")
          assert.strictEqual(outcome.turnId, turnId)
          // Also while a later turn runs: the stale id names an ended turn, not the running one.
          const second = yield* sessions.send(me, sessionId, { text: "second" })
          const next = yield* Queue.take(model.held)
          assert.strictEqual((yield* sessions.interrupt(me, sessionId, turnId)).outcome, "already_ended")
          assert.isFalse(yield* Deferred.isDone(next.interrupted))
          yield* next.release("two")
          assert.strictEqual((yield* sessions.awaitTurn(me, sessionId, second.turnId!)).output, "two")
          const log = yield* logOf(sessionId)
          assertTurnsSerial(log)
          assert.deepStrictEqual(endsOf(log).map((e) => e.outcome), ["completed", "completed"])
        })))

    it.effect("an interrupt racing the turn's completion has exactly one consistent outcome", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          const seen = { interrupted: 0, already_ended: 0 }
          for (let i = 0; i < 60; i++) {
            const accepted = yield* sessions.send(me, session.id, { text: `race ${i}` })
            assert.strictEqual(accepted.disposition, "started", `iteration ${i}`)
            const turnId = accepted.turnId!
            const call = yield* Queue.take(model.held)
            // Vary who gets ahead by a few scheduler turns each way.
            const release = Effect.zipRight(Effect.repeatN(Effect.yieldNow(), i % 7), call.release(`done ${i}`))
            const interrupt = Effect.zipRight(
              Effect.repeatN(Effect.yieldNow(), (i * 3) % 5),
              sessions.interrupt(me, session.id, turnId, "race")
            )
            const [, outcome] = yield* Effect.all([release, interrupt], { concurrency: "unbounded" })
            seen[outcome.outcome as "interrupted" | "already_ended"]++
            const awaited = yield* Effect.either(sessions.awaitTurn(me, session.id, turnId))
            const ends = endsOfTurn(yield* logOf(session.id), turnId)
            assert.strictEqual(ends.length, 1, `iteration ${i}: one turn_ended`)
            if (outcome.outcome === "interrupted") {
              assert.strictEqual(ends[0]!.outcome, "interrupted", `iteration ${i}`)
              assert.strictEqual(ends[0]!.reason, "race")
              assert.isTrue(awaited._tag === "Left" && awaited.left._tag === "TurnInterrupted")
            } else {
              assert.strictEqual(outcome.outcome, "already_ended", `iteration ${i}`)
              assert.strictEqual(ends[0]!.outcome, "completed", `iteration ${i}`)
              assert.isTrue(awaited._tag === "Right" && awaited.right.output === `done ${i}`)
            }
          }
          // Both sides of the race were exercised, and the session is healthy after it.
          assert.isAbove(seen.interrupted, 0)
          assert.isAbove(seen.already_ended, 0)
          const last = yield* sessions.send(me, session.id, { text: "after the races" })
          yield* (yield* Queue.take(model.held)).release("calm")
          assert.strictEqual((yield* sessions.awaitTurn(me, session.id, last.turnId!)).output, "calm")
          const log = yield* logOf(session.id)
          assertTurnsSerial(log)
          assert.strictEqual(startsOf(log).length, 61)
          assert.strictEqual(endsOf(log).length, 61)
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))
  })

  describe("lease loss", () => {
    /**
     * How the lease is stolen, honestly: the memory store's renewals are
     * stalled (as by a partition between host and store) while TestClock moves
     * past the TTL, so the lease really expires in the store; a thief then
     * acquires it through the store and writes one record.
     */
    const stolen = <A, E>(
      body: (context: {
        readonly sessions: Sessions["Type"]
        readonly host: SessionHost["Type"]
        readonly store: SessionStore["Type"]
        readonly resume: Effect.Effect<void>
        readonly call: HeldCall
        readonly me: Principal
        readonly sessionId: SessionId
        readonly headAfterSteal: number
        /** The thief's lease: the session's new owner. */
        readonly thief: Lease
      }) => Effect.Effect<A, E, Sessions | SessionHost | SessionStore>
    ) =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        const store = yield* MemorySessionStore.make
        const renewals = yield* stallable(store)
        const runtime = Troupe.layer(renewals.layer, { model: model.layer, host: { leaseTtl: "3 seconds" } })
        return yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const host = yield* SessionHost
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          yield* sessions.send(me, session.id, { text: "first" })
          const call = yield* Queue.take(model.held)
          yield* renewals.stall
          yield* TestClock.adjust("4 seconds")
          const lease = yield* some(yield* store.acquire(session.id, "thief", 60_000), "the expired lease to be free")
          // The old actor has not noticed: it still runs, its turn still waits on the model.
          assert.deepStrictEqual(yield* host.running, [session.id])
          const head = (yield* store.get(session.id)).headSeq
          yield* store.append(yield* commit(lease, head, [new Renamed({ title: "stolen" })]))
          return yield* body({
            sessions,
            host,
            store,
            resume: renewals.resume,
            call,
            me,
            sessionId: session.id,
            headAfterSteal: head + 1,
            thief: lease
          })
        }).pipe(Effect.provide(runtime))
      })

    /** Lets every fiber run its course, then checks the old actor wrote nothing after the steal. */
    const assertNothingMoreWritten = (
      store: SessionStore["Type"],
      host: SessionHost["Type"],
      sessionId: SessionId,
      headAfterSteal: number
    ) =>
      Effect.gen(function*() {
        yield* eventually(Effect.map(host.running, (running) => !running.includes(sessionId)), "the old actor to stop")
        for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
        const log = yield* logOf(sessionId)
        assert.strictEqual(log.length, headAfterSteal)
        assert.strictEqual(log[log.length - 1]!.body._tag, "renamed", "the thief's record is the last one")
        assert.strictEqual((yield* store.get(sessionId)).headSeq, headAfterSteal)
        assert.deepStrictEqual(yield* host.running, [])
        // The thief still holds its lease: the old actor did not release it on the way out.
        const thief = yield* store.acquire(sessionId, "someone else", 1_000)
        assert.isTrue(Option.isNone(thief))
      })

    it.effect("a renewal refused after the lease was stolen stops the actor before it writes", () =>
      stolen(({ call, host, resume, sessionId, store, headAfterSteal }) =>
        Effect.gen(function*() {
          yield* resume
          // The keeper's stalled renewal now reaches the store and is refused.
          yield* eventually(Effect.map(host.running, (running) => running.length === 0), "the actor to stop")
          // Stopping the actor interrupted its turn, and with it the model call.
          assert.isTrue(yield* Deferred.isDone(call.interrupted))
          yield* call.release("too late")
          yield* assertNothingMoreWritten(store, host, sessionId, headAfterSteal)
        })))

    it.effect("a caller awaiting the turn here learns its end from the log when the actor here stopped and the new owner ended it", () =>
      stolen(({ call, host, me, resume, sessionId, sessions, store, thief }) =>
        Effect.gen(function*() {
          const started = (yield* logOf(sessionId)).find((record) => record.body._tag === "turn_started")!
          const turnId = (started.body as TurnStarted).turnId
          // Asked while the actor here still runs the turn: its end would be announced here.
          const waiting = yield* Effect.fork(sessions.awaitTurn(me, sessionId, turnId))
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          yield* resume
          yield* eventually(Effect.map(host.running, (running) => running.length === 0), "the old actor to stop")
          yield* call.release("too late")
          // The new owner (another process, say) resumes the turn and ends it: nothing is announced here.
          const head = (yield* store.get(sessionId)).headSeq
          yield* store.append(
            yield* commit(thief, head, [
              new TurnEnded({ turnId, outcome: "completed", output: "from the new owner", usage: Usage.zero })
            ])
          )
          yield* TestClock.adjust("1 second")
          yield* eventually(Effect.map(Fiber.poll(waiting), Option.isSome), "the caller to learn the turn ended")
          assert.strictEqual((yield* Fiber.join(waiting)).output, "from the new owner")
        })))

    it.effect("a turn that finishes after its lease was stolen is fenced off and the actor stops", () =>
      stolen(({ call, host, sessionId, store, headAfterSteal }) =>
        Effect.gen(function*() {
          // Renewals stay stalled: the old actor does not know yet. Its turn's
          // commit is the first thing to hit the store, and the epoch fence refuses it.
          assert.deepStrictEqual(yield* host.running, [sessionId])
          yield* call.release("too late")
          yield* assertNothingMoreWritten(store, host, sessionId, headAfterSteal)
        })))
  })
})

