/**
 * Two hosts on separate connections to one SQLite file, and to one PostgreSQL
 * database, each behaviour of `Sessions` exercised through the host that does
 * not drive the session (issue 12). The hosts' inbox backstop polls once a
 * minute, so what crosses does so through the store's signals
 * (`StoreSignals`): a message starts its turn on the other host at once, a
 * steer, `awaitTurn`, `events` followed gap-free from random cursors while
 * turns run elsewhere, exact interrupts (both outcomes of the race with the
 * turn's end), a callback answer applied, 20 racing answers through both hosts
 * of which exactly one is accepted, a provider on one host answering a callback
 * opened on the other, a child's result delivered across hosts; and a real
 * child process on a SQLite file driving a session this process commands and
 * follows, its turn's volatile deltas included.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Duration, Effect, Either, Layer, Option, type Scope, Stream } from "effect"
import fc from "fast-check"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type * as InProcessHost from "../src/actors/InProcessHost.js"
import { Agent, ModelRef, ToolSpec } from "../src/schema/Agent.js"
import type { StoreUnavailable } from "../src/schema/Errors.js"
import type { SessionEvent } from "../src/schema/Event.js"
import { makeTurnId, type SessionId, type TurnId } from "../src/schema/Ids.js"
import type { Principal } from "../src/schema/Principal.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Troupe from "../src/Troupe.js"
import * as Toolkit from "../src/services/Toolkit.js"
import { crossAgent, crossScripts, lead, nap, owner, worker } from "./support/crossScripts.js"
import { principal } from "./support/fixtures.js"
import { availability, freshSchema } from "./support/postgres.js"

const pick = new ToolSpec({ name: "pick", description: "The client picks.", parameters: { type: "object" }, sideEffect: "none", idempotency: "unknown", client: true })
const agent = new Agent({ name: "shared", instructions: "x", model: new ModelRef({ name: "scripted" }), tools: [pick] })
const scripts = {
  fallback: (request: { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: string }> }) => {
    const last = request.messages[request.messages.length - 1]!
    return last.role === "user" && last.content.startsWith("pick")
      ? { toolCalls: [{ id: "p", name: "pick", arguments: "{}" }] }
      : `done after ${request.messages.length} messages`
  }
}

const hostOn = (filename: string, owner: string) =>
  Layer.build(Troupe.layerSqlite({ filename }, { scripts, host: { owner, idleTimeout: "20 seconds" } })).pipe(
    Effect.map((context) => Context.get(context, Sessions))
  )

describe("two hosts on one SQLite file", () => {
  it.scopedLive("every command through the host that does not drive the session", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-cross-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "shared.db")
      const a = yield* hostOn(filename, "host-a")
      const b = yield* hostOn(filename, "host-b")
      const me = principal()
      const session = yield* a.create(me, { agent, busyPolicy: "steer" })

      // A drives the session: its turn waits on a client tool.
      const first = yield* a.send(me, session.id, { text: "pick one" })
      assert.strictEqual(first.disposition, "started")
      const open = yield* Effect.gen(function*() {
        for (;;) {
          const callbacks = yield* b.callbacks(me, session.id)
          if (callbacks.length > 0) return callbacks[0]!
          yield* Effect.sleep("10 millis")
        }
      })

      // Through B: a steer reaches A's running turn, and B learns it did.
      const steered = yield* b.send(me, session.id, { text: "and hurry", mode: "steer" })
      assert.strictEqual(steered.disposition, "steered")
      assert.strictEqual(steered.turnId, first.turnId)
      // Through B: the answer is applied by A's actor, and B waits for the turn A runs.
      yield* b.answerCallback(me, session.id, { callbackId: open.callbackId, result: { output: "a.txt" } })
      const result = yield* b.awaitTurn(me, session.id, first.turnId!)
      assert.match(result.output, /^done after \d+ messages$/)

      // Through B: an interrupt of the turn that ended is already_ended; of a turn that never ran, TurnMismatch.
      const late = yield* b.interrupt(me, session.id, first.turnId!)
      assert.strictEqual(late.outcome, "already_ended")
      const mismatch = yield* Effect.flip(b.interrupt(me, session.id, yield* makeTurnId))
      assert.strictEqual(mismatch._tag, "TurnMismatch")

      // Through B, with A still holding the lease: a message starts a turn on A, and B is told which.
      const second = yield* b.send(me, session.id, { text: "again" })
      assert.strictEqual(second.disposition, "started")
      const again = yield* b.awaitTurn(me, session.id, second.turnId!)
      assert.match(again.output, /^done after/)
    }), 30_000)
})

const pgAvailable = await availability()

/** Where the two hosts meet: a fresh SQLite file, or a fresh PostgreSQL schema. */
type Meeting = (owner: string, options?: InProcessHost.Options) => Layer.Layer<Troupe.Services, StoreUnavailable>

