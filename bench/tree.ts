/**
 * Session-tree figures: a tree of 1,111 sessions (a root, 10 children, 100
 * grandchildren, 1,000 great-grandchildren: 10 × 10 × 10) built through
 * `SessionStore.spawn` (one store transaction per child), then the latency of
 * `tree` over the whole tree and a subtree, of one `children` page, of paging
 * a session's children three at a time, and of paging the whole tree through
 * the catalog (`list({ scope: { tree } })`, 100 a page). Medians and p99 over
 * `--rounds` calls, per backend.
 *
 *   node bench/run.mjs tree [--rounds 50] [--only memory|sqlite|postgres]
 *
 * PostgreSQL comes from TROUPE_TEST_PG_URL (default the local server), in a
 * fresh schema dropped afterwards.
 */
import { Effect, type Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef, SubagentRef } from "../src/schema/Agent.js"
import { InputId, makeCommitId, type SessionId } from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import { Commit } from "../src/schema/Lease.js"
import { SubagentPolicy } from "../src/schema/Policy.js"
import { Principal } from "../src/schema/Principal.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { arg, loadAverage, median, percentile, withPgSchema } from "./support.js"

const rounds = Number(arg("rounds", "50"))
const only = arg("only", "all")
const FANOUT = 10

const principal = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const worker = new Agent({
  name: "worker",
  instructions: "benchmark",
  model: new ModelRef({ name: "scripted" }),
  subagents: [new SubagentRef({ name: "worker" })]
})
const policy = new SubagentPolicy({ maxDepth: 3, maxChildren: FANOUT, maxChildTurns: 10_000 })

/** Builds the tree level by level through `spawn`; returns the root, a level-1 and a level-2 session, and the cost per spawn. */
const build = Effect.gen(function*() {
  const store = yield* SessionStore
  const root = yield* store.create({ principal, agent: worker, subagentPolicy: policy })
  let level: ReadonlyArray<SessionId> = [root.id]
  const levels: Array<ReadonlyArray<SessionId>> = [level]
  let spawns = 0
  let spawnMs = 0
  const cpu0 = process.cpuUsage()
  for (let depth = 1; depth <= 3; depth++) {
    const next: Array<SessionId> = []
    for (const parentId of level) {
      const lease = Option.getOrThrow(yield* store.acquire(parentId, "bench", 3_600_000))
      let head = (yield* store.get(parentId)).headSeq
      for (let i = 0; i < FANOUT; i++) {
        const t0 = performance.now()
        const spawned = yield* store.spawn({
          principal,
          commit: new Commit({
            commitId: yield* makeCommitId,
            sessionId: parentId,
            owner: "bench",
            epoch: lease.epoch,
            expectedHeadSeq: head,
            records: [],
            consumes: []
          }),
          agent: worker,
          message: new Message({ inputId: InputId.make(`spawn-${parentId}-${i}`), text: "work" })
        })
        spawnMs += performance.now() - t0
        spawns++
        head = spawned.receipt.headSeq
        next.push(spawned.child.id)
      }
      yield* store.release(lease)
    }
    level = next
    levels.push(level)
  }
  const cpu = process.cpuUsage(cpu0)
  return {
    root: root.id,
    levelOne: levels[1]![0]!,
    levelTwo: levels[2]![0]!,
    sessions: levels.reduce((n, l) => n + l.length, 0),
    spawnMsEach: spawnMs / spawns,
    spawnCpuUsEach: (cpu.user + cpu.system) / spawns
  }
})

/** Median and p99 (ms) of `rounds` runs of `effect`, after one warm-up run. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    yield* effect
    const ms: Array<number> = []
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now()
      yield* effect
      ms.push(performance.now() - t0)
    }
    ms.sort((a, b) => a - b)
    return `median ${median(ms).toFixed(2)} ms, p99 ${percentile(ms, 0.99).toFixed(2)} ms`
  })

const suite = (name: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const tree = yield* build
    const check = yield* store.tree(principal, tree.root)
    if (check.nodes.length !== tree.sessions - 1) throw new Error(`tree has ${check.nodes.length} nodes`)
    const pageAll = (list: (cursor: string | undefined) => Effect.Effect<{ readonly nextCursor?: string | undefined }, unknown>) =>
      Effect.gen(function*() {
        let cursor: string | undefined
        let pages = 0
        do {
          cursor = (yield* list(cursor)).nextCursor
          pages++
        } while (cursor !== undefined)
        return pages
      })
    const results: Array<readonly [string, string]> = [
      ["sessions in the tree", `${tree.sessions}`],
      ["spawn (one transaction)", `${tree.spawnMsEach.toFixed(2)} ms wall, ${tree.spawnCpuUsEach.toFixed(0)} µs CPU each`],
      ["tree(root): 1,110 nodes", yield* timed(store.tree(principal, tree.root))],
      ["tree(level 1): 110 nodes", yield* timed(store.tree(principal, tree.levelOne))],
      ["children: one page of 10", yield* timed(store.children(principal, tree.levelTwo, { limit: 10 }))],
      [
        "children: 10 in pages of 3",
        yield* timed(pageAll((cursor) => store.children(principal, tree.levelTwo, { cursor, limit: 3 })))
      ],
      [
        "list({ tree }): 1,110 in pages of 100",
        yield* timed(pageAll((cursor) => store.list({ principal, scope: { tree: tree.root }, cursor, limit: 100 })))
      ]
    ]
    console.log(`\n${name}`)
    for (const [k, v] of results) console.log(`  ${k.padEnd(38)} ${v}`)
  })

const main = async () => {
  console.log(`node ${process.version}, load average ${loadAverage()}, rounds ${rounds}`)
  if (only === "all" || only === "memory") {
    await Effect.runPromise(suite("memory").pipe(Effect.provide(MemorySessionStore.layer)))
  }
  if (only === "all" || only === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "troupe-bench-tree-"))
    try {
      await Effect.runPromise(
        suite("SQLite file (WAL)").pipe(
          Effect.provide(SqliteSessionStore.layer({ filename: join(dir, "tree.db") }) as Layer.Layer<SessionStore>)
        )
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  if (only === "all" || only === "postgres") {
    await withPgSchema("troupe_bench_tree", (url) =>
      Effect.runPromise(
        suite("PostgreSQL (localhost)").pipe(
          Effect.provide(PgSessionStore.layer({ url, maxConnections: 4 }) as Layer.Layer<SessionStore>)
        )
      ))
  }
  console.log(`\nload average at the end ${loadAverage()}`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
