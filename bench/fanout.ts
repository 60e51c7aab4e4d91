/**
 * Short sessions (issue 16): M sessions, each created and run for one tool
 * turn, all at once, as the peer harness's "fanout" cell does (create inside
 * the measured region), on a SQLite file and on the memory store. A turn: a
 * user message, the model asks for the server tool `echo`, the tool answers,
 * the model answers (2 model calls + 1 tool call).
 *
 * Besides wall time and CPU per session it counts, through a wrapper of the
 * store port, the store's write calls per session (create, push, acquire,
 * append, release, ...) and the write transactions they cost, and reads back
 * from the file the commits per session (`troupe_commits` rows). Rounds run
 * in fresh processes' worth of state (a fresh store each), after a warm-up.
 *
 * `--group off` turns the SQLite store's group commit off (it is on by
 * default); with it on, the sizes of its batches are reported.
 *
 *   node bench/run.mjs fanout [--sessions 500] [--rounds 5] [--warmup 200] [--only sqlite|memory] [--group on|off]
 */
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type { SessionStore } from "../src/services/SessionStore.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import {
  arg,
  benchPrincipal as principal,
  countingStore,
  cpuMicros,
  echo,
  loadAverage,
  percentile,
  type StoreCounts,
  storeWrites,
  upperMedian
} from "./support.js"

const sessionCount = Number(arg("sessions", "500"))
const rounds = Number(arg("rounds", "5"))
const warmup = Number(arg("warmup", "200"))
const only = arg("only", "all")
// `--group off` runs the SQLite store without group commit (on by default; an A/B in one checkout).
const group = arg("group", "on") === "on"
/** Sizes of the group-commit batches of the current round (SQLite). */
let batches: Array<number> = []

const askForTool: ScriptedReply = { toolCalls: [{ id: "call_1", name: "echo", arguments: "{\"text\":\"hi\"}" }] }
const answer = "The tool said hi."
const agent = new Agent({ name: "short", instructions: "benchmark", model: new ModelRef({ name: "scripted" }), tools: [echo.spec] })


const runtime = <E>(store: Layer.Layer<SessionStore, E>, counts: StoreCounts) =>
  Troupe.layer(countingStore(store, counts), {
    host: { idleTimeout: "200 millis", inboxPoll: "250 millis" },
    scripts: { agents: { short: [askForTool, answer] } },
    tools: Toolkit.layer([echo])
  })

const checkToolTurn = (usage: { readonly modelCalls: number; readonly toolCalls: number }, output: string) =>
  usage.modelCalls === 2 && usage.toolCalls === 1 && output === answer
    ? Effect.void
    : Effect.dieMessage(`not a tool turn: ${usage.modelCalls} model calls, ${usage.toolCalls} tool calls, output ${output}`)

interface Round {
  readonly wallMs: number
  readonly cpuMsPerSession: number
  readonly counts: StoreCounts
  /** Sizes of the group-commit batches (transactions that waited for company). */
  readonly batches: ReadonlyArray<number>
  readonly load: string
}

const fanout = (count: number) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const c0 = cpuMicros()
    const t0 = performance.now()
    yield* Effect.forEach(Array.from({ length: count }), () =>
      Effect.gen(function*() {
        const session = yield* sessions.create(principal, { agent })
        const accepted = yield* sessions.send(principal, session.id, { text: "hello" })
        const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
        yield* checkToolTurn(result.usage, result.output)
      }), { concurrency: "unbounded", discard: true })
    return { wallMs: performance.now() - t0, cpuMsPerSession: (cpuMicros() - c0) / count / 1000 }
  })