const sqliteMeeting = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "troupe-cross-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const filename = join(dir, "shared.db")
  return ((owner, options) =>
    Troupe.layerSqlite({ filename }, runtimeOptions(owner, options))) as Meeting
})

const pgMeeting = Effect.gen(function*() {
  const { drop, url } = yield* Effect.promise(freshSchema)
  yield* Effect.addFinalizer(() => Effect.promise(drop))
  return ((owner, options) =>
    Troupe.layerPg({ url, maxConnections: 4 }, runtimeOptions(owner, options))) as Meeting
})

const runtimeOptions = (owner: string, options?: InProcessHost.Options): Troupe.RuntimeOptions => ({
  scripts: crossScripts,
  agents: [worker],
  tools: Toolkit.layer([nap]),
  host: hostOptions(owner, options)
})

// No inbox backstop to speak of: a command crosses through the signals or not at all within a test.
const hostOptions = (owner: string, options: InProcessHost.Options = {}): InProcessHost.Options => ({
  owner,
  idleTimeout: "20 seconds",
  inboxPoll: "1 minute",
  ...options
})

/** Host A (which drives the sessions) and host B (through which they are commanded), on separate connections. */
const pair = (meeting: Meeting, a: InProcessHost.Options = {}, b: InProcessHost.Options = {}) =>
  Effect.gen(function*() {
    const contextA = yield* Layer.build(meeting("host-a", a))
    const contextB = yield* Layer.build(meeting("host-b", b))
    return {
      a: Context.get(contextA, Sessions),
      b: Context.get(contextB, Sessions),
      hostA: Context.get(contextA, SessionHost),
      hostB: Context.get(contextB, SessionHost),
      store: Context.get(contextA, SessionStore)
    }
  })

const eventually = <A, E>(effect: Effect.Effect<Option.Option<A>, E>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500; i++) {
      const found = yield* effect
      if (Option.isSome(found)) return found.value
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.dieMessage("never happened")
  })

/** A session host A drives, with a turn on A waiting on its client tool, and the callback it opened. */
const pickingOnA = (a: Sessions["Type"], b: Sessions["Type"], me: Principal) =>
  Effect.gen(function*() {
    const session = yield* a.create(me, { agent: crossAgent })
    const accepted = yield* a.send(me, session.id, { text: "pick one" })
    assert.strictEqual(accepted.disposition, "started")
    const open = yield* eventually(Effect.map(b.callbacks(me, session.id), (cbs) => Option.fromNullable(cbs[0])))
    return { session, turnId: accepted.turnId!, open }
  })

