/**
 * Group commit on SQLite (`SqliteSessionStore.layer({ groupCommit })`):
 * several sessions' writes that come together run in one transaction, each
 * in its own savepoint and each still fenced by its own lease and head. The
 * conformance suite runs over it in test/SqliteSessionStore.test.ts; this
 * file holds what only a batch can show.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteGroupCommit from "../../../src/layers/sql/sqlite/SqliteGroupCommit.js"
import * as SqliteSessionStore from "../../../src/layers/SqliteSessionStore.js"
import { Message } from "../../../src/schema/Inbox.js"
import { SessionStore } from "../../../src/services/SessionStore.js"
import { agent, commit, inputId, principal, turnBatch } from "../../support/fixtures.js"

const file = () => join(mkdtempSync(join(tmpdir(), "troupe-group-")), "store.db")

// Company is assumed whenever another session wrote last (however long ago), so a loaded machine cannot space the writes out of a batch.
const open = (batches: Array<number>, maxBatch?: number) =>
  Effect.map(
    Layer.build(
      SqliteSessionStore.layer({ filename: file(), groupCommit: { onBatch: (n) => void batches.push(n), maxBatch, recentMicros: 1e12 } })
    ),
    Context.get(SessionStore)
  )

describe("SqliteSessionStore group commit", () => {
  it.scoped("concurrent writes of many sessions share transactions, and each is fenced on its own", () =>
    Effect.gen(function*() {
      const batches: Array<number> = []
      const store = yield* open(batches)
      const owner = principal()
      const sessions = yield* Effect.forEach(Array.from({ length: 24 }), () => store.create({ principal: owner, agent: agent() }), {
        concurrency: "unbounded"
      })
      assert.isTrue(batches.some((n) => n > 1), `creates were grouped: ${batches}`)
      const leases = yield* Effect.forEach(sessions, (s) => Effect.map(store.acquire(s.id, "worker", 60_000), Option.getOrThrow))
      batches.length = 0
      // Every third session's commit is stale (a wrong head), every third + 1 presents a stale epoch.
      const attempts = yield* Effect.forEach(leases, (lease, i) =>
        Effect.gen(function*() {
          const records = yield* turnBatch()
          const fenced = i % 3 === 1 ? { ...lease, epoch: lease.epoch + 7 } : lease
          return yield* Effect.either(store.append(yield* commit(fenced, i % 3 === 0 ? 2 : 1, records)))
        }), { concurrency: "unbounded" })
      assert.isTrue(batches.some((n) => n > 1), `appends were grouped: ${batches}`)
      for (const [i, attempt] of attempts.entries()) {
        const session = sessions[i]!
        const head = (yield* store.get(session.id)).headSeq
        const log = yield* store.readLog(session.id)
        if (i % 3 === 2) {
          assert.isTrue(Either.isRight(attempt), `session ${i} committed`)
          const receipt = Either.getOrThrow(attempt)
          assert.strictEqual(receipt.sessionId, session.id)
          assert.strictEqual(receipt.firstSeq, 2)
          assert.strictEqual(receipt.headSeq, 5)
          assert.strictEqual(head, 5)
          assert.strictEqual(log.records.length, 5)
        } else {
          assert.isTrue(Either.isLeft(attempt), `session ${i} refused`)
          const error = (attempt as Either.Left<{ readonly _tag: string }, unknown>).left
          assert.strictEqual(error._tag, i % 3 === 0 ? "SequenceConflict" : "LeaseLost")
          // A refusal in a batch rolls back its own savepoint only: nothing of it is written.
          assert.strictEqual(head, 1)
          assert.strictEqual(log.records.length, 1)
        }
      }
    }))

  it.scoped("a commit and its retry in one batch: the retry is answered as a replay, written once", () =>
    Effect.gen(function*() {
      const batches: Array<number> = []
      const store = yield* open(batches)
      const owner = principal()
      const [a, b] = yield* Effect.all([store.create({ principal: owner, agent: agent() }), store.create({ principal: owner, agent: agent() })], {
        concurrency: "unbounded"
      })
      const lease = Option.getOrThrow(yield* store.acquire(a!.id, "worker", 60_000))
      const other = Option.getOrThrow(yield* store.acquire(b!.id, "worker", 60_000))
      const once = yield* commit(lease, 1, yield* turnBatch())
      const [first, retry, beside] = yield* Effect.all([
        store.append(once),
        store.append(once),
        Effect.flatMap(turnBatch(), (records) => Effect.flatMap(commit(other, 1, records), store.append))
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual(retry, first)
      assert.strictEqual(beside.headSeq, 5)
      assert.strictEqual((yield* store.readLog(a!.id)).records.length, 5)
      assert.strictEqual((yield* store.get(a!.id)).headSeq, 5)
    }))

  it.scoped("pushes of many sessions in batches keep each inbox gap-free and idempotent", () =>
    Effect.gen(function*() {
      const batches: Array<number> = []
      const store = yield* open(batches, 4)
      const owner = principal()
      const sessions = yield* Effect.forEach(Array.from({ length: 10 }), () => store.create({ principal: owner, agent: agent() }))
      batches.length = 0
      const messages = sessions.map(() => [new Message({ inputId: inputId(), text: "one" }), new Message({ inputId: inputId(), text: "two" })])
      const admissions = yield* Effect.forEach(sessions, (s, i) =>
        Effect.forEach([...messages[i]!, messages[i]![0]!], (m) => store.push(s.id, m)), { concurrency: "unbounded" })
      assert.isTrue(batches.some((n) => n > 1), `pushes were grouped: ${batches}`)
      assert.isTrue(batches.every((n) => n <= 4), `no batch over maxBatch: ${batches}`)
      for (const [i, s] of sessions.entries()) {
        assert.deepStrictEqual(admissions[i]!.map((a) => [a.position, a.duplicate]), [[1, false], [2, false], [1, true]])
        assert.deepStrictEqual((yield* store.readInbox(s.id)).map((item) => item.position), [1, 2])
      }
    }))
})

// The group's function only builds an effect: it decides on company (and runs a lone transaction) when that effect runs.
describe("SqliteGroupCommit.make", () => {
  const driverLog = (idle = true) => {
    const calls: Array<string> = []
    const driver: SqliteGroupCommit.Driver = {
      inOneTransaction: (batch) => {
        calls.push("batch")
        batch()
      },
      inSavepoint: (run) => run(),
      inTransaction: () => true,
      atomic: (now) => Effect.suspend(() => (calls.push("atomic"), now())),
      atomicNow: (now) => {
        calls.push("atomicNow")
        return now()
      },
      idle: () => idle
    }
    return { calls, driver }
  }
  const settle = (outcome: SqliteGroupCommit.Outcome) =>
    outcome.ok ? Effect.succeed(outcome.value as string) : Effect.die(outcome.error)

  it.effect("building a transaction's effect runs and decides nothing; running it does, each time", () =>
    Effect.gen(function*() {
      const { calls, driver } = driverLog()
      // Company within a minute: the test does not hang on the machine's speed.
      const transact = SqliteGroupCommit.make(driver, { recentMicros: 60_000_000 })
      const ran: Array<string> = []
      const solo = (key: string) => () => Effect.sync(() => (ran.push(`solo ${key}`), key))
      const grouped = (key: string) => () => (ran.push(`grouped ${key}`), key)
      // Built first, another session's transaction in between, then run: it sees that company.
      const early = transact<string, never>("b", solo("b"), grouped("b"), settle)
      assert.deepStrictEqual(calls, [])
      assert.strictEqual(yield* transact<string, never>("a", solo("a"), grouped("a"), settle), "a")
      assert.deepStrictEqual(ran, ["solo a"])
      assert.strictEqual(yield* early, "b")
      assert.deepStrictEqual(ran, ["solo a", "grouped b"])
      assert.deepStrictEqual(calls, ["atomicNow", "batch"])
    }))

  it.effect("a batch is run when its turn of the event loop ends, under the lock when the connection is held then", () =>
    Effect.gen(function*() {
      for (const idle of [true, false]) {
        const { calls, driver } = driverLog(idle)
        const transact = SqliteGroupCommit.make(driver, { recentMicros: 60_000_000 })
        const solo = (key: string) => () => Effect.succeed(key)
        const grouped = (key: string) => () => key
        assert.strictEqual(yield* transact<string, never>("a", solo("a"), grouped("a"), settle), "a")
        // Company: b leads a batch that c joins before the event loop's turn ends.
        const both = yield* Effect.all([
          transact<string, never>("b", solo("b"), grouped("b"), settle),
          transact<string, never>("c", solo("c"), grouped("c"), settle)
        ], { concurrency: "unbounded" })
        assert.deepStrictEqual(both, ["b", "c"])
        assert.deepStrictEqual(calls, idle ? ["atomicNow", "batch"] : ["atomicNow", "atomic", "batch"])
      }
    }))
})
