/**
 * SessionStore figures: commits per second (a commit = 4 records + 1 consumed
 * inbox item) and log replay records per second, on a SQLite file (WAL) and on
 * PostgreSQL. Each figure is the median of several rounds.
 *
 *   node bench/run.mjs store [--rounds 5] [--commits 2000] [--records 20000] [--only sqlite|postgres]
 *                            [--sync normal|full|both]
 *
 * PostgreSQL comes from TROUPE_TEST_PG_URL (default the local server) and is
 * benchmarked in a fresh schema that is dropped afterwards.
 */
import { Effect, Layer, Option } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { InputId, makeCommitId, type SessionId } from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import { Commit, type Lease } from "../src/schema/Lease.js"
import { Principal } from "../src/schema/Principal.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { arg, fillLog, loadAverage, median, turnRecords, withPgSchema } from "./support.js"

const rounds = Number(arg("rounds", "5"))
const commitsPerRound = Number(arg("commits", "2000"))
const replayRecords = Number(arg("records", "20000"))
const only = arg("only", "all")
// SQLite durability: normal (the default), full (an fsync per commit), or both, side by side in one run.
const sync = arg("sync", "normal")

const principal = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const agent = new Agent({ name: "bench", instructions: "benchmark", model: new ModelRef({ name: "scripted" }) })

/** Pushes `n` messages, then times `n` commits that each consume one. */
const commitRound = (n: number, sessionsInParallel: number) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const perSession = Math.ceil(n / sessionsInParallel)
    const prepared = yield* Effect.forEach(Array.from({ length: sessionsInParallel }), () =>
      Effect.gen(function*() {
        const session = yield* store.create({ principal, agent })
        const inputs: Array<InputId> = []
        for (let i = 0; i < perSession; i++) {
          const inputId = InputId.make(`in-${i}`)
          yield* store.push(session.id, new Message({ inputId, text: "hello" }))
          inputs.push(inputId)
        }
        const lease = Option.getOrThrow(yield* store.acquire(session.id, "bench", 3_600_000))
        const batches = yield* Effect.forEach(inputs, turnRecords)
        return { session: session.id, lease, inputs, batches }
      }))
    const drive = (p: { session: SessionId; lease: Lease; inputs: Array<InputId>; batches: Array<any> }) =>
      Effect.gen(function*() {
        let head = 1
        for (let i = 0; i < p.inputs.length; i++) {
          const receipt = yield* store.append(
            new Commit({
              commitId: yield* makeCommitId,
              sessionId: p.session,
              owner: "bench",
              epoch: p.lease.epoch,
              expectedHeadSeq: head,
              records: p.batches[i],
              consumes: [p.inputs[i]!]
            })
          )
          head = receipt.headSeq
        }
      })
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    yield* Effect.forEach(prepared, drive, { concurrency: "unbounded" })
    const ms = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    const total = perSession * sessionsInParallel
    return { perSecond: (total / ms) * 1000, cpuMicrosPerCommit: (cpu.user + cpu.system) / total }
  })

/** Writes `records` records to one session, to time reading them all back. */
const replaySetup = (records: number) => fillLog(principal, agent, records, InputId.make("x"))

const replayRound = (sessionId: SessionId) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const t0 = performance.now()
    let after = 0
    let count = 0
    for (;;) {
      const page = yield* store.readLog(sessionId, { after, limit: 1000 })
      count += page.records.length
      after = page.cursor
      if (!page.more) break
    }
    const ms = performance.now() - t0
    return (count / ms) * 1000
  })

const suite = (name: string, parallel: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const results: Record<string, number> = {}
    for (const p of parallel) {
      yield* commitRound(Math.min(200, commitsPerRound), p) // warm-up
      const runs = []
      for (let r = 0; r < rounds; r++) runs.push(yield* commitRound(commitsPerRound, p))
      results[`commits/s (${p} session${p > 1 ? "s" : ""})`] = median(runs.map((x) => x.perSecond))
      results[`CPU µs/commit (${p} session${p > 1 ? "s" : ""})`] = median(runs.map((x) => x.cpuMicrosPerCommit))
    }
    const { sessionId } = yield* replaySetup(replayRecords)
    yield* replayRound(sessionId)
    const replays = []
    for (let r = 0; r < rounds; r++) replays.push(yield* replayRound(sessionId))
    results["replayed records/s"] = median(replays)
    console.log(`\n${name}`)
    for (const [k, v] of Object.entries(results)) console.log(`  ${k.padEnd(32)} ${v.toFixed(k.startsWith("CPU") ? 0 : 0)}`)
    return results
  })

const main = async () => {
  const load = loadAverage()
  console.log(`node ${process.version}, load average ${load}, rounds ${rounds}, commits/round ${commitsPerRound}`)
  if (only === "all" || only === "sqlite") {
    const choices: ReadonlyArray<SqliteSessionStore.Synchronous> = sync === "both" ? ["normal", "full"] : [sync === "full" ? "full" : "normal"]
    for (const synchronous of choices) {
      const dir = mkdtempSync(join(tmpdir(), "troupe-bench-"))
      const filename = join(dir, "bench.db")
      await Effect.runPromise(
        suite(`SQLite file (WAL, synchronous=${synchronous.toUpperCase()})`, [1]).pipe(
          Effect.provide(SqliteSessionStore.layer({ filename, synchronous }) as Layer.Layer<SessionStore>)
        )
      )
      console.log(`  database size                    ${(statSync(filename).size / 1024 / 1024).toFixed(1)} MiB`)
      rmSync(dir, { recursive: true, force: true })
    }
  }
  if (only === "all" || only === "postgres") {
    await withPgSchema("troupe_bench", (url) =>
      Effect.runPromise(
        suite("PostgreSQL (localhost)", [1, 8]).pipe(
          Effect.provide(PgSessionStore.layer({ url, maxConnections: 8 }) as Layer.Layer<SessionStore>)
        )
      ))
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