const suite = (name: string, meetingOf: Effect.Effect<Meeting, never, Scope.Scope>, skip: boolean) =>
  describe.skipIf(skip)(`two hosts on ${name}, commanded through the one that does not drive the session`, () => {
    it.scopedLive("a message starts its turn on the lease holder at once; awaitTurn follows it", () =>
      Effect.gen(function*() {
        const { a, b, hostA, hostB } = yield* pair(yield* meetingOf)
        const me = principal()
        const session = yield* a.create(me, { agent: crossAgent })
        const first = yield* a.send(me, session.id, { text: "hello" })
        yield* a.awaitTurn(me, session.id, first.turnId!)
        assert.deepStrictEqual(yield* hostA.running, [session.id])
        // A holds the lease, idle: B's message is signalled to it, and B is told which turn started.
        const started = Date.now()
        const second = yield* b.send(me, session.id, { text: "again" })
        assert.strictEqual(second.disposition, "started")
        assert.isBelow(Date.now() - started, 1500)
        assert.deepStrictEqual(yield* hostB.running, [])
        const result = yield* b.awaitTurn(me, session.id, second.turnId!)
        assert.match(result.output, /^done after \d+ messages$/)
        // A steer into a turn A runs, decided by A, reported to B.
        const third = yield* pickingOnA(a, b, me)
        const steered = yield* b.send(me, third.session.id, { text: "and hurry", mode: "steer" })
        assert.strictEqual(steered.disposition, "steered")
        assert.strictEqual(steered.turnId, third.turnId)
      }), 30_000)

    it.scopedLive("events through B follow A's turns from random cursors, gap-free and without duplicates", () =>
      Effect.gen(function*() {
        const { a, b } = yield* pair(yield* meetingOf)
        const me = principal()
        const session = yield* a.create(me, { agent: crossAgent })
        const turns = Effect.gen(function*() {
          for (let i = 0; i < 5; i++) {
            const accepted = yield* a.send(me, session.id, { text: `turn ${i}` })
            yield* a.awaitTurn(me, session.id, accepted.turnId!)
            // Followers join while turns are still to come.
            yield* Effect.sleep("60 millis")
          }
          const last = yield* a.send(me, session.id, { text: "final" })
          yield* a.awaitTurn(me, session.id, last.turnId!)
        })
        const isLast = (event: SessionEvent) =>
          event._tag === "durable" && event.record._tag === "turn_ended" && event.record.output === "the end"
        // Followers join at random moments, from random cursors at or below the head they see.
        const followers = fc.sample(fc.record({ delay: fc.nat({ max: 250 }), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }), 8)
        const follow = ({ delay, fraction }: { delay: number; fraction: number }) =>
          Effect.gen(function*() {
            yield* Effect.sleep(Duration.millis(delay))
            const head = (yield* b.snapshot(me, session.id)).cursor
            const after = Math.floor(head * fraction)
            const events = yield* b.events(me, session.id, { after }).pipe(
              Stream.takeUntil(isLast),
              Stream.runCollect,
              Effect.timeout("15 seconds")
            )
            return { after, cursors: Chunk.toReadonlyArray(events).map((e) => (e._tag === "durable" ? e.cursor : -1)) }
          })
        const [seen] = yield* Effect.all([Effect.forEach(followers, follow, { concurrency: "unbounded" }), turns], {
          concurrency: "unbounded"
        })
        const head = (yield* b.snapshot(me, session.id)).cursor
        for (const { after, cursors } of seen) {
          assert.deepStrictEqual(cursors, Array.from({ length: cursors.length }, (_, i) => after + 1 + i))
          assert.isAbove(cursors.length, 0)
          assert.isAtMost(cursors[cursors.length - 1]!, head)
        }
      }), 30_000)

    it.scopedLive("interrupts through B report the exact outcome, both ways the race with the turn's end can go", () =>
      Effect.gen(function*() {
        const { a, b } = yield* pair(yield* meetingOf)
        const me = principal()
        // The turn is waiting on A: interrupted, and B's awaitTurn sees it so.
        const waiting = yield* pickingOnA(a, b, me)
        const stopped = yield* b.interrupt(me, waiting.session.id, waiting.turnId)
        assert.strictEqual(stopped.outcome, "interrupted")
        const why = yield* Effect.flip(b.awaitTurn(me, waiting.session.id, waiting.turnId))
        assert.strictEqual(why._tag, "TurnInterrupted")
        // The turn ended before: already_ended.
        const late = yield* b.interrupt(me, waiting.session.id, waiting.turnId)
        assert.strictEqual(late.outcome, "already_ended")
        // Racing the answer that ends the turn: whichever outcome, the log agrees with it.
        const outcomes = new Set<string>()
        for (let i = 0; i < 3; i++) {
          const race = yield* pickingOnA(a, b, me)
          const [, outcome] = yield* Effect.all([
            b.answerCallback(me, race.session.id, { callbackId: race.open.callbackId, result: { output: "x" } }).pipe(Effect.either),
            b.interrupt(me, race.session.id, race.turnId)
          ], { concurrency: "unbounded" })
          assert.include(["interrupted", "already_ended"], outcome.outcome)
          outcomes.add(outcome.outcome)
          const ended = yield* Effect.either(b.awaitTurn(me, race.session.id, race.turnId))
          if (outcome.outcome === "interrupted") assert.isTrue(Either.isLeft(ended) && ended.left._tag === "TurnInterrupted")
          else assert.isTrue(Either.isRight(ended))
        }
      }), 30_000)

    it.scopedLive("20 answers racing through both hosts: exactly one accepted, and A applies it", () =>
      Effect.gen(function*() {
        const { a, b } = yield* pair(yield* meetingOf)
        const me = principal()
        const { open, session, turnId } = yield* pickingOnA(a, b, me)
        const answers = Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? a : b).answerCallback(me, session.id, { callbackId: open.callbackId, result: { output: `answer ${i}` } }).pipe(
            Effect.as(i),
            Effect.either
          ))
        const results = yield* Effect.all(answers, { concurrency: "unbounded" })
        const accepted = results.filter(Either.isRight)
        assert.strictEqual(accepted.length, 1)
        for (const refused of results.filter(Either.isLeft)) {
          assert.strictEqual(refused.left._tag, "StaleCallback")
        }
        const result = yield* b.awaitTurn(me, session.id, turnId)
        assert.match(result.output, /^done after \d+ messages$/)
        // The accepted answer is the one the turn was given.
        const log = yield* b.events(me, session.id, { follow: false }).pipe(Stream.runCollect)
        const applied = Chunk.toReadonlyArray(log).flatMap((e) =>
          e._tag === "durable" && e.record._tag === "operation_completed" && JSON.stringify(e.record.output).includes("answer ")
            ? [e.record.output]
            : []
        )
        assert.strictEqual(applied.length, 1)
        assert.include(JSON.stringify(applied[0]), `answer ${accepted[0]!.right}"`)
        // A later answer, through B: StaleCallback.
        const again = yield* Effect.flip(b.answerCallback(me, session.id, { callbackId: open.callbackId, result: { output: "late" } }))
        assert.strictEqual(again._tag, "StaleCallback")
      }), 30_000)

    it.scopedLive("a provider on B answers a callback opened by A's actor", () =>
      Effect.gen(function*() {
        const { a, b } = yield* pair(yield* meetingOf)
        const me = principal()
        const session = yield* a.create(me, { agent: crossAgent })
        const offered: Array<string> = []
        yield* Effect.forkScoped(b.provideCallbacks(me, session.id, ["client_tool"], (callback) =>
          Effect.sync(() => {
            offered.push(callback.callbackId)
            return Option.some({ output: "from b" })
          })))
        yield* Effect.sleep("50 millis")
        const accepted = yield* a.send(me, session.id, { text: "pick one" })
        const result = yield* b.awaitTurn(me, session.id, accepted.turnId!)
        assert.match(result.output, /^done after/)
        assert.strictEqual(offered.length, 1)
        const log = yield* a.events(me, session.id, { follow: false }).pipe(Stream.runCollect)
        assert.isTrue(Chunk.toReadonlyArray(log).some((e) =>
          e._tag === "durable" && e.record._tag === "operation_completed" && JSON.stringify(e.record.output).includes("from b")
        ))
      }), 30_000)

    it.scopedLive("a child run by B delivers its result to its parent's turn on A", () =>
      Effect.gen(function*() {
        // A runs one busy actor at a time: while the parent's turn naps, the child is B's to take (its recovery poll).
        const { a, b, hostB } = yield* pair(yield* meetingOf, { maxBusyActors: 1 }, { pollInterval: "100 millis" })
        const me = principal()
        const root = yield* a.create(me, { agent: lead })
        const accepted = yield* a.send(me, root.id, { text: "get it done" })
        const result = yield* b.awaitTurn(me, root.id, accepted.turnId!)
        assert.strictEqual(result.output, "the worker is done")
        const children = yield* b.children(me, root.id)
        assert.strictEqual(children.items.length, 1)
        const child = children.items[0]!.session
        assert.include(yield* hostB.running, child.id)
        // The result reached the running turn on A (before its end), and its next model call read it.
        const log = Chunk.toReadonlyArray(yield* b.events(me, root.id, { follow: false }).pipe(Stream.runCollect))
        const at = (tag: string) => log.findIndex((e) => e._tag === "durable" && e.record._tag === tag)
        assert.isAbove(at("child_result"), 0)
        assert.isBelow(at("child_result"), at("turn_ended"))
      }), 30_000)
  })

