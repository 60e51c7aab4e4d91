/**
 * PostgreSQL's store signals: forwarded deltas and announcements fit the
 * NOTIFY payload limit (chunked and packed in order, a delta too big alone
 * skipped, a process's own deltas not read back), payloads parse into the
 * signals they carry, and the LISTEN
 * connection comes back after the server drops it: the watcher is told it may
 * have missed signals, and a commit after is signalled again. The pool's hint
 * (sessions became claimable) reaches every process on the database.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Queue, Scope } from "effect"
import pg from "pg"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import * as PgStoreSignals from "../src/layers/PgStoreSignals.js"
import * as PgWatches from "../src/layers/PgWatches.js"
import { AssistantDelta } from "../src/schema/Event.js"
import { makeInputId, makeSessionId, makeTurnId, type SessionId } from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { type Signal, StoreSignals } from "../src/services/StoreSignals.js"
import { TurnStarted } from "../src/schema/Record.js"
import { agent, commit, principal } from "./support/fixtures.js"
import { availability, baseUrl, freshSchema } from "./support/postgres.js"

const pgAvailable = await availability()

describe("PgStoreSignals payloads", () => {
  it.effect("deltas are chunked under the limit in order; one too big alone is skipped; own ones are not read back", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const turnId = yield* makeTurnId
      const texts = [...Array.from({ length: 300 }, (_, i) => `word ${i} ${"é".repeat(20)} `), "x".repeat(9000), "last"]
      const events = texts.map((text) => new AssistantDelta({ sessionId, turnId, text }, true))
      const payloads = PgStoreSignals.deltaPayloads("origin-a", sessionId, events)
      assert.isAbove(payloads.length, 1)
      for (const payload of payloads) assert.isAtMost(Buffer.byteLength(payload), 7900)
      // Packed with log lines into NOTIFY payloads, each under the limit, nothing lost or reordered.
      const packed = PgStoreSignals.pack([...payloads, `l ${sessionId} 42`, `i ${sessionId} 7`])
      for (const payload of packed) assert.isAtMost(Buffer.byteLength(payload), 7900)
      const back = packed.flatMap((p) => PgStoreSignals.parse(p, "origin-b"))
      const received = back.flatMap((s) => (s._tag === "Deltas" ? s.events.map((e) => e.text) : []))
      assert.deepStrictEqual(received, texts.filter((t) => t.length < 9000))
      assert.isTrue(back.every((s) => s.sessionId === sessionId && (s._tag !== "Deltas" || s.events.every((e) => e.turnId === turnId))))
      assert.deepStrictEqual(back.slice(-2), [{ _tag: "Log", sessionId, seq: 42 }, { _tag: "Inbox", sessionId }] as Array<Signal>)
      assert.deepStrictEqual(PgStoreSignals.parse(payloads[0]!, "origin-a"), [])
      assert.deepStrictEqual(PgStoreSignals.parse("garbage", "x"), [])
      // The pool's hint is a line of its own, packed with the others, and no session's signal.
      const withHint = PgStoreSignals.pack(["c", `l ${sessionId} 43`])
      assert.deepStrictEqual(withHint.map(PgStoreSignals.claimable), [true])
      assert.deepStrictEqual(withHint.flatMap((p) => PgStoreSignals.parse(p, "x")), [{ _tag: "Log", sessionId, seq: 43 }] as Array<Signal>)
      assert.isFalse(PgStoreSignals.claimable(packed[packed.length - 1]!))
    }))
})

/** A plain connection listening on the channel of `url`'s schema: every line heard, in order. */
const wire = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url, application_name: "troupe-test-wire" })
      await client.connect()
      const channel = (await client.query<{ channel: string }>(`SELECT 'troupe_' || left(md5(current_schema()), 16) AS channel`)).rows[0]!.channel
      const lines: Array<string> = []
      client.on("notification", (message) => {
        if (message.channel === channel && message.payload !== undefined) lines.push(...message.payload.split("\n"))
      })
      await client.query(`LISTEN "${channel}"`)
      return { client, lines }
    }),
    ({ client }) => Effect.promise(() => client.end())
  )

/** Waits (at most 10 seconds) until `lines` holds a line `pick` finds (from index `from`), and returns it. */
const heard = (lines: ReadonlyArray<string>, pick: (line: string) => boolean, from = 0) =>
  Effect.gen(function*() {
    for (;;) {
      const line = lines.slice(from).find(pick)
      if (line !== undefined) return line
      yield* Effect.sleep("10 millis")
    }
  }).pipe(Effect.timeoutFail({
    duration: "10 seconds",
    onTimeout: () => new Error(`not heard in 10 s: ${pick.toString()}; heard: ${lines.slice(from).join(" | ").slice(0, 2000)}`)
  }))

