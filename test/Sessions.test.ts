/**
 * The public `Sessions` API: event subscriptions from any cursor (a property
 * test), workspace isolation of every method, and rename/archive/close.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Either, Exit, Fiber, Layer, Option, Queue, Stream, TestClock } from "effect"
import { FastCheck as fc } from "effect"
import type {
  BudgetExhausted,
  ChildControlForbidden,
  Conflict,
  InvalidCallbackAnswer,
  InvalidInput,
  SessionBusy,
  SessionClosed,
  SessionNotFound,
  StaleCallback,
  StoreUnavailable,
  TurnFailed,
  TurnInterrupted,
  TurnMismatch,
  TurnNotFound
} from "../src/schema/Errors.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import { Durable } from "../src/schema/Event.js"
import { CallbackId, makeSessionId, makeTurnId, type SessionId } from "../src/schema/Ids.js"
import { Principal } from "../src/schema/Principal.js"
import type { Closed, InputApplied } from "../src/schema/Record.js"
import * as Model from "../src/services/Model.js"
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
  logOf,
  startsOf
} from "./support/actors.js"
import { agent, failure, message, principal } from "./support/fixtures.js"

/** Every error a `Sessions` method can fail with. */
type AnyError =
  | SessionNotFound
  | StoreUnavailable
  | SessionClosed
  | SessionBusy
  | Conflict
  | InvalidInput
  | TurnMismatch
  | TurnFailed
  | TurnInterrupted
  | TurnNotFound
  | BudgetExhausted
  | StaleCallback
  | ChildControlForbidden
  | InvalidCallbackAnswer