const round = (kind: "sqlite" | "memory", filename: string, count: number) =>
  Effect.gen(function*() {
    const counts: StoreCounts = {}
    batches = []
    const groupCommit = group ? { onBatch: (size: number) => void batches.push(size) } : false
    const store = kind === "sqlite" ? SqliteSessionStore.layer({ filename, groupCommit }) : MemorySessionStore.layer
    const measured = yield* fanout(count).pipe(
      // Let the actors passivate (idle 200 ms), so the counts include the lease releases.
      Effect.tap(() => Effect.sleep("600 millis")),
      Effect.provide(runtime(store, counts))
    )
    return { ...measured, counts, batches, load: loadAverage() } satisfies Round
  })

const commitsPerSession = (filename: string) => {
  const db = new Database(filename, { readonly: true })
  try {
    const row = db.prepare(
      "SELECT (SELECT count(*) FROM troupe_commits) AS commits, (SELECT count(*) FROM troupe_sessions) AS sessions, (SELECT count(*) FROM troupe_log) AS records"
    ).get() as { commits: number; sessions: number; records: number }
    return row
  } finally {
    db.close()
  }
}

const fixed = (x: number, digits = 2) => x.toFixed(digits)

const report = (kind: string, results: ReadonlyArray<Round>, count: number) => {
  console.log(`\n${kind}: ${count} sessions × (create + 1 tool turn), all at once, medians of ${results.length} rounds`)
  console.log(`  CPU ms per session   ${fixed(upperMedian(results.map((r) => r.cpuMsPerSession)), 3)} (rounds: ${results.map((r) => fixed(r.cpuMsPerSession, 3)).join(" ")})`)
  console.log(`  wall s               ${fixed(upperMedian(results.map((r) => r.wallMs)) / 1000, 3)} (rounds: ${results.map((r) => fixed(r.wallMs / 1000, 3)).join(" ")})`)
  const counts = results[results.length - 1]!.counts
  const perSession = (n: number | undefined) => fixed((n ?? 0) / count, 2)
  const written = Object.entries(counts).filter(([name]) => storeWrites.has(name))
  console.log(`  store writes per session ${perSession(written.reduce((a, [, n]) => a + n, 0))}: ${written.map(([name, n]) => `${name} ${perSession(n)}`).join(", ")}`)
  const read = Object.entries(counts).filter(([name]) => !storeWrites.has(name))
  console.log(`  store reads per session  ${read.map(([name, n]) => `${name} ${perSession(n)}`).join(", ")}`)
  const last = results[results.length - 1]!
  if (last.batches.length > 0) {
    const sorted = [...last.batches].sort((a, b) => a - b)
    const grouped = sorted.reduce((a, b) => a + b, 0)
    const writeCount = written.reduce((a, [, n]) => a + n, 0)
    console.log(
      `  group commit (last round): ${sorted.length} batches of ${grouped} transactions (${fixed((grouped / writeCount) * 100, 0)}% of the writes); ` +
        `batch size median ${percentile(sorted, 0.5)}, p90 ${percentile(sorted, 0.9)}, max ${sorted[sorted.length - 1]}`
    )
  }
  console.log(`  load average at the end  ${last.load}`)
}

const main = async () => {
  console.log(`node ${process.version}, load average ${loadAverage()}`)
  const dir = mkdtempSync(join(tmpdir(), "troupe-fanout-"))
  try {
    const kinds = only === "all" ? (["sqlite", "memory"] as const) : ([only] as ReadonlyArray<"sqlite" | "memory">)
    for (const kind of kinds) {
      if (warmup > 0) await Effect.runPromise(round(kind, join(dir, `${kind}-warmup.db`), warmup))
      const results: Array<Round> = []
      for (let r = 0; r < rounds; r++) {
        const filename = join(dir, `${kind}-${r}.db`)
        results.push(await Effect.runPromise(round(kind, filename, sessionCount)))
        if (kind === "sqlite" && r === 0) {
          const stored = commitsPerSession(filename)
          console.log(
            `  ${kind} round 1: ${fixed(stored.commits / stored.sessions)} commits and ${fixed(stored.records / stored.sessions)} log records per session in the file`
          )
        }
      }
      report(kind, results, sessionCount)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