describe.skipIf(!pgAvailable.run)("PgStoreSignals on a database", () => {
  it.scopedLive("a dropped LISTEN connection comes back: Missed, then commits are signalled again", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(freshSchema)
      yield* Effect.addFinalizer(() => Effect.promise(drop))
      const { lines } = yield* wire(url)
      const context = yield* Layer.build(Layer.merge(PgSessionStore.layer({ url }), PgStoreSignals.layer({ url })))
      const store = Layer.succeedContext(context)
      // This layer's connection, by the origin it says hello with (other files' signals connections share the database).
      const origin = (yield* heard(lines, (line) => line.startsWith("h "))).slice(2)
      const { changes, sessionId } = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const signals = yield* StoreSignals
        const session = yield* store.create({ principal: principal(), agent: agent() })
        return { changes: yield* signals.watch(session.id), sessionId: session.id }
      }).pipe(Effect.provide(store))
      const next = (want: Signal["_tag"]) =>
        Effect.gen(function*() {
          for (;;) {
            const signal = yield* Queue.take(changes)
            if (signal._tag === want) return signal
          }
        }).pipe(Effect.timeout("10 seconds"))
      const push = (id: SessionId) =>
        Effect.flatMap(SessionStore, (s) => Effect.flatMap(makeInputId, (inputId) => s.push(id, new Message({ inputId, text: "hi" }, true)))).pipe(
          Effect.provide(store)
        )
      // Once listening (the connection is made in the background), a push is signalled.
      const signalled = yield* Effect.gen(function*() {
        for (let i = 0; i < 40; i++) {
          yield* push(sessionId)
          const got = yield* Effect.option(Effect.timeout(next("Inbox"), "250 millis"))
          if (Option.isSome(got)) return true
        }
        return false
      })
      assert.isTrue(signalled)
      // The server drops the signals connection; it comes back and says so.
      yield* Effect.promise(async () => {
        const admin = new pg.Client({ connectionString: baseUrl })
        await admin.connect()
        await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [`troupe-signals ${origin}`])
        await admin.end()
      })
      yield* next("Missed")
      yield* push(sessionId)
      const again = yield* next("Inbox")
      assert.strictEqual(again.sessionId, sessionId)
    }), 30_000)

  it.scopedLive("a push signals its session; a commit that admits a message it consumes at once does not", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(freshSchema)
      yield* Effect.addFinalizer(() => Effect.promise(drop))
      const context = yield* Layer.build(Layer.merge(PgSessionStore.layer({ url }), PgStoreSignals.layer({ url })))
      const store = Context.get(context, SessionStore)
      const signals = Context.get(context, StoreSignals)
      const admitting = yield* store.create({ principal: principal(), agent: agent() })
      const pushed = yield* store.create({ principal: principal(), agent: agent() })
      const atAdmitting = yield* signals.watch(admitting.id)
      const atPushed = yield* signals.watch(pushed.id)
      const push = Effect.flatMap(makeInputId, (inputId) => store.push(pushed.id, new Message({ inputId, text: "hi" }, true)))
      const inbox = (queue: Queue.Dequeue<Signal>) => Effect.map(Queue.takeAll(queue), (all) => [...all].filter((s) => s._tag === "Inbox"))
      // Once listening (the connection is made in the background), a push is signalled.
      const listening = yield* Effect.gen(function*() {
        for (let i = 0; i < 40; i++) {
          yield* push
          yield* Effect.sleep("100 millis")
          if ((yield* inbox(atPushed)).length > 0) return true
        }
        return false
      })
      assert.isTrue(listening)
      const lease = Option.getOrThrow(yield* store.acquire(admitting.id, "worker-a", 60_000))
      const message = new Message({ inputId: yield* makeInputId, text: "handed over" }, true)
      yield* store.append(yield* commit(lease, 1, [new TurnStarted({ turnId: yield* makeTurnId, inputId: message.inputId, text: message.text })], [], [message]))
      // Notifications arrive in commit order: once the later push is heard, the admission would have been.
      yield* push
      yield* Effect.gen(function*() {
        while ((yield* inbox(atPushed)).length === 0) yield* Effect.sleep("20 millis")
      }).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual(yield* inbox(atAdmitting), [])
    }), 30_000)

  it.scopedLive("the pool's hint reaches every process on the database, the sender's too", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(freshSchema)
      yield* Effect.addFinalizer(() => Effect.promise(drop))
      const a = Context.get(yield* Layer.build(PgStoreSignals.layer({ url })), StoreSignals)
      const b = Context.get(yield* Layer.build(PgStoreSignals.layer({ url })), StoreSignals)
      const atA = yield* a.watchClaimable
      const atB = yield* b.watchClaimable
      // Once both connections listen (they are made in the background), A's hint is heard by B.
      const heard = yield* Effect.gen(function*() {
        for (let i = 0; i < 40; i++) {
          yield* a.announceClaimable
          if (Option.isSome(yield* Effect.option(Effect.timeout(Queue.take(atB), "250 millis")))) return true
        }
        return false
      })
      assert.isTrue(heard)
      assert.isTrue(Option.isSome(yield* Effect.option(Effect.timeout(Queue.take(atA), "2 seconds"))))
    }), 30_000)

  it.scopedLive("commits nobody else watches are not announced; a watch elsewhere is told, and the head committed before it is announced then", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(freshSchema)
      yield* Effect.addFinalizer(() => Effect.promise(drop))
      const { lines } = yield* wire(url)
      // A keeps the heads it announced for one to two sweeps: longer than this test.
      const a = Context.get(yield* Layer.build(PgStoreSignals.layer({ url, sweep: "20 seconds" })), StoreSignals)
      const originA = (yield* heard(lines, (line) => line.startsWith("h "))).slice(2)
      const sessionId = yield* makeSessionId
      const turnId = yield* makeTurnId
      const delta = (text: string) => [new AssistantDelta({ sessionId, turnId, text }, true)]
      /** Waits until A's `c` (sent after `effect`, and after A had a while to send whatever it would) is heard; the lines before it. */
      const upTo = <X>(effect: Effect.Effect<X>) =>
        Effect.gen(function*() {
          const from = lines.length
          yield* effect
          yield* Effect.sleep("200 millis")
          yield* a.announceClaimable
          yield* heard(lines, (line) => line === "c", from)
          // What A announced before its hint: commits and deltas (watch lines are not counted).
          return lines.slice(from, lines.indexOf("c", from)).filter((line) => line.startsWith("l ") || line.startsWith("d "))
        })
      // Nobody else listens: A sends nothing of its commits or deltas.
      assert.deepStrictEqual(yield* upTo(Effect.zipRight(a.announce(sessionId, 7), a.forward(sessionId, delta("unseen")))), [])
      const b = Context.get(yield* Layer.build(PgStoreSignals.layer({ url, sweep: "100 millis" })), StoreSignals)
      const originB = (yield* heard(lines, (line) => line.startsWith("h ") && line !== `h ${originA}`)).slice(2)
      yield* heard(lines, (line) => line === `p ${originA}`)
      // B watches: A hears of it and announces the head it committed before, which B's watcher gets.
      const watching = yield* Scope.make()
      const changes = yield* Scope.extend(b.watch(sessionId), watching)
      const log = (seq: number) =>
        Effect.gen(function*() {
          for (;;) {
            const signal = yield* Queue.take(changes)
            if (signal._tag === "Log" && signal.seq === seq) return signal
          }
        }).pipe(Effect.timeout("10 seconds"))
      yield* heard(lines, (line) => line === PgWatches.watchLine(originB, sessionId, false))
      yield* log(7)
      yield* a.announce(sessionId, 8)
      yield* log(8)
      // B's watcher has it; the test's own listener may not yet (another connection): what follows counts from after it.
      yield* heard(lines, (line) => line === `l ${sessionId} 8`)
      // Deltas only for a watch that wants them.
      assert.deepStrictEqual((yield* upTo(a.forward(sessionId, delta("still unseen")))).filter((line) => line.includes("still unseen")), [])
      const following = yield* Scope.extend(b.watch(sessionId, { deltas: true }), watching)
      yield* heard(lines, (line) => line === PgWatches.watchLine(originB, sessionId, true))
      // Deltas are best effort: offered again until A has heard the watch (the test's listener may hear it first).
      const nextDeltas = Effect.gen(function*() {
        for (;;) {
          const signal = yield* Queue.take(following)
          if (signal._tag === "Deltas") return signal.events.map((event) => event.text)
        }
      })
      const deltas = yield* Effect.gen(function*() {
        for (;;) {
          yield* a.forward(sessionId, delta("seen"))
          const got = yield* Effect.timeout(nextDeltas, "500 millis").pipe(Effect.option)
          if (got._tag === "Some") return got.value
        }
      }).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual(deltas, ["seen"])
      // B's watches end: after a sweep or two B withdraws it, and A's commits are not announced again.
      yield* Scope.close(watching, Exit.void)
      yield* heard(lines, (line) => line === `u ${originB} ${sessionId}`)
      yield* Effect.sleep("100 millis")
      assert.deepStrictEqual((yield* upTo(a.announce(sessionId, 9))).filter((line) => line === `l ${sessionId} 9`), [])
    }), 30_000)
})