describe.skipIf(!pgAvailable.run)("two hosts on one PostgreSQL database: volatile deltas", () => {
  it.scopedLive("a follower on B sees the reply stream of a turn A runs", () =>
    Effect.gen(function*() {
      const { a, b } = yield* pair(yield* pgMeeting)
      const me = principal()
      const session = yield* a.create(me, { agent: crossAgent })
      const warm = yield* a.send(me, session.id, { text: "warm up" })
      yield* a.awaitTurn(me, session.id, warm.turnId!)
      const head = (yield* b.snapshot(me, session.id)).cursor
      // Deltas are best effort: they may come just after the turn's end is read from the log.
      let ended = false
      let text = ""
      const stream = yield* b.events(me, session.id, { after: head, volatile: true }).pipe(
        Stream.takeUntil((e) => {
          if (e._tag === "durable" && e.record._tag === "turn_ended") ended = true
          if (e._tag === "assistant_delta") text += e.text
          return ended && text === "the end"
        }),
        Stream.runCollect,
        Effect.timeout("10 seconds"),
        Effect.fork
      )
      yield* Effect.sleep("100 millis")
      const accepted = yield* a.send(me, session.id, { text: "final words" })
      const events = Chunk.toReadonlyArray(yield* stream)
      const deltas = events.flatMap((e) => (e._tag === "assistant_delta" ? [e] : []))
      assert.strictEqual(deltas.map((d) => d.text).join(""), "the end")
      assert.isTrue(deltas.every((d) => d.turnId === accepted.turnId))
    }), 30_000)
})

