/**
 * Spawn cost (issue 11): a parent whose model spawns `--children` children in
 * one reply, each child running one tool turn (2 model calls + 1 tool call),
 * and every result delivered back to the parent. SQLite file, scripted
 * zero-latency model. Figures: wall time from the parent's message to the last
 * `child_result` recorded, CPU per child, store commits and inbox admissions
 * per child (read back from the file), peak RSS. Medians of `--rounds`.
 *
 *   node bench/run.mjs subagents [--children 100] [--rounds 5]
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ModelRef, SubagentRef } from "../src/schema/Agent.js"
import { SubagentPolicy } from "../src/schema/Policy.js"
import type * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, echo, cpuMicros, loadAverage, median } from "./support.js"

const children = Number(arg("children", "100"))
const rounds = Number(arg("rounds", "5"))

const worker = new Agent({ name: "worker", instructions: "Work.", model: new ModelRef({ name: "scripted" }), tools: [echo.spec] })
const lead = new Agent({
  name: "lead",
  instructions: "Fan out.",
  model: new ModelRef({ name: "scripted" }),
  subagents: [new SubagentRef({ name: "worker" })]
})

// The lead spawns every child in its first reply and then ends its turn; a worker calls echo, then answers.
const decide = (request: Model.Request) => {
  const last = request.messages[request.messages.length - 1]
  if (request.agentName === "lead") {
    return last?.role === "tool"
      ? "spawned"
      : {
        toolCalls: Array.from({ length: children }, (_, i) => ({
          id: `s${i}`,
          name: "agents.spawn",
          arguments: JSON.stringify({ agent: "worker", message: `task ${i}` })
        }))
      }
  }
  return last?.role === "tool" ? "done" : { toolCalls: [{ id: "e", name: "echo", arguments: "{\"text\":\"hi\"}" }] }
}

const round = (filename: string) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const store = yield* SessionStore
    const root = yield* sessions.create(principal, {
      agent: lead,
      subagentPolicy: new SubagentPolicy({ maxDepth: 1, maxChildTurns: children, maxChildren: children })
    })
    const cpu0 = cpuMicros()
    const t0 = performance.now()
    const accepted = yield* sessions.send(principal, root.id, { text: "fan out" })
    yield* sessions.awaitTurn(principal, root.id, accepted.turnId!)
    // Until every child's result is recorded in the parent's log.
    let results = 0
    let after = 0
    while (results < children) {
      const page = yield* store.readLog(root.id, { after, limit: 1000 })
      for (const r of page.records) if (r.body._tag === "child_result") results++
      after = page.cursor
      if (results < children) yield* Effect.sleep("2 millis")
    }
    return { wallMs: performance.now() - t0, cpuMicros: cpuMicros() - cpu0, rootId: root.id }
  }).pipe(
    Effect.provide(Troupe.layerSqlite({ filename }, {
      host: { idleTimeout: "200 millis" },
      agents: [worker],
      scripts: { fallback: decide },
      tools: Toolkit.layer([echo])
    }))
  )

const countWrites = (filename: string) => {
  const db = new Database(filename, { readonly: true })
  try {
    const commits = (db.prepare("SELECT count(*) AS n FROM troupe_commits").get() as { n: number }).n
    const inbox = (db.prepare("SELECT count(*) AS n FROM troupe_inbox").get() as { n: number }).n
    return { commits, inbox }
  } finally {
    db.close()
  }
}

let peakRss = 0
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss)
}, 20)

const main = Effect.gen(function*() {
  console.log(`subagents: 1 parent × ${children} children, one tool turn each, ${rounds} rounds (+1 warm-up); load ${loadAverage()}`)
  const figures: Array<{ wallMs: number; cpuPerChild: number; commitsPerChild: number; inboxPerChild: number }> = []
  for (let i = 0; i <= rounds; i++) {
    const dir = mkdtempSync(join(tmpdir(), "troupe-subagents-"))
    const filename = join(dir, "bench.db")
    const { cpuMicros: cpu, wallMs } = yield* round(filename)
    const { commits, inbox } = countWrites(filename)
    rmSync(dir, { recursive: true, force: true })
    if (i === 0) continue
    // The parent's own create commit and its turn's commits are spread over the children too.
    figures.push({ wallMs, cpuPerChild: cpu / children, commitsPerChild: commits / children, inboxPerChild: inbox / children })
    console.log(`  round ${i}: wall ${wallMs.toFixed(0)} ms, CPU ${(cpu / children / 1000).toFixed(2)} ms/child, ${(commits / children).toFixed(2)} commits and ${(inbox / children).toFixed(2)} inbox admissions per child`)
  }
  clearInterval(sampler)
  const m = (pick: (f: typeof figures[number]) => number) => median(figures.map(pick))
  console.log(`  wall (median)                ${m((f) => f.wallMs).toFixed(0)} ms for ${children} children`)
  console.log(`  CPU per child (median)       ${(m((f) => f.cpuPerChild) / 1000).toFixed(2)} ms`)
  console.log(`  commits per child            ${m((f) => f.commitsPerChild).toFixed(2)} (aim ≤ 3)`)
  console.log(`  inbox admissions per child   ${m((f) => f.inboxPerChild).toFixed(2)}`)
  console.log(`  peak RSS                     ${(peakRss / 2 ** 20).toFixed(0)} MiB`)
  console.log(`  load ${loadAverage()}`)
})

Effect.runPromise(main).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
