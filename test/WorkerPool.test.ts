/**
 * The pool of workers on one store (src/actors/WorkerPool.ts, decision 0013).
 *
 * First the share a worker claims of a burst, as a pure rule. Then three real
 * worker processes on one PostgreSQL database (test/support/poolWorker.ts: the
 * runtime `troupe serve` builds on a shared store, a slow scripted model and a
 * `step` tool that report every call to a side file, so "run once" is
 * observed outside the runtime), driven through the store as a client would:
 * - spread: six sessions made runnable at once are not all driven by one worker;
 * - SIGKILL of the owner inside a model call: another worker finishes the
 *   turn within TTL + 2 s, every step ran exactly once, the turn ended once;
 * - SIGSTOP of the owner: another worker takes the turn over after the TTL;
 *   SIGCONT'd, the old owner stops with LeaseLost and writes nothing (no
 *   record of its model call reaches the log, no step or model call of it
 *   follows);
 * - SIGTERM: the draining owner hands its session over at once; another
 *   worker continues it well before the TTL, and the drained worker exits 0;
 * - SIGSTOP of the last worker, longer than the TTL, in the middle of six
 *   turns: SIGCONT'd, it finishes them all, each step once.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Fiber, Layer, ManagedRuntime, Option, Queue, Schedule, Schema, Scope, TestClock } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as WorkerPool from "../src/actors/WorkerPool.js"
import * as Lock from "../src/internal/Lock.js"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import { Agent, ModelRef, ToolSpec } from "../src/schema/Agent.js"
import type { SessionId } from "../src/schema/Ids.js"
import { LogRecord } from "../src/schema/Record.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { message, principal } from "./support/fixtures.js"
import { readSide, type SideLine, startWorker, step, stepModel, type WorkerProcess } from "./support/poolWorker.js"
import { availability, freshSchema } from "./support/postgres.js"

const ids = (...names: Array<string>) => names as Array<SessionId>

describe("WorkerPool.share", () => {
  it("takes everything it can when it is not spreading, never more than its free slots", () => {
    const candidates = ids("a", "b", "c", "d", "e")
    assert.strictEqual(WorkerPool.share(candidates, 64, WorkerPool.nothingSeen, false), 5)
    assert.strictEqual(WorkerPool.share(candidates, 2, WorkerPool.nothingSeen, false), 2)
    assert.strictEqual(WorkerPool.share(candidates, 0, WorkerPool.nothingSeen, false), 0)
    assert.strictEqual(WorkerPool.share([], 8, WorkerPool.nothingSeen, true), 0)
  })

  it("spreading: half of the new candidates (at least one)", () => {
    assert.strictEqual(WorkerPool.share(ids("a", "b", "c", "d", "e", "f"), 64, WorkerPool.nothingSeen, true), 3)
    assert.strictEqual(WorkerPool.share(ids("a"), 64, WorkerPool.nothingSeen, true), 1)
    assert.strictEqual(WorkerPool.share(ids("a", "b", "c"), 1, WorkerPool.nothingSeen, true), 1)
  })

  it("spreading: all it left last time, whoever else claims, and half of what is new", () => {
    // Left last time: d, e, f. Now e and f are gone (another worker claims): d is taken now, with one of g, h.
    const seen = { left: new Set(ids("d", "e", "f")) }
    assert.strictEqual(WorkerPool.share(ids("d", "g", "h"), 64, seen, true), 2)
    assert.strictEqual(WorkerPool.share(ids("d", "e", "f"), 64, seen, true), 3, "a burst is never left for a third look")
    assert.strictEqual(WorkerPool.share(ids("d", "e", "f", "g"), 64, seen, true), 4)
    assert.strictEqual(WorkerPool.share(ids("d", "e", "f", "g"), 2, seen, true), 2)
  })
})

describe("WorkerPool.claimOnce", () => {
  /** A member over `runnable` sessions (all claimable) with `capacity` slots; what it starts and announces is counted. */
  const member = (runnable: ReadonlyArray<SessionId>, capacity: number) => {
    const started: Array<SessionId> = []
    let announced = 0
    let looks = 0
    const store = {
      runnable: () => Effect.sync(() => (looks++, runnable.filter((id) => !started.includes(id))))
    } as unknown as SessionStore["Type"]
    const m: WorkerPool.Member = {
      store,
      capacity,
      busy: () => started.length,
      isLocal: (id) => started.includes(id),
      start: (id) => Effect.sync(() => void started.push(id)),
      spread: true,
      paused: () => false,
      claimable: Effect.never,
      forgetHints: Effect.void,
      announce: Effect.sync(() => void announced++)
    }
    return { m, started, announced: () => announced, looks: () => looks }
  }

  it.effect("a lone worker claims a burst of 15 in one look and its follow-up, and tells the pool once", () =>
    Effect.gen(function*() {
      const burst = ids(...Array.from({ length: 15 }, (_, i) => `s${i}`))
      const { announced, m, started } = member(burst, 64)
      const first = yield* WorkerPool.claimOnce(m, WorkerPool.nothingSeen)
      assert.strictEqual(started.length, 8)
      assert.isTrue(first.left, "it looks again soon")
      assert.strictEqual(announced(), 1)
      const second = yield* WorkerPool.claimOnce(m, first.seen)
      assert.strictEqual(started.length, 15, "all of it at the follow-up, not half again")
      assert.isFalse(second.left)
      assert.strictEqual(announced(), 1)
    }))

  it.effect("a worker's own hint does not cut its follow-up short: the others get their time to take a share", () =>
    Effect.gen(function*() {
      const burst = ids("a", "b", "c", "d", "e", "f")
      const { looks, m, started } = member(burst, 64)
      // Every process hears the pool's hint, the sender's too: the announce lands in its own queue.
      const hints = yield* Queue.sliding<void>(1)
      const echoing: WorkerPool.Member = {
        ...m,
        announce: Queue.offer(hints, undefined),
        claimable: Queue.take(hints),
        forgetHints: Effect.asVoid(Queue.takeAll(hints))
      }
      yield* Effect.fork(WorkerPool.claimLoop(echoing, Duration.seconds(1)))
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(looks(), 1)
      assert.strictEqual(started.length, 3, "half of the burst at the first look")
      yield* TestClock.adjust("200 millis")
      assert.strictEqual(looks(), 1, "no look before the follow-up, its own hint notwithstanding")
      yield* TestClock.adjust("50 millis")
      assert.strictEqual(looks(), 2)
      assert.strictEqual(started.length, 6, "the rest at the follow-up")
      // The hint it heard meanwhile was forgotten: the next look is at the tick (750 ms or more away), not now.
      yield* TestClock.adjust("700 millis")
      assert.strictEqual(looks(), 2)
    }))

  it("the follow-up after leaving part of a burst: 250 ms, a quarter of a shorter interval, never under 200 ms unless the interval is", () => {
    assert.strictEqual(WorkerPool.followUpMillis(1000), 250)
    assert.strictEqual(WorkerPool.followUpMillis(300), 200)
    assert.strictEqual(WorkerPool.followUpMillis(120), 120)
  })

  it.effect("a full worker leaves the rest without a follow-up of its own", () =>
    Effect.gen(function*() {
      const { m, started } = member(ids("a", "b", "c", "d"), 1)
      const tick = yield* WorkerPool.claimOnce(m, WorkerPool.nothingSeen)
      assert.strictEqual(started.length, 1)
      assert.isTrue(tick.full)
      assert.isFalse(tick.left)
    }))
})

