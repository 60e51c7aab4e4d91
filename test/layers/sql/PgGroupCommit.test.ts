/**
 * Group commit on PostgreSQL (`PgSessionStore.layer({ groupCommit })`,
 * src/layers/sql/pg/PgGroupCommit.ts): appends that wait while the store is busy go
 * in one round trip and one transaction, each fenced on its own. The
 * conformance suite runs over it in test/PgSessionStore.test.ts; this file
 * holds what only a batch can show. Batches are made deterministic by holding
 * a session row from outside: the append ahead waits for it, and those behind
 * it queue into one batch.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Context, Effect, Either, Fiber, Layer, Option, type Scope } from "effect"
import pg from "pg"
import { literal, quote } from "../../../src/layers/sql/pg/PgGroupCommit.js"
import * as PgSessionStore from "../../../src/layers/PgSessionStore.js"
import type { SessionId } from "../../../src/schema/Ids.js"
import type { Lease } from "../../../src/schema/Lease.js"
import { Renamed } from "../../../src/schema/Record.js"
import { SessionStore } from "../../../src/services/SessionStore.js"
import { agent, commit, message, principal, turnBatch } from "../../support/fixtures.js"
import { availability, freshSchema } from "../../support/postgres.js"

describe("PgGroupCommit literals", () => {
  it("quote writes what node-postgres' escapeLiteral writes", () => {
    for (const text of ["", "plain", "it's", "''", "back\\slash", "both ' and \\", "{\"json\":\"a\\\"b\"}", "é ✓ \n\t"]) {
      assert.strictEqual(quote(text), pg.escapeLiteral(text), JSON.stringify(text))
    }
  })

  it("literal writes text, numbers, booleans, null and arrays of text", () => {
    assert.strictEqual(literal(null), "NULL")
    assert.strictEqual(literal(true), "TRUE")
    assert.strictEqual(literal(-3), "-3")
    assert.strictEqual(literal([]), "'{}'")
    assert.strictEqual(literal(["a", null, "it's"]), "ARRAY['a', NULL, 'it''s']")
    assert.throws(() => literal(Number.NaN))
    assert.throws(() => literal({}))
  })
})

const status = await availability()

if (status.run) {
  const { drop, url } = await freshSchema()
  afterAll(drop)

  const open = (batches: Array<number>): Effect.Effect<SessionStore["Type"], unknown, Scope.Scope> =>
    Effect.map(
      Layer.build(PgSessionStore.layer({ url, maxConnections: 6, groupCommit: { inFlight: 1, onBatch: (n) => void batches.push(n) } })),
      Context.get(SessionStore)
    )

  const leased = (store: SessionStore["Type"]) =>
    Effect.gen(function*() {
      const session = yield* store.create({ principal: principal(), agent: agent() })
      return Option.getOrThrow(yield* store.acquire(session.id, "worker", 60_000))
    })

  /** A connection of the test's own holding `sessionId`'s row until its transaction ends. */
  const holding = (sessionId: SessionId) =>
    Effect.gen(function*() {
      const client = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => client.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => client.end()))
      yield* Effect.promise(() => client.query("BEGIN"))
      yield* Effect.promise(() => client.query("SELECT 1 FROM troupe_sessions WHERE id = $1 FOR UPDATE", [sessionId]))
      return client
    })

  // Plain timers: `it.scoped` runs under TestClock, where Effect.sleep never fires.
  const sleep = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))
  const pause = sleep(200)

  const tagOf = <A, E extends { readonly _tag: string }>(result: Either.Either<A, E>) =>
    Either.isRight(result) ? "ok" : result.left._tag

  describe("PgGroupCommit on PostgreSQL", () => {
    it.scoped("appends queued together commit in one round trip, and each is refused or committed on its own", () =>
      Effect.gen(function*() {
        const batches: Array<number> = []
        const store = yield* open(batches)
        const [ahead, good, stale, wrongHead] = yield* Effect.forEach([1, 2, 3, 4], () => leased(store))
        const holder = yield* holding(ahead!.sessionId)
        // The one round trip allowed waits for the held row; the three behind it queue.
        const first = yield* Effect.fork(store.append(yield* commit(ahead!, 1, [new Renamed({ title: "ahead" })])))
        yield* pause
        batches.length = 0
        const behind = yield* Effect.forEach([
          commit(good!, 1, yield* turnBatch()),
          commit({ ...stale!, epoch: stale!.epoch + 7 } as Lease, 1, [new Renamed({ title: "stale epoch" })]),
          commit(wrongHead!, 2, [new Renamed({ title: "wrong head" })])
        ], (make) => Effect.flatMap(make, (c) => Effect.fork(Effect.either(store.append(c)))))
        yield* pause
        yield* Effect.promise(() => holder.query("COMMIT"))
        yield* Fiber.join(first)
        const outcomes = yield* Effect.forEach(behind, Fiber.join)
        assert.deepStrictEqual(batches, [3], "the three went in one round trip")
        assert.deepStrictEqual(outcomes.map(tagOf), ["ok", "LeaseLost", "SequenceConflict"])
        const receipt = Either.getOrThrow(outcomes[0]!)
        assert.deepStrictEqual([receipt.firstSeq, receipt.headSeq], [2, 5])
        assert.strictEqual((yield* store.get(good!.sessionId)).headSeq, 5)
        for (const refused of [stale!, wrongHead!]) {
          const session = yield* store.get(refused.sessionId)
          assert.deepStrictEqual([session.headSeq, session.title], [1, null], "a refused append wrote nothing")
        }
      }), 30_000)

    it.scoped("a lone append whose connection dies is not acknowledged, writes nothing, and commits once when delivered again", () =>
      Effect.gen(function*() {
        const batches: Array<number> = []
        const store = yield* open(batches)
        const lease = yield* leased(store)
        const hold = yield* holding(lease.sessionId)
        const lone = yield* commit(lease, 1, [new Renamed({ title: "lone" })])
        const fiber = yield* Effect.fork(Effect.either(store.append(lone)))
        // The append waits on the row, on a connection the store took from its pool: end that connection.
        let killed = 0
        for (let tries = 0; tries < 50 && killed === 0; tries++) {
          yield* sleep(50)
          const { rows } = yield* Effect.promise(() =>
            hold.query(
              `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
              WHERE application_name = 'troupe' AND query LIKE 'WITH s AS MATERIALIZED%' AND wait_event_type = 'Lock'`
            )
          )
          killed = rows.length
        }
        assert.strictEqual(killed, 1, "the append's backend was found waiting")
        assert.strictEqual(tagOf(yield* Fiber.join(fiber)), "StoreUnavailable")
        yield* Effect.promise(() => hold.query("ROLLBACK"))
        assert.deepStrictEqual([(yield* store.get(lease.sessionId)).headSeq, (yield* store.get(lease.sessionId)).title], [1, null], "nothing was written")
        // The dead connection left the pool: the same commit delivered again, and another after it, each commit once.
        const again = yield* store.append(lone)
        assert.deepStrictEqual([again.firstSeq, again.headSeq], [2, 2])
        const next = yield* store.append(yield* commit(lease, 2, [new Renamed({ title: "next" })]))
        assert.strictEqual(next.headSeq, 3)
        assert.strictEqual((yield* store.get(lease.sessionId)).title, "next")
        assert.deepStrictEqual(batches, [1, 1, 1])
      }), 30_000)

    it.scoped("a batch whose connection dies acknowledges none of its appends and writes none", () =>
      Effect.gen(function*() {
        const batches: Array<number> = []
        const store = yield* open(batches)
        const ahead = yield* leased(store)
        // Descending session-id order is the batch's order: `written` runs (and writes) before `blocked` waits.
        const [written, blocked] = (yield* Effect.forEach([1, 2], () => leased(store))).sort((a, b) =>
          a.sessionId > b.sessionId ? -1 : 1
        ) as [Lease, Lease]
        const holdAhead = yield* holding(ahead.sessionId)
        const holdBlocked = yield* holding(blocked.sessionId)
        const first = yield* Effect.fork(store.append(yield* commit(ahead, 1, [new Renamed({ title: "ahead" })])))
        yield* pause
        const commits = [yield* commit(written, 1, [new Renamed({ title: "written" })]), yield* commit(blocked, 1, [new Renamed({ title: "blocked" })])]
        const behind = yield* Effect.forEach(commits, (c) => Effect.fork(Effect.either(store.append(c))))
        yield* pause
        yield* Effect.promise(() => holdAhead.query("COMMIT"))
        yield* Fiber.join(first)
        // The batch has run its first append and waits on the second's row: end its connection.
        let killed = 0
        for (let tries = 0; tries < 50 && killed === 0; tries++) {
          yield* sleep(50)
          const { rows } = yield* Effect.promise(() =>
            holdBlocked.query(
              `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
              WHERE query LIKE 'EXECUTE troupe_group_%' AND wait_event_type = 'Lock'`
            )
          )
          killed = rows.length
        }
        assert.strictEqual(killed, 1, "the batch's backend was found waiting")
        const outcomes = yield* Effect.forEach(behind, Fiber.join)
        assert.deepStrictEqual(outcomes.map(tagOf), ["StoreUnavailable", "StoreUnavailable"])
        yield* Effect.promise(() => holdBlocked.query("ROLLBACK"))
        for (const lease of [written, blocked]) {
          const session = yield* store.get(lease.sessionId)
          assert.deepStrictEqual([session.headSeq, session.title], [1, null], "nothing of the batch was written")
        }
        // Delivered again (as an actor does after StoreUnavailable), each commits once.
        const again = yield* Effect.forEach(commits, (c) => store.append(c), { concurrency: "unbounded" })
        assert.deepStrictEqual(again.map((r) => r.headSeq), [2, 2])
        assert.deepStrictEqual(batches.slice(0, 2), [1, 2])
      }), 30_000)

    it.scoped("many sessions appending (and pushing) at once share round trips, and every write lands once", () =>
      Effect.gen(function*() {
        const batches: Array<number> = []
        const store = yield* open(batches)
        const leases = yield* Effect.forEach(Array.from({ length: 24 }), () => leased(store), { concurrency: 6 })
        batches.length = 0
        for (let round = 0; round < 3; round++) {
          yield* Effect.forEach(leases, (lease) =>
            Effect.flatMap(Effect.flatMap(turnBatch(), (records) => commit(lease, 1 + round * 4, records)), store.append), {
            concurrency: "unbounded",
            discard: true
          })
        }
        assert.isTrue(batches.some((n) => n > 1), `appends were grouped: ${batches}`)
        assert.strictEqual(batches.reduce((a, b) => a + b, 0), 72)
        for (const lease of leases) assert.strictEqual((yield* store.readLog(lease.sessionId)).records.length, 13)
        // Pushes group too; a command pushed twice at once (maybe in one batch) is admitted once.
        batches.length = 0
        const pushes = yield* Effect.forEach(leases, (lease) => {
          const once = message(`for ${lease.sessionId}`)
          return Effect.all([store.push(lease.sessionId, once), store.push(lease.sessionId, once)], { concurrency: "unbounded" })
        }, { concurrency: "unbounded" })
        assert.isTrue(batches.some((n) => n > 1), `pushes were grouped: ${batches}`)
        for (const [first, second] of pushes) {
          assert.deepStrictEqual([first.position, second.position], [1, 1])
          assert.deepStrictEqual([first.duplicate, second.duplicate].sort(), [false, true])
        }
        for (const lease of leases) assert.strictEqual((yield* store.readInbox(lease.sessionId)).length, 1)
      }), 60_000)
  })
} else {
  describe.skip(`PgGroupCommit on PostgreSQL (${status.reason})`, () => {
    it("needs a PostgreSQL server", () => {})
  })
}