suite("one SQLite file", sqliteMeeting, false)
suite("one PostgreSQL database", pgMeeting, !pgAvailable.run)

describe("a child process on one SQLite file", () => {
  it.scopedLive("drives a session this process answers, awaits and messages through the file", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-cross-proc-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "shared.db")
      // The file exists, migrated, before the child opens it.
      const here = yield* Layer.build(Troupe.layerSqlite({ filename }, { scripts: crossScripts, host: hostOptions("test-process") }))
      const sessions = Context.get(here, Sessions)
      const script = fileURLToPath(new URL("./support/crossHost.ts", import.meta.url))
      const child = spawn(process.execPath, ["--import", "tsx", script, filename], { stdio: ["ignore", "pipe", "pipe"] })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      const line = yield* Effect.async<string, Error>((resume) => {
        let out = ""
        let err = ""
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString()
          const match = /SESSION (\S+) (\S+)\n/.exec(out)
          if (match) resume(Effect.succeed(match[0]))
        })
        child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()))
        child.on("exit", (code) => resume(Effect.fail(new Error(`child exited ${code}: ${err}`))))
      }).pipe(Effect.timeout("20 seconds"))
      const [, sessionId, turnId] = line.trim().split(" ") as [string, SessionId, TurnId]
      const open = yield* eventually(Effect.map(sessions.callbacks(owner, sessionId), (cbs) => Option.fromNullable(cbs[0])))
      // The answer is applied by the child's actor; this process follows the turn to its end.
      yield* sessions.answerCallback(owner, sessionId, { callbackId: open.callbackId, result: { output: "a.txt" } })
      const result = yield* sessions.awaitTurn(owner, sessionId, turnId)
      assert.match(result.output, /^done after \d+ messages$/)
      // The child holds the lease: a message from here starts its turn there at once.
      const again = yield* sessions.send(owner, sessionId, { text: "again" })
      assert.strictEqual(again.disposition, "started")
      const second = yield* sessions.awaitTurn(owner, sessionId, again.turnId!)
      assert.match(second.output, /^done after/)
      // A follower here sees the reply stream of a turn the child runs (side files, decision 0047), in order.
      const head = (yield* sessions.snapshot(owner, sessionId)).cursor
      let ended = false
      let text = ""
      const stream = yield* sessions.events(owner, sessionId, { after: head, volatile: true }).pipe(
        Stream.takeUntil((e) => {
          if (e._tag === "durable" && e.record._tag === "turn_ended") ended = true
          if (e._tag === "assistant_delta") text += e.text
          return ended && text === "the end"
        }),
        Stream.runCollect,
        Effect.timeout("10 seconds"),
        Effect.fork
      )
      // The writer looks at a session's marker at most every 250 ms: a follower sees deltas from then on.
      yield* Effect.sleep("400 millis")
      const final = yield* sessions.send(owner, sessionId, { text: "final words" })
      const deltas = Chunk.toReadonlyArray(yield* stream).flatMap((e) => (e._tag === "assistant_delta" ? [e] : []))
      assert.strictEqual(deltas.map((d) => d.text).join(""), "the end")
      assert.isTrue(deltas.every((d) => d.turnId === final.turnId))
    }), 40_000)
})