describe("WorkerPool.makeDraining", () => {
  it.live("a drain run where nothing can interrupt it (a finalizer, as the daemon's) still ends", () =>
    Effect.gen(function*() {
      const announced: Array<number> = []
      const draining = yield* WorkerPool.makeDraining(
        Lock.make(),
        new Map(),
        Effect.sync(() => announced.push(1))
      )
      const fiber = yield* Effect.forkDaemon(Effect.uninterruptible(draining.drain("1 second")))
      const ended = yield* Fiber.await(fiber).pipe(Effect.timeoutOption("2 seconds"))
      assert.isTrue(Option.isSome(ended), "the drain never returned")
      assert.deepStrictEqual(ended.pipe(Option.getOrThrow), Exit.succeed(true))
      assert.deepStrictEqual(announced, [])
    }))
})

describe("two hosts on one SQLite file", () => {
  const hostOn = (filename: string, owner: string, side: string, scope: Scope.Scope, pollInterval?: Duration.DurationInput) =>
    Layer.buildWithScope(
      Troupe.layerSqlite({ filename }, {
        model: stepModel(owner, side, 300),
        tools: Toolkit.layer([step(owner, side)]),
        host: { owner, leaseTtl: "10 seconds", ...(pollInterval === undefined ? {} : { pollInterval }) }
      }),
      scope
    ).pipe(Effect.map((context) => ({ sessions: Context.get(context, Sessions), host: Context.get(context, SessionHost) })))

  const serverStep = new Agent({ name: "stepper", instructions: "x", model: new ModelRef({ name: "scripted" }), tools: [step("spec", "").spec] })
  const clientStep = new Agent({
    name: "asker",
    instructions: "x",
    model: new ModelRef({ name: "scripted" }),
    tools: [new ToolSpec({ ...step("spec", "").spec, client: true })]
  })

  it.scopedLive("a draining host hands a parked session over at once, and a busy one at its next step boundary", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-pool-sqlite-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "shared.db")
      const side = join(dir, "side")
      const lines = () => (existsSync(side) ? readSide(readFileSync(side, "utf8")) : [])
      const waitFor = <A>(find: () => A | undefined) =>
        Effect.suspend(() => {
          const found = find()
          return found === undefined ? Effect.fail("not yet" as const) : Effect.succeed(found)
        }).pipe(Effect.retry(Schedule.spaced("20 millis")), Effect.timeout("20 seconds"))
      const scopeA = yield* Scope.make()
      const a = yield* hostOn(filename, "a", side, scopeA)
      // B's claim tick is an hour away: only the pool's hint (another connection's commit, here A's release) wakes it.
      const b = yield* hostOn(filename, "b", side, yield* Effect.scope, "1 hour")
      const me = principal()

      // Parked on A: a client tool's callback is open.
      const parked = yield* a.sessions.create(me, { agent: clientStep })
      const asked = yield* a.sessions.send(me, parked.id, { text: "steps 1" })
      const callback = yield* b.sessions.callbacks(me, parked.id).pipe(
        Effect.flatMap((open) => (open.length > 0 ? Effect.succeed(open[0]!) : Effect.fail("none yet" as const))),
        Effect.retry(Schedule.spaced("20 millis")),
        Effect.timeout("20 seconds")
      )
      // Busy on A: inside the second model call of three steps.
      const busy = yield* a.sessions.create(me, { agent: serverStep })
      yield* a.sessions.send(me, busy.id, { text: "steps 3" })
      yield* waitFor(() => lines().find((line) => line.sessionId === busy.id && line.kind === "model" && line.n === 2))

      const [elapsed, drained] = yield* Effect.timed(a.host.drain("10 seconds"))
      assert.isTrue(drained)
      // The model call (300 ms) and its step finished first; the grace period did not run out.
      assert.isBelow(Duration.toMillis(elapsed), 5000)
      yield* Scope.close(scopeA, Exit.void)

      // B claims the busy one on the hint, and takes the parked one with the answer through it, and goes on.
      yield* b.sessions.answerCallback(me, parked.id, { callbackId: callback.callbackId, result: { output: 1 } })
      const first = yield* b.sessions.awaitTurn(me, parked.id, asked.turnId!)
      assert.strictEqual(first.output, "done@b")
      yield* waitFor(() => lines().find((line) => line.sessionId === busy.id && line.kind === "model" && line.n === 4))
      assert.deepStrictEqual(
        lines().filter((line) => line.sessionId === busy.id).map((line) => `${line.kind} ${line.n} ${line.owner}`),
        ["model 1 a", "tool 1 a", "model 2 a", "tool 2 a", "model 3 b", "tool 3 b", "model 4 b"],
        "handed over between steps: no call made twice"
      )
      assert.deepStrictEqual(
        lines().filter((line) => line.sessionId === parked.id).map((line) => `${line.kind} ${line.n} ${line.owner}`),
        ["model 1 a", "model 2 b"],
        "the parked turn went on on b with the answer"
      )
    }), 40_000)
})