describe("Sessions", () => {
  describe("events", () => {
    const subscriber = fc.record({
      /** Subscribe after this many messages were sent (0: before any turn). */
      step: fc.nat(),
      /** Where the cursor lands, as a fraction of a little beyond the head at that moment. */
      cursor: fc.double({ min: 0, max: 1, noNaN: true }),
      volatile: fc.boolean()
    })

    it.effect.prop(
      "a subscription from any cursor, made before or during turns, is exactly the log after it",
      {
        messages: fc.integer({ min: 1, max: 6 }),
        subscribers: fc.array(subscriber, { minLength: 1, maxLength: 6 }),
        // How many scheduler turns the model takes per call: turns overlap sends and subscriptions differently.
        delays: fc.array(fc.nat({ max: 20 }), { minLength: 1, maxLength: 6 }),
        // A tiny live buffer makes lagging subscribers backfill from the log.
        liveBuffer: fc.constantFrom(1, 2, 4096)
      },
      ({ delays, liveBuffer, messages, subscribers }) =>
        Effect.gen(function*() {
          const model = yield* gatedModel()
          yield* Effect.gen(function*() {
            const sessions = yield* Sessions
            const store = yield* SessionStore
            const me = principal()
            const session = yield* sessions.create(me, { agent: agent() })
            const texts = Array.from({ length: messages }, (_, i) => (i === messages - 1 ? "final" : `m${i}`))
            // Every turn writes four records after session_created; nothing else is written.
            const finalHead = 1 + 4 * messages
            // Answers every held call after its delay, in the background.
            let calls = 0
            yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
              const call = yield* Queue.take(model.held)
              yield* Effect.repeatN(Effect.yieldNow(), delays[calls++ % delays.length]!)
              yield* call.release(`answer ${call.text}`)
            })))
            const plans = [{ step: 0, cursor: 0, volatile: false }, ...subscribers]
            const forked: Array<{ readonly after: number; readonly fiber: Fiber.RuntimeFiber<ReadonlyArray<unknown>, unknown> }> = []
            const subscribeAt = (step: number) =>
              Effect.gen(function*() {
                for (const plan of plans.filter((p) => p.step % (messages + 1) === step)) {
                  const head = (yield* store.get(session.id)).headSeq
                  const after = step === 0 && plan.cursor === 0
                    ? 0
                    : Math.min(finalHead - 1, Math.floor(plan.cursor * (head + 5)))
                  const fiber = yield* Effect.fork(
                    collectUntil(
                      sessions.events(me, session.id, { after, volatile: plan.volatile }),
                      (record) => record._tag === "turn_ended" && record.output === "answer final"
                    )
                  )
                  forked.push({ after, fiber })
                }
              })
            for (let i = 0; i < messages; i++) {
              yield* subscribeAt(i)
              yield* sessions.send(me, session.id, { text: texts[i]! })
            }
            yield* subscribeAt(messages)
            for (const { after, fiber } of forked) {
              const received = yield* Fiber.join(fiber)
              const log = yield* logOf(session.id)
              assert.strictEqual(log.length, finalHead)
              const expected = log.filter((record) => record.seq > after).map(Durable.fromRecord)
              assert.deepStrictEqual(received, expected, `subscription after ${after}`)
            }
            const log = yield* logOf(session.id)
            assertTurnsSerial(log)
            assert.deepStrictEqual(startsOf(log).map((s) => s.text), texts)
          }).pipe(
            Effect.scoped,
            Effect.provide(Troupe.layerTest({ model: model.layer, host: { liveBuffer } }))
          )
        }),
      { fastCheck: { numRuns: 25 } }
    )

    it.effect("a subscriber that falls behind the live buffer backfills from the log, without gap or duplicate", () =>
      Effect.gen(function*() {
        const inner = yield* MemorySessionStore.make
        const reads: Array<number> = []
        const counting = SessionStore.of({
          ...inner,
          readLog: (sessionId, options) => {
            reads.push(options?.after ?? 0)
            return inner.readLog(sessionId, options)
          }
        })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          // Subscribed from the start, but slow: a buffer of one keeps only the newest event.
          const slow = yield* Effect.fork(
            collectUntil(
              sessions.events(me, session.id).pipe(Stream.tap(() => Effect.repeatN(Effect.yieldNow(), 50))),
              (record) => record._tag === "turn_ended" && record.output === "You said: m9"
            )
          )
          for (let i = 0; i < 10; i++) yield* sessions.send(me, session.id, { text: `m${i}` })
          const received = yield* Fiber.join(slow)
          const log = yield* logOf(session.id)
          assert.strictEqual(log.length, 41)
          assert.deepStrictEqual(received, log.map(Durable.fromRecord))
          // The replay read from 0; anything after that was a backfill of a gap.
          assert.isTrue(reads.some((after) => after > 0), "a gap was backfilled from the log")
        }).pipe(
          Effect.provide(Troupe.layer(Layer.succeed(SessionStore, counting), { host: { liveBuffer: 1 } }))
        )
      }))

    it.effect("without follow, a subscription replays the log and ends", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const accepted = yield* sessions.send(me, session.id, { text: "hello" })
        yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        const replay = yield* Stream.runCollect(sessions.events(me, session.id, { after: 2, follow: false }))
        const log = yield* logOf(session.id)
        assert.deepStrictEqual([...replay], log.slice(2).map(Durable.fromRecord))
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("the last subscriber leaving while a turn streams does not stop the turn", () => {
      // A model that streams one word at a time, yielding between words, so the
      // subscriber leaves while the turn is still publishing.
      const slow = Layer.succeed(Model.Model, Model.Model.of({
        stream: () =>
          Stream.range(1, 300).pipe(
            Stream.rechunk(1),
            Stream.tap(() => Effect.yieldNow()),
            Stream.map((i) => Model.Event.TextDelta({ text: `w${i} ` }))
          )
      }))
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const reader = yield* sessions.events(me, session.id, { after: 1, volatile: true }).pipe(
          Stream.filter((event) => event._tag === "assistant_delta"),
          Stream.take(10),
          Stream.runDrain,
          Effect.fork
        )
        const accepted = yield* sessions.send(me, session.id, { text: "talk" })
        yield* Fiber.join(reader)
        const result = yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        assert.strictEqual(result.output.trim().split(" ").length, 300)
      }).pipe(Effect.provide(Troupe.layerTest({ model: slow })))
    })
  })

  describe("send and awaitTurn", () => {
    it.effect("awaiting a turn an actor here runs, or the last one it ended, reads nothing from the log; an older one is found there", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        let logReads = 0
        const counted = Layer.effect(
          SessionStore,
          Effect.map(SessionStore, (store) =>
            SessionStore.of({
              ...store,
              readLog: (sessionId, page) => Effect.suspend(() => (logReads++, store.readLog(sessionId, page)))
            }))
        ).pipe(Layer.provide(MemorySessionStore.layer))
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          const accepted = yield* sessions.send(me, session.id, { text: "hi" })
          const held = yield* Queue.take(model.held)
          const before = logReads
          const waiting = yield* Effect.fork(sessions.awaitTurn(me, session.id, accepted.turnId!, { after: accepted.cursor! - 1 }))
          for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
          yield* held.release("done")
          assert.strictEqual((yield* Fiber.join(waiting)).output, "done")
          assert.strictEqual(logReads, before, "the end was announced, not read")
          // Ended, and the last turn the actor here ended: its end is had without reading either.
          const again = yield* sessions.awaitTurn(me, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
          assert.strictEqual(again.output, "done")
          assert.strictEqual(logReads, before, "the last ended turn was had from the actor here")
          // Once a later turn ended, the first one's end is found in the log.
          const second = yield* sessions.send(me, session.id, { text: "again" })
          yield* (yield* Queue.take(model.held)).release("later")
          assert.strictEqual((yield* sessions.awaitTurn(me, session.id, second.turnId!)).output, "later")
          const third = yield* sessions.awaitTurn(me, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
          assert.strictEqual(third.output, "done")
          assert.isAbove(logReads, before)
        }).pipe(Effect.provide(Troupe.layer(counted, { model: model.layer })))
      }))

    it.effect("a malformed input id is InvalidInput, and nothing is admitted", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        for (const inputId of ["", "x".repeat(129), "tab\there"]) {
          const error = yield* failure(sessions.send(me, session.id, { text: "hi", inputId }), "InvalidInput")
          assert.strictEqual(error.what, "inputId")
        }
        assert.strictEqual((yield* logOf(session.id)).length, 1)
        // Run options are checked too, given as plain data.
        const error = yield* failure(
          sessions.send(me, session.id, { text: "hi", run: { budgets: { toolCalls: -1 } } }),
          "InvalidInput"
        )
        assert.strictEqual(error.what, "run options")
        yield* failure(sessions.send(me, session.id, { text: "hi", run: { settings: { temperature: 7 } } }), "InvalidInput")
        assert.strictEqual((yield* logOf(session.id)).length, 1)
        // Well-formed plain run options are taken.
        const accepted = yield* sessions.send(me, session.id, { text: "hi", run: { budgets: { totalTokens: 0 } } })
        const exhausted = yield* failure(sessions.awaitTurn(me, session.id, accepted.turnId!), "BudgetExhausted")
        assert.strictEqual(exhausted.dimension, "totalTokens")
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("a retried send with the same inputId is not sent twice", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const first = yield* sessions.send(me, session.id, { text: "once", inputId: "in-retry" })
        assert.strictEqual(first.disposition, "started")
        yield* sessions.awaitTurn(me, session.id, first.turnId!)
        const retry = yield* sessions.send(me, session.id, { text: "once", inputId: "in-retry" })
        assert.strictEqual(retry.disposition, "admitted")
        assert.isUndefined(retry.turnId)
        const conflict = yield* failure(sessions.send(me, session.id, { text: "other", inputId: "in-retry" }), "Conflict")
        assert.strictEqual(conflict.entity, "input")
        for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
        assert.deepStrictEqual(startsOf(yield* logOf(session.id)).map((s) => s.text), ["once"])
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("a message to an idle actor here is admitted by its turn's first commit, not pushed; a busy one is pushed", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        const calls: Array<string> = []
        const counted = Layer.effect(
          SessionStore,
          Effect.map(SessionStore, (store) =>
            SessionStore.of({
              ...store,
              push: (sessionId, command) => Effect.suspend(() => (calls.push(`push ${command._tag}`), store.push(sessionId, command))),
              append: (commit) =>
                Effect.suspend(() => (calls.push(`append admits ${commit.admits?.length ?? 0}`), store.append(commit)))
            }))
        ).pipe(Layer.provide(MemorySessionStore.layer))
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          // No actor yet: pushed, and the actor started for it decides it from the inbox.
          const first = yield* sessions.send(me, session.id, { text: "one" })
          yield* (yield* Queue.take(model.held)).release("first")
          yield* sessions.awaitTurn(me, session.id, first.turnId!)
          calls.length = 0
          // The actor is idle here: the message travels in memory and its turn's start admits it.
          const second = yield* sessions.send(me, session.id, { text: "two", inputId: "in-two" })
          assert.strictEqual(second.disposition, "started")
          assert.deepStrictEqual(calls, ["append admits 1"])
          const log = yield* logOf(session.id)
          const started = log.find((record) => record.seq === second.cursor)!.body
          assert.deepStrictEqual(started._tag === "turn_started" && [started.turnId as string, started.inputId as string], [
            second.turnId!,
            "in-two"
          ])
          // It is in the inbox as a consumed item: a retry is a duplicate, another text under its id a Conflict.
          assert.deepStrictEqual(yield* store.readInbox(session.id), [])
          // Busy: the next message is pushed and queued behind the turn, as always.
          calls.length = 0
          const third = yield* sessions.send(me, session.id, { text: "three" })
          assert.strictEqual(third.disposition, "queued")
          assert.deepStrictEqual(calls.filter((call) => call.startsWith("push")), ["push message"])
          const retry = yield* sessions.send(me, session.id, { text: "two", inputId: "in-two" })
          assert.strictEqual(retry.disposition, "admitted")
          yield* failure(sessions.send(me, session.id, { text: "other", inputId: "in-two" }), "Conflict")
          yield* (yield* Queue.take(model.held)).release("second")
          yield* (yield* Queue.take(model.held)).release("third")
          yield* Effect.repeatN(Effect.yieldNow(), 50)
          assert.deepStrictEqual(startsOf(yield* logOf(session.id)).map((s) => s.text), ["one", "two", "three"])
        }).pipe(Effect.provide(Troupe.layer(counted, { model: model.layer })))
      }))

    it.effect("a message pushed through another process first is not overtaken: the store refuses the handed-over one, which is pushed behind it", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const store = yield* SessionStore
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        yield* sessions.awaitTurn(me, session.id, (yield* sessions.send(me, session.id, { text: "warm" })).turnId!)
        // Another process's push: in the store, and no bell rung here yet (its signal has not arrived).
        yield* store.push(session.id, message("from elsewhere"))
        const here = yield* sessions.send(me, session.id, { text: "from here" })
        assert.strictEqual(here.disposition, "queued")
        for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
        const log = yield* logOf(session.id)
        assertTurnsSerial(log)
        assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["warm", "from elsewhere", "from here"])
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("messages sent at once to an idle actor here each run once, one turn at a time", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        yield* sessions.awaitTurn(me, session.id, (yield* sessions.send(me, session.id, { text: "warm" })).turnId!)
        const texts = Array.from({ length: 20 }, (_, i) => `m${i}`)
        const accepted = yield* Effect.forEach(texts, (text) => sessions.send(me, session.id, { text }), { concurrency: "unbounded" })
        assert.strictEqual(accepted.filter((a) => a.disposition === "started").length >= 1, true)
        for (let i = 0; i < 400; i++) yield* Effect.yieldNow()
        const log = yield* logOf(session.id)
        assertTurnsSerial(log)
        assert.deepStrictEqual(startsOf(log).map((s) => s.text).slice(1).sort(), [...texts].sort())
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("awaitTurn with the cursor hint of send finds a turn that already ended", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const accepted = yield* sessions.send(me, session.id, { text: "quick" })
        yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        const again = yield* sessions.awaitTurn(me, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
        assert.strictEqual(again.output, "You said: quick")
        assert.strictEqual(again.turnId, accepted.turnId)
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("awaitTurn on a turn id the session never had fails with TurnNotFound instead of waiting forever", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const accepted = yield* sessions.send(me, session.id, { text: "real" })
        yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        const waiting = yield* Effect.fork(sessions.awaitTurn(me, session.id, yield* makeTurnId))
        for (let i = 0; i < 1000; i++) yield* Effect.yieldNow()
        yield* TestClock.adjust("1 minute")
        const exit = yield* Fiber.poll(waiting)
        assert.isTrue(Option.isSome(exit), "awaitTurn is still waiting for a turn that will never exist")
        assert.isTrue(Option.isSome(exit) && Exit.isFailure(exit.value))
        if (Option.isSome(exit) && Exit.isFailure(exit.value)) {
          const error = Cause.failureOption(exit.value.cause)
          assert.strictEqual(Option.isSome(error) && error.value._tag, "TurnNotFound")
        }
      }).pipe(Effect.provide(Troupe.layerTest())))
    it.effect("awaitTurn of a turn running here answers at its end; under another session's id it is TurnNotFound", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const mine = yield* sessions.create(me, { agent: agent() })
          const other = yield* sessions.create(me, { agent: agent() })
          const accepted = yield* sessions.send(me, mine.id, { text: "slow" })
          const call = yield* Queue.take(model.held)
          // The turn runs in this host: asked under the wrong session, it is not found rather than awaited.
          const wrong = yield* Effect.either(sessions.awaitTurn(me, other.id, accepted.turnId!))
          assert.isTrue(Either.isLeft(wrong) && wrong.left._tag === "TurnNotFound")
          const waiting = yield* Effect.fork(sessions.awaitTurn(me, mine.id, accepted.turnId!))
          for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
          assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "awaitTurn answered before the turn ended")
          yield* call.release("done")
          const result = yield* Fiber.join(waiting)
          assert.strictEqual(result.output, "done")
          // Ended: the same question is answered from the log.
          assert.strictEqual((yield* sessions.awaitTurn(me, mine.id, accepted.turnId!)).output, "done")
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))
  })

  describe("workspaces", () => {
    it.effect("a principal of another workspace gets SessionNotFound from every method, like an unknown id", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const owner = principal()
          const stranger = principal()
          const session = yield* sessions.create(owner, { agent: agent(), title: "private" })
          yield* store.create({ principal: owner, agent: agent("helper"), parentId: session.id, alias: "kid" })
          const accepted = yield* sessions.send(owner, session.id, { text: "secret" })
          const call = yield* Queue.take(model.held)
          const turnId = accepted.turnId!
          const before = yield* store.get(session.id)
          const logBefore = yield* logOf(session.id)

          const unknown = yield* makeSessionId
          const attempts = (who: Principal, id: SessionId): Record<string, Effect.Effect<unknown, AnyError>> => ({
            get: sessions.get(who, id),
            send: sessions.send(who, id, { text: "let me in" }),
            steer: sessions.send(who, id, { text: "let me in", mode: "steer" }),
            awaitTurn: sessions.awaitTurn(who, id, turnId),
            interrupt: sessions.interrupt(who, id, turnId, "hijack"),
            rename: sessions.rename(who, id, "mine now"),
            archive: sessions.archive(who, id, true),
            close: sessions.close(who, id),
            snapshot: sessions.snapshot(who, id),
            events: Stream.runDrain(sessions.events(who, id)),
            eventsReplay: Stream.runDrain(sessions.events(who, id, { follow: false })),
            children: sessions.list(who, { scope: { children: id } }),
            tree: sessions.list(who, { scope: { tree: id } }),
            childrenPage: sessions.children(who, id),
            subtree: sessions.tree(who, id),
            callbacks: sessions.callbacks(who, id),
            answerCallback: sessions.answerCallback(who, id, {
              callbackId: CallbackId.make("cb_01JZZZZZZZZZZZZZZZZZZZZZZZ"),
              result: { decision: "approve" }
            }),
            provideCallbacks: sessions.provideCallbacks(who, id, ["approval"], () => Effect.succeedNone)
          })
          const missing = attempts(owner, unknown)
          // Tenancy is the whole principal: the same workspace under another customer or
          // organization is as foreign as another workspace (and the owner's use warmed the cache).
          const neighbours = [
            stranger,
            new Principal({ ...principal(), workspaceId: owner.workspaceId }),
            new Principal({ ...principal(), organizationId: owner.organizationId, workspaceId: owner.workspaceId }),
            new Principal({ ...principal(), customerId: owner.customerId, workspaceId: owner.workspaceId })
          ]
          for (const who of neighbours) {
            const foreign = attempts(who, session.id)
            for (const name of Object.keys(foreign)) {
              const hidden = yield* failure(foreign[name]!, "SessionNotFound")
              const absent = yield* failure(missing[name]!, "SessionNotFound")
              assert.strictEqual(hidden.sessionId, session.id, name)
              assert.deepStrictEqual(Object.keys(hidden), Object.keys(absent), name)
              assert.strictEqual(hidden.message.replace(session.id, "ID"), absent.message.replace(unknown, "ID"), name)
            }
            assert.deepStrictEqual((yield* sessions.list(who, { includeArchived: true })).items, [], "roots")
          }
          // Nor does a listing of the stranger's own workspace show it.
          assert.deepStrictEqual((yield* sessions.list(stranger)).items, [])
          assert.deepStrictEqual((yield* sessions.list(stranger, { scope: "roots", includeArchived: true })).items, [])

          // Nothing the stranger tried reached the session.
          const after = yield* store.get(session.id)
          assert.deepStrictEqual(after, before)
          assert.deepStrictEqual(yield* logOf(session.id), logBefore)
          assert.deepStrictEqual(yield* store.readInbox(session.id), [])
          assert.isFalse(yield* Deferred.isDone(call.interrupted))
          yield* call.release("still mine")
          assert.strictEqual((yield* sessions.awaitTurn(owner, session.id, turnId)).output, "still mine")
          // Workspace ids are compared without regard to case, as the store does.
          const shouting = new Principal({ ...owner, workspaceId: owner.workspaceId.toUpperCase() })
          assert.strictEqual((yield* sessions.get(shouting, session.id)).id, session.id)
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))
  })

  describe("children from outside", () => {
    it.effect("a child refuses a message, steer or close from outside; answers, interrupts, rename, archive and reads pass", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const store = yield* SessionStore
        const me = principal()
        const root = yield* sessions.create(me, { agent: agent("lead"), title: "root" })
        const child = yield* store.create({ principal: me, agent: agent("worker"), parentId: root.id, alias: "w1" })
        const grandchild = yield* store.create({ principal: me, agent: agent("worker"), parentId: child.id, alias: "w1" })
        for (const target of [child, grandchild]) {
          const before = yield* logOf(target.id)
          const message = yield* failure(sessions.send(me, target.id, { text: "psst" }), "ChildControlForbidden")
          assert.deepStrictEqual([message.sessionId, message.parentId, message.action], [target.id, target.parentId, "message"])
          const steer = yield* failure(sessions.send(me, target.id, { text: "psst", mode: "steer" }), "ChildControlForbidden")
          assert.strictEqual(steer.action, "steer")
          const close = yield* failure(sessions.close(me, target.id), "ChildControlForbidden")
          assert.strictEqual(close.action, "close")
          assert.deepStrictEqual(yield* store.readInbox(target.id), [])
          assert.deepStrictEqual(yield* logOf(target.id), before)
        }
        // Allowed: exact interrupts (here of a turn that is not running), callback answers, metadata, reads.
        const turnId = yield* makeTurnId
        // The interrupt reaches the child's actor, which finds no such turn running.
        yield* failure(sessions.interrupt(me, child.id, turnId), "TurnMismatch")
        yield* failure(
          sessions.answerCallback(me, child.id, {
            callbackId: CallbackId.make("cb_01JZZZZZZZZZZZZZZZZZZZZZZZ"),
            result: { decision: "approve" }
          }),
          "StaleCallback"
        )
        assert.strictEqual((yield* sessions.rename(me, child.id, "researcher")).title, "researcher")
        assert.isTrue((yield* sessions.archive(me, child.id, true)).archived)
        assert.strictEqual((yield* sessions.get(me, child.id)).alias, "w1")
        assert.strictEqual((yield* sessions.snapshot(me, child.id)).session.id, child.id)
        const replayed = yield* Stream.runCollect(sessions.events(me, child.id, { follow: false }))
        assert.deepStrictEqual([...replayed], (yield* logOf(child.id)).map(Durable.fromRecord))
        assert.deepStrictEqual(yield* sessions.callbacks(me, child.id), [])
        const page = yield* sessions.children(me, root.id)
        assert.deepStrictEqual(page.items.map((item) => [item.session.id, item.alias, item.agent, item.agentPath]), [
          [child.id, "w1", "worker", ["lead", "worker"]]
        ])
        const tree = yield* sessions.tree(me, root.id, { includeArchived: true })
        assert.deepStrictEqual(tree.nodes.map((node) => [node.session.id, node.parentId]), [
          [child.id, root.id],
          [grandchild.id, child.id]
        ])
        // Without includeArchived the archived child is left out (its own children are not archived).
        assert.deepStrictEqual((yield* sessions.tree(me, root.id)).nodes.map((node) => node.session.id), [grandchild.id])
        // A root is driven from outside as ever; closing it leaves its children open.
        const accepted = yield* sessions.send(me, root.id, { text: "hi" })
        assert.strictEqual((yield* sessions.awaitTurn(me, root.id, accepted.turnId!)).output, "You said: hi")
        assert.strictEqual((yield* sessions.close(me, root.id)).status, "closed")
        assert.strictEqual((yield* sessions.get(me, child.id)).status, "idle")
        assert.strictEqual((yield* sessions.get(me, grandchild.id)).status, "idle")
      }).pipe(Effect.provide(Troupe.layerTest())))
  })

  describe("rename, archive, close", () => {
    it.effect("rename and archive take effect at once, as metadata only, and show in get and list", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent(), title: "draft" })
        const renamed = yield* sessions.rename(me, session.id, "final title")
        assert.strictEqual(renamed.title, "final title")
        assert.strictEqual((yield* sessions.get(me, session.id)).title, "final title")

        const archived = yield* sessions.archive(me, session.id, true)
        assert.isTrue(archived.archived)
        assert.deepStrictEqual((yield* sessions.list(me)).items, [])
        assert.deepStrictEqual((yield* sessions.list(me, { includeArchived: true })).items.map((s) => s.id), [session.id])
        const restored = yield* sessions.archive(me, session.id, false)
        assert.isFalse(restored.archived)
        assert.deepStrictEqual((yield* sessions.list(me)).items.map((s) => s.id), [session.id])

        // Metadata writes go through the store, not the inbox: nothing is logged or admitted (decision 0008).
        const log = yield* logOf(session.id)
        assert.deepStrictEqual(log.map((r) => r.body._tag), ["session_created"])
        assert.strictEqual(restored.headSeq, session.headSeq)
        // Still open: a message runs as usual.
        const accepted = yield* sessions.send(me, session.id, { text: "hi" })
        assert.strictEqual((yield* sessions.awaitTurn(me, session.id, accepted.turnId!)).output, "You said: hi")
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("a closed session refuses everything that would drive it, and can still be read, renamed and archived", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: agent() })
        const first = yield* sessions.send(me, session.id, { text: "before" })
        yield* sessions.awaitTurn(me, session.id, first.turnId!)
        const closed = yield* sessions.close(me, session.id)
        assert.strictEqual(closed.status, "closed")
        const refused = yield* failure(sessions.send(me, session.id, { text: "after" }), "SessionClosed")
        assert.strictEqual(refused.sessionId, session.id)
        yield* failure(sessions.send(me, session.id, { text: "after", mode: "steer" }), "SessionClosed")
        yield* failure(sessions.close(me, session.id), "SessionClosed")
        yield* failure(sessions.interrupt(me, session.id, first.turnId!), "SessionClosed")
        // Reading goes on: the session, its snapshot, its events, its turns.
        assert.strictEqual((yield* sessions.get(me, session.id)).status, "closed")
        assert.strictEqual((yield* sessions.snapshot(me, session.id)).pendingInputs, 0)
        assert.strictEqual((yield* sessions.awaitTurn(me, session.id, first.turnId!)).output, "You said: before")
        const log = yield* logOf(session.id)
        const replay = yield* Stream.runCollect(sessions.events(me, session.id, { follow: false }))
        assert.deepStrictEqual([...replay], log.map(Durable.fromRecord))
        assert.deepStrictEqual(log.slice(-2).map((r) => r.body._tag), ["closed", "input_applied"])
        assert.strictEqual(startsOf(log).length, 1)
        // Rename and archive are metadata: a closed session takes them, and its log is unchanged.
        assert.strictEqual((yield* sessions.rename(me, session.id, "filed")).title, "filed")
        const filed = yield* sessions.archive(me, session.id, true)
        assert.isTrue(filed.archived)
        assert.strictEqual(filed.status, "closed")
        assert.deepStrictEqual(yield* logOf(session.id), log)
      }).pipe(Effect.provide(Troupe.layerTest())))

    it.effect("closing during a running turn interrupts it; what was queued behind it never runs", () =>
      Effect.gen(function*() {
        const model = yield* gatedModel()
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const me = principal()
          const session = yield* sessions.create(me, { agent: agent() })
          const accepted = yield* sessions.send(me, session.id, { text: "long job" })
          const call = yield* Queue.take(model.held)
          const queued = yield* sessions.send(me, session.id, { text: "later", inputId: "in-later" })
          assert.strictEqual(queued.disposition, "queued")

          const closed = yield* sessions.close(me, session.id)
          assert.strictEqual(closed.status, "closed")
          assert.isNull(closed.activeTurnId)
          assert.isTrue(yield* Deferred.isDone(call.interrupted), "the model call was interrupted")
          const stopped = yield* failure(sessions.awaitTurn(me, session.id, accepted.turnId!), "TurnInterrupted")
          assert.strictEqual(stopped.reason, "session closed")

          // The queued message is consumed as ignored, never started.
          yield* eventually(
            Effect.map(logOf(session.id), (log) =>
              log.some((r) => r.body._tag === "input_applied" && r.body.inputId === "in-later")),
            "the queued message to be recorded as ignored"
          )
          const log = yield* logOf(session.id)
          assertTurnsSerial(log)
          assert.deepStrictEqual(startsOf(log).map((s) => s.text), ["long job"])
          const ends = endsOfTurn(log, accepted.turnId!)
          assert.deepStrictEqual(ends.map((e) => [e.outcome, e.reason]), [["interrupted", "session closed"]])
          assert.strictEqual(endsOf(log).length, 1)
          const bodies = log.map((r) => r.body)
          const closedAt = bodies.findIndex((b): b is Closed => b._tag === "closed")
          assert.isAbove(closedAt, bodies.findIndex((b) => b._tag === "turn_ended"))
          const ignored = bodies.find((b): b is InputApplied => b._tag === "input_applied" && b.inputId === "in-later")!
          assert.deepStrictEqual(ignored.detail, { ignored: "session closed" })
          assert.strictEqual((yield* sessions.snapshot(me, session.id)).pendingInputs, 0)
          yield* failure(sessions.send(me, session.id, { text: "again" }), "SessionClosed")
          // The stale turn id of the closed session is refused as closed, not looked up.
          yield* failure(sessions.interrupt(me, session.id, yield* makeTurnId), "SessionClosed")
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))
  })
})