const pg = await availability()

const TTL = 3000
const MODEL_MS = 600

if (pg.run) {
  const { drop, url } = await freshSchema()
  const dir = mkdtempSync(join(tmpdir(), "troupe-pool-"))
  const side = join(dir, "side")
  const store = ManagedRuntime.make(PgSessionStore.layer({ url, maxConnections: 2 }))
  const workers: Array<WorkerProcess> = []
  afterAll(async () => {
    for (const worker of workers) {
      if (worker.proc.exitCode === null && worker.proc.signalCode === null) {
        worker.proc.kill("SIGCONT")
        worker.proc.kill("SIGKILL")
      }
    }
    await store.dispose()
    await drop()
    rmSync(dir, { recursive: true, force: true })
  })

  const me = principal()
  const agent = new Agent({
    name: "stepper",
    instructions: "Do the steps.",
    model: new ModelRef({ name: "scripted" }),
    tools: [step("spec", side).spec]
  })

  /** A new session whose turn does `steps` steps: pushed, for the pool to claim. */
  const submit = (steps: number) =>
    store.runPromise(Effect.gen(function*() {
      const sessions = yield* SessionStore
      const session = yield* sessions.create({ principal: me, agent })
      yield* sessions.push(session.id, message(`steps ${steps}`))
      return session.id
    }))

  const sideLines = (): ReadonlyArray<SideLine> => (existsSync(side) ? readSide(readFileSync(side, "utf8")) : [])
  const of = (sessionId: SessionId) => sideLines().filter((line) => line.sessionId === sessionId)

  const until = async <A>(what: string, find: () => A | undefined, timeoutMs = 30_000): Promise<A> => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const found = find()
      if (found !== undefined) return found
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${workers.map((w) => `--- ${w.owner}\n${w.output()}`).join("\n")}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  /** The session's log, encoded (the owner marks `@wN` are in the model results). */
  const logOf = (sessionId: SessionId) =>
    store.runPromise(Effect.map(
      SessionStore.pipe(Effect.flatMap((s) => s.readLog(sessionId, { limit: 10_000 }))),
      (page) => page.records.map((record) => ({ tag: record.body._tag, json: JSON.stringify(Schema.encodeSync(LogRecord)(record)) }))
    ))

  const ended = async (sessionId: SessionId) => {
    const deadline = Date.now() + 30_000
    for (;;) {
      const log = await logOf(sessionId)
      if (log.some((r) => r.tag === "turn_ended")) return log
      if (Date.now() > deadline) throw new Error(`${sessionId}: no turn_ended\n${JSON.stringify(of(sessionId))}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  /** Every step of the turn ran exactly once, and the turn started and ended once, completed by `by`. */
  const assertDoneOnce = (log: ReadonlyArray<{ tag: string; json: string }>, sessionId: SessionId, steps: number, by: string) => {
    const tools = of(sessionId).filter((line) => line.kind === "tool").map((line) => line.n)
    assert.deepStrictEqual(tools, Array.from({ length: steps }, (_, i) => i + 1), "each step once, in order")
    assert.strictEqual(log.filter((r) => r.tag === "turn_started").length, 1)
    const ends = log.filter((r) => r.tag === "turn_ended")
    assert.strictEqual(ends.length, 1)
    assert.include(ends[0]!.json, `"completed"`)
    assert.include(ends[0]!.json, `done@${by}`)
  }

  /** The first model call `n` of the session, and its owner. */
  const modelCall = (sessionId: SessionId, n: number, not?: string) =>
    until(`model call ${n} of ${sessionId}`, () =>
      of(sessionId).find((line) => line.kind === "model" && line.n === n && line.owner !== not))

  const worker = (owner: string) => workers.find((w) => w.owner === owner)!

  describe("three worker processes on one PostgreSQL database", () => {
    it("spread, SIGKILL, SIGSTOP and SIGTERM of the owner: sessions move, nothing is lost or done twice", async () => {
      // Migrate once, before three processes would race to.
      await store.runPromise(Effect.flatMap(SessionStore, (s) => s.now))
      for (const owner of ["w1", "w2", "w3"]) {
        workers.push(startWorker(url, owner, side, {
          POOL_TTL_MS: String(TTL),
          POOL_CLAIM_MS: "300",
          POOL_GRACE_MS: "10000",
          POOL_MODEL_MS: String(MODEL_MS)
        }))
      }
      await Promise.all(workers.map((w) => w.waitFor(`READY ${w.owner}`, 60_000)))

      // Spread: six sessions runnable at once go to more than one worker.
      const burst = await Promise.all(Array.from({ length: 6 }, () => submit(1)))
      const owners = await Promise.all(burst.map(async (id) => (await modelCall(id, 1)).owner))
      for (const id of burst) assertDoneOnce(await ended(id), id, 1, (await modelCall(id, 2)).owner)
      const counts = new Map<string, number>()
      for (const owner of owners) counts.set(owner, (counts.get(owner) ?? 0) + 1)
      console.log(`spread of 6 sessions: ${JSON.stringify(Object.fromEntries(counts))}`)
      assert.isAtLeast(counts.size, 2, `not all on one worker: ${JSON.stringify(owners)}`)

      // SIGKILL inside the second model call: another worker makes it again and finishes the turn.
      const killed = await submit(4)
      const doomed = await modelCall(killed, 2)
      worker(doomed.owner).proc.kill("SIGKILL")
      const killedAt = Date.now()
      const taken = await modelCall(killed, 2, doomed.owner)
      console.log(`SIGKILL: model call 2 again on ${taken.owner} after ${taken.at - killedAt} ms (TTL ${TTL} ms)`)
      assert.isBelow(taken.at - killedAt, TTL + 2000)
      assertDoneOnce(await ended(killed), killed, 4, taken.owner)
      assert.deepStrictEqual(
        of(killed).filter((line) => line.kind === "tool").map((line) => line.owner),
        [doomed.owner, taken.owner, taken.owner, taken.owner],
        "step 1 before the kill, the others after"
      )
      assert.strictEqual(await worker(doomed.owner).exited, "SIGKILL")

      // SIGSTOP inside the second model call (after its start was committed): the other worker takes over after the TTL.
      const paused = await submit(3)
      const frozen = await modelCall(paused, 2)
      await new Promise((resolve) => setTimeout(resolve, 150))
      const old = worker(frozen.owner)
      old.proc.kill("SIGSTOP")
      const stoppedAt = Date.now()
      const successor = await modelCall(paused, 2, frozen.owner)
      // The lease had between two thirds of its TTL and all of it to run (renewed every third): it was waited out.
      assert.isAtLeast(successor.at - stoppedAt, TTL / 3, "a live lease is not taken")
      assert.isBelow(successor.at - stoppedAt, TTL + 2000 + MODEL_MS)
      const log = await ended(paused)
      assertDoneOnce(log, paused, 3, successor.owner)
      // Woken up, the old owner finds its lease gone and stops: nothing more of it reaches the log or the side file.
      const before = sideLines().length
      old.proc.kill("SIGCONT")
      await old.waitFor("LeaseLost", 15_000)
      await new Promise((resolve) => setTimeout(resolve, MODEL_MS + 300))
      const after = sideLines().slice(before)
      assert.deepStrictEqual(after.filter((line) => line.owner === frozen.owner), [], "no step or model call after SIGCONT")
      const final = await logOf(paused)
      assert.strictEqual(final.length, log.length, "nothing was appended after the turn ended")
      assert.isTrue(final.some((r) => r.json.includes(`s1@${frozen.owner}`)), "its first model result is in the log")
      assert.isFalse(
        final.some((r) => new RegExp(`(s2|s3|done)@${frozen.owner}`).test(r.json)),
        "no model result of the paused owner after its first call"
      )
      console.log(`SIGSTOP: model call 2 again on ${successor.owner} after ${successor.at - stoppedAt} ms`)

      // SIGTERM inside the second model call: the draining owner lets the call and its step finish, stops the
      // turn at that step boundary and releases the lease; another worker goes on with call 3, well before the TTL.
      const drained = await submit(3)
      const leaving = await modelCall(drained, 2)
      const draining = worker(leaving.owner)
      draining.proc.kill("SIGTERM")
      const termAt = Date.now()
      const heir = await until("another worker on the drained session", () =>
        of(drained).find((line) => line.kind === "model" && line.owner !== leaving.owner))
      // The handover proper: from the drained owner's last step (its lease is released right after it) to the heir's call.
      const lastStep = of(drained).filter((line) => line.kind === "tool" && line.owner === leaving.owner).at(-1)!
      console.log(`SIGTERM: model call ${heir.n} on ${heir.owner} after ${heir.at - termAt} ms (TTL ${TTL} ms), ${heir.at - lastStep.at} ms after the last step`)
      assert.isBelow(heir.at - termAt, TTL, "handed over, not left to expire")
      assertDoneOnce(await ended(drained), drained, 3, heir.owner)
      assert.deepStrictEqual(
        of(drained).map((line) => `${line.kind} ${line.n} ${line.owner}`),
        [
          `model 1 ${leaving.owner}`, `tool 1 ${leaving.owner}`, `model 2 ${leaving.owner}`, `tool 2 ${leaving.owner}`,
          `model 3 ${heir.owner}`, `tool 3 ${heir.owner}`, `model 4 ${heir.owner}`
        ],
        "handed over between steps: no call made twice"
      )
      assert.strictEqual(await draining.exited, 0)
      assert.include(draining.output(), "DRAINED true")

      // A pause longer than the TTL in the middle of several turns (a starved machine): every lease lapses
      // mid-turn and the worker's actors stop with LeaseLost as it wakes, without taking its store
      // connections with them; it claims its sessions again and finishes them, each step once.
      const last = workers.find((w) => w.proc.exitCode === null && w.proc.signalCode === null)!
      const starved = await Promise.all(Array.from({ length: 6 }, () => submit(2)))
      await Promise.all(starved.map((id) => modelCall(id, 1)))
      last.proc.kill("SIGSTOP")
      await new Promise((resolve) => setTimeout(resolve, TTL + 1000))
      last.proc.kill("SIGCONT")
      for (const id of starved) assertDoneOnce(await ended(id), id, 2, last.owner)
    }, 150_000)

    it("a worker that wakes past its lease starts nothing; a dead worker's 15 busy sessions all move within TTL + 2 s", async () => {
      const ttl = 1500
      // The previous test's survivors would claim this test's sessions (same database): none is left running.
      const survivors = workers.filter((w) => w.proc.exitCode === null && w.proc.signalCode === null)
      for (const w of survivors) w.proc.kill("SIGKILL")
      await Promise.all(survivors.map((w) => w.exited))
      await store.runPromise(Effect.flatMap(SessionStore, (s) => s.now))
      const fleet = ["p1", "p2", "p3"].map((owner) =>
        startWorker(url, owner, side, { POOL_TTL_MS: String(ttl), POOL_MODEL_MS: "300", POOL_GRACE_MS: "0" }))
      workers.push(...fleet)
      await Promise.all(fleet.map((w) => w.waitFor(`READY ${w.owner}`, 60_000)))
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

      // Paused right after committing a tool call's start (SIGSTOP, then a blocked event loop), longer than
      // the TTL: another worker takes the turn over (the step's outcome is unknown, the turn ends), and the
      // sleeper, awake, runs no tool body and makes no model call: it stops with LeaseLost.
      for (const how of ["stop", `block ${ttl + 1000}`]) {
        const id = await store.runPromise(Effect.gen(function*() {
          const sessions = yield* SessionStore
          const session = yield* sessions.create({ principal: me, agent })
          writeFileSync(`${side}.pause.${session.id}`, how)
          yield* sessions.push(session.id, message("steps 1"))
          return session.id
        }))
        const pause = await until(`the pause of ${id}`, () => of(id).find((line) => line.kind === "pause"))
        const sleeper = worker(pause.owner)
        const before = sleeper.output().length
        const log = await ended(id)
        if (how === "stop") sleeper.proc.kill("SIGCONT")
        await until(`LeaseLost from ${pause.owner}`, () => (sleeper.output().slice(before).includes("LeaseLost") ? true : undefined), 15_000)
        await sleep(600)
        assert.deepStrictEqual(
          sideLines().filter((line) => line.owner === pause.owner && line.at > pause.at),
          [],
          `${how}: no tool body and no model call after waking`
        )
        assert.isTrue(log.some((r) => r.tag === "operation_unknown"), "the new owner reported the step unknown")
        assert.include(log.find((r) => r.tag === "turn_ended")!.json, `"completed"`)
      }

      // Fifteen busy sessions on one worker (the other two stopped while it claims them), then SIGKILL.
      const [doomed, ...rest] = fleet.filter((w) => w.proc.exitCode === null && w.proc.signalCode === null)
      for (const w of rest) w.proc.kill("SIGSTOP")
      const burst = await Promise.all(Array.from({ length: 15 }, () => submit(20)))
      await Promise.all(burst.map((id) => until(`${id} on ${doomed!.owner}`, () => of(id).find((l) => l.kind === "model" && l.owner === doomed!.owner))))
      for (const w of rest) w.proc.kill("SIGCONT")
      await sleep(300)
      doomed!.proc.kill("SIGKILL")
      const killedAt = Date.now()
      const heirs = rest.map((w) => `@${w.owner}`)
      const moved = await Promise.all(burst.map(async (id) => {
        for (;;) {
          const records = await store.runPromise(Effect.flatMap(SessionStore, (s) => s.readLog(id, { limit: 10_000 })))
          const next = records.records.find((r) =>
            r.at > killedAt && heirs.some((heir) => JSON.stringify(Schema.encodeSync(LogRecord)(r)).includes(heir)))
          if (next !== undefined) return next.at - killedAt
          if (Date.now() - killedAt > 20_000) throw new Error(`${id}: no commit by another worker`)
          await sleep(100)
        }
      }))
      const sorted = [...moved].sort((a, b) => a - b)
      // When each session's next model call began elsewhere: its claim, without the call's 300 ms and the commit.
      const calls = burst.map((id) => of(id).find((l) => l.kind === "model" && l.owner !== doomed!.owner && l.at > killedAt)!.at - killedAt)
      console.log(`SIGKILL of 15 busy sessions: next model calls elsewhere after ${JSON.stringify(calls.sort((a, b) => a - b))} ms`)
      console.log(`SIGKILL of 15 busy sessions: next commits by others after ${JSON.stringify(sorted)} ms (TTL ${ttl} ms)`)
      assert.isBelow(sorted[sorted.length - 1]!, ttl + 2000, "every session of the burst moved within TTL + 2 s")
    }, 150_000)
  })
} else {
  describe.skip(`three worker processes on one PostgreSQL database (${pg.reason})`, () => {
    it("needs a PostgreSQL server", () => {})
  })
}
