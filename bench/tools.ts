/**
 * Tool-turn figures (issue 4) on a SQLite file with the scripted zero-latency
 * model. A turn: a user message, the model asks for one call of the server
 * tool `echo`, the tool returns a short string, the model answers; 2 model
 * calls + 1 tool call, 8 log records in 4 commits.
 *
 * - one session × N sequential turns (send, then await the turn), several
 *   rounds on fresh files: turns/s, CPU per turn, p50/p99 latency, CPU of the
 *   last 10% of turns against the first 10% (is per-turn cost flat as history
 *   grows?), and the bytes stored per turn, read back from the file with
 *   better-sqlite3 once the runtime closed it (log bodies, operation receipts,
 *   inbox commands), first 10% of turns against the last 10%;
 * - M sessions × 1 turn, all at once: wall time, throughput, peak RSS, and the
 *   heap left once the M actors passivated.
 *
 * A warm-up session (`--warmup` turns, on its own file) runs first, so the
 * first rounds' first turns do not measure the JIT instead of the runtime.
 *
 * `--group off` runs the SQLite store without group commit (on by default).
 *
 * `--heap-at K` (many only) collects garbage once K turns of the burst ended
 * and reports the heap per caller still waiting, beside the same figure for
 * as many bare Effect callers (the burst's `forEach` shape, each waiting on a
 * `Deferred`): the part of the burst's memory that is the callers' own. The
 * collection moves the burst's peak, so read its RSS from a run without it.
 *
 * `--store memory` runs the sequential turns on the memory store instead (no bytes stored are
 * reported then): what a warm turn costs without SQL.
 *
 *   node bench/run.mjs tools [--turns 1000] [--rounds 5] [--warmup 200] [--sessions 10000] [--only seq|many] [--group on|off] [--heap-at K] [--store sqlite|memory]
 */
import Database from "better-sqlite3"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type * as Model from "../src/services/Model.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, echo, cpuMicros, loadAverage, percentile, upperMedian } from "./support.js"

const turns = Number(arg("turns", "1000"))
const rounds = Number(arg("rounds", "5"))
const warmup = Number(arg("warmup", "200"))
const sessionCount = Number(arg("sessions", "10000"))
const only = arg("only", "all")
const groupCommit = arg("group", "on") === "on"
const memoryStore = arg("store", "sqlite") === "memory"
const heapAt = Number(arg("heap-at", "0"))

// `node --expose-gc` is not needed: the flag can be set at run time.
const gc: () => void = (globalThis as { gc?: () => void }).gc ??
  (setFlagsFromString("--expose-gc"), runInNewContext("gc") as () => void)



const askForTool = (id: string): ScriptedReply => ({ toolCalls: [{ id, name: "echo", arguments: "{\"text\":\"hi\"}" }] })
const answer = "The tool said hi."

// Scripts advance per session and agent and their last reply repeats, so the
// long session decides from the request: after a tool result answer, else call the tool.
const decide = (request: Model.Request): ScriptedReply =>
  request.messages[request.messages.length - 1]?.role === "tool" ? answer : askForTool(`call_${request.turnId}`)

/** Runs through `fallback` (one session, many turns). */
const longAgent = new Agent({
  name: "long",
  instructions: "benchmark",
  model: new ModelRef({ name: "scripted" }),
  tools: [echo.spec]
})
/** Runs through an agent script (many sessions, one turn each). */
const shortAgent = new Agent({
  name: "short",
  instructions: "benchmark",
  model: new ModelRef({ name: "scripted" }),
  tools: [echo.spec]
})

const runtimeOptions = {
  host: { idleTimeout: "200 millis" },
  scripts: { agents: { short: [askForTool("call_1"), answer] }, fallback: decide },
  tools: Toolkit.layer([echo])
} as const

/** The SQLite runtime on `filename`; the memory store with `--store memory` (seq only: what the turn costs without SQL). */
const runtime = (filename: string) =>
  (memoryStore
    ? Troupe.layer(MemorySessionStore.layer, runtimeOptions)
    : Troupe.layerSqlite({ filename, groupCommit }, runtimeOptions)) as Layer.Layer<Troupe.Services>

const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
const fixed = (x: number, digits = 0) => x.toFixed(digits)

/**
 * The kernel's high-water mark of this process's RSS (`VmHWM`), reset by `resetPeakRss`: a timer
 * sampling `rss` misses the peak of a burst, during which Effect's scheduler runs no timer
 * (decision 0023). Undefined where /proc cannot tell (not Linux).
 */
const kernelPeakRss = (): number | undefined => {
  try {
    const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith("VmHWM:"))
    return line === undefined ? undefined : Number(line.split(/\s+/)[1]) * 1024
  } catch {
    return undefined
  }
}
const resetPeakRss = () => {
  try {
    writeFileSync("/proc/self/clear_refs", "5")
  } catch {
    // Not Linux, or not allowed: the timer's samples stand alone.
  }
}

let peakRss = 0
const sampleRss = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss)
}, 20)

/** Fails the bench when a turn was not the tool turn it is meant to measure. */
const checkToolTurn = (usage: { readonly modelCalls: number; readonly toolCalls: number }, output: string) =>
  usage.modelCalls === 2 && usage.toolCalls === 1 && output === answer
    ? Effect.void
    : Effect.dieMessage(`not a tool turn: ${usage.modelCalls} model calls, ${usage.toolCalls} tool calls, output ${output}`)

/** Bytes stored for each turn of a session, read from the closed file. */
interface StoredTurn {
  readonly records: number
  /** Lengths of the log record bodies. */
  readonly log: number
  /** Lengths of the operations' stored input and output. */
  readonly operations: number
  /** Length of the inbox command that started the turn. */
  readonly inbox: number
}

const storedPerTurn = (filename: string, sessionId: string): ReadonlyArray<StoredTurn> => {
  const db = new Database(filename, { readonly: true })
  try {
    // Byte lengths whatever the column holds (JSON text or a binary encoding).
    const log = db.prepare(
      `SELECT length(CAST(body AS BLOB)) AS bytes,
        instr(CAST(body AS BLOB), CAST('turn_started' AS BLOB)) > 0 AS starts
      FROM troupe_log WHERE session_id = ? ORDER BY seq`
    ).all(sessionId) as Array<{ bytes: number; starts: number }>
    const operations = db.prepare(
      `SELECT coalesce(sum(length(CAST(input AS BLOB))), 0) + coalesce(sum(length(CAST(output AS BLOB))), 0) AS bytes
      FROM troupe_operations WHERE session_id = ? GROUP BY turn_id ORDER BY min(started_seq)`
    ).all(sessionId) as Array<{ bytes: number }>
    const inbox = db.prepare(
      `SELECT length(CAST(command AS BLOB)) AS bytes FROM troupe_inbox WHERE session_id = ? ORDER BY position`
    ).all(sessionId) as Array<{ bytes: number }>
    const out: Array<{ records: number; log: number; operations: number; inbox: number }> = []
    for (const row of log) {
      if (row.starts) out.push({ records: 0, log: 0, operations: 0, inbox: 0 })
      const turn = out[out.length - 1]
      if (turn === undefined) continue // session_created
      turn.records++
      turn.log += row.bytes
    }
    out.forEach((turn, i) => {
      turn.operations = operations[i]?.bytes ?? 0
      turn.inbox = inbox[i]?.bytes ?? 0
    })
    return out
  } finally {
    db.close()
  }
}

interface SequentialRound {
  readonly turnsPerSecond: number
  readonly cpuMicrosPerTurn: number
  readonly p50: number
  readonly p99: number
  readonly firstCpu: number
  readonly lastCpu: number
  /** Median CPU µs per turn in each tenth of the turns. */
  readonly deciles: ReadonlyArray<number>
  readonly stored: ReadonlyArray<StoredTurn>
  readonly fileBytes: number
  readonly load: string
}

const sequentialRound = (filename: string, count: number) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const session = yield* sessions.create(principal, { agent: longAgent })
    const latencies: Array<number> = []
    const cpu: Array<number> = []
    const c0 = cpuMicros()
    const t0 = performance.now()
    for (let i = 0; i < count; i++) {
      const c = cpuMicros()
      const t = performance.now()
      const accepted = yield* sessions.send(principal, session.id, { text: `message ${i}` })
      const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
      latencies.push(performance.now() - t)
      cpu.push(cpuMicros() - c)
      yield* checkToolTurn(result.usage, result.output)
    }
    const wall = performance.now() - t0
    const totalCpu = cpuMicros() - c0
    const sorted = [...latencies].sort((a, b) => a - b)
    const tenth = Math.max(1, Math.floor(count / 10))
    const deciles = Array.from({ length: 10 }, (_, d) => upperMedian(cpu.slice(d * tenth, (d + 1) * tenth)))
    return {
      sessionId: session.id as string,
      turnsPerSecond: (count / wall) * 1000,
      cpuMicrosPerTurn: totalCpu / count,
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      firstCpu: upperMedian(cpu.slice(0, tenth)),
      lastCpu: upperMedian(cpu.slice(-tenth)),
      deciles
    }
  }).pipe(
    Effect.provide(runtime(filename)),
    // The runtime has closed the file: read what it stored.
    Effect.map((r): SequentialRound => ({
      ...r,
      stored: memoryStore ? [] : storedPerTurn(filename, r.sessionId),
      fileBytes: memoryStore ? 0 : statSync(filename).size,
      load: loadAverage()
    }))
  )

const sequential = (dir: string) =>
  Effect.gen(function*() {
    if (warmup > 0) yield* sequentialRound(join(dir, "warmup.db"), warmup)
    console.log(
      `\none session × ${turns} sequential tool turns (${memoryStore ? "memory store" : "SQLite file"}), ${rounds} rounds on fresh stores after ${warmup} warm-up turns`
    )
    const results: Array<SequentialRound> = []
    for (let r = 0; r < rounds; r++) {
      const result = yield* sequentialRound(join(dir, `seq-${r}.db`), turns)
      results.push(result)
      console.log(
        `  round ${r + 1}: ${fixed(result.turnsPerSecond)} turns/s, CPU ${fixed(result.cpuMicrosPerTurn)} µs/turn, ` +
          `p50/p99 ${fixed(result.p50, 2)}/${fixed(result.p99, 2)} ms, CPU first/last 10% ${fixed(result.firstCpu)}/${
            fixed(result.lastCpu)
          } µs (${fixed(result.lastCpu / result.firstCpu, 2)}), load ${result.load}`
      )
    }
    const tenth = Math.max(1, Math.floor(turns / 10))
    const bytes = (pick: (t: StoredTurn) => number) => {
      const perRound = results.map((r) => ({
        first: mean(r.stored.slice(0, tenth).map(pick)),
        last: mean(r.stored.slice(-tenth).map(pick)),
        min: Math.min(...r.stored.map(pick)),
        max: Math.max(...r.stored.map(pick))
      }))
      return {
        first: upperMedian(perRound.map((x) => x.first)),
        last: upperMedian(perRound.map((x) => x.last)),
        min: Math.min(...perRound.map((x) => x.min)),
        max: Math.max(...perRound.map((x) => x.max))
      }
    }
    const line = (name: string, b: ReturnType<typeof bytes>) =>
      console.log(
        `  ${name.padEnd(28)} first 10% ${fixed(b.first, 1)}, last 10% ${fixed(b.last, 1)}, ratio ${
          fixed(b.last / b.first, 3)
        } (min ${b.min}, max ${b.max})`
      )
    const storedTurns = results[0]!.stored.length
    const cpuMs = upperMedian(results.map((r) => r.cpuMicrosPerTurn)) / 1000
    console.log(`\n  medians of ${rounds} rounds`)
    console.log(`  turns/s                      ${fixed(upperMedian(results.map((r) => r.turnsPerSecond)))}`)
    console.log(`  CPU ms per turn (mean)       ${fixed(cpuMs, 3)} (aim ≤ 1 ms: ${fixed(cpuMs, 2)}× the aim)`)
    console.log(
      `  latency p50 / p99 ms         ${fixed(upperMedian(results.map((r) => r.p50)), 3)} / ${
        fixed(upperMedian(results.map((r) => r.p99)), 3)
      }`
    )
    console.log(
      `  CPU µs/turn first 10% ${fixed(upperMedian(results.map((r) => r.firstCpu)))}, last 10% ${
        fixed(upperMedian(results.map((r) => r.lastCpu)))
      }, ratio ${fixed(upperMedian(results.map((r) => r.lastCpu / r.firstCpu)), 2)} (aim ≤ 1.5)`
    )
    console.log(
      `  CPU µs/turn by tenth of the turns: ${
        Array.from({ length: 10 }, (_, d) => fixed(upperMedian(results.map((r) => r.deciles[d]!)))).join(" ")
      }`
    )
    if (memoryStore) return
    console.log(`  bytes stored per turn (${storedTurns} turns, ${results[0]!.stored[0]?.records} log records each)`)
    line("log record bodies", bytes((t) => t.log))
    line("operation input + output", bytes((t) => t.operations))
    line("inbox command", bytes((t) => t.inbox))
    line("all of the above", bytes((t) => t.log + t.operations + t.inbox))
    const file = upperMedian(results.map((r) => r.fileBytes))
    console.log(`  database file after closing  ${fixed(file / 1024 / 1024, 2)} MiB (${fixed(file / turns)} bytes per turn)`)
  })

/** Heap per caller of `count` bare callers, shaped as the burst's, all waiting on one `Deferred`. */
const bareCallers = (count: number) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<void>()
    let waiting = 0
    gc()
    const before = process.memoryUsage().heapUsed
    const callers = yield* Effect.fork(Effect.forEach(Array.from({ length: count }), () =>
      Effect.gen(function*() {
        waiting++
        yield* Effect.gen(function*() {
          yield* Deferred.await(gate)
        })
      }), { concurrency: "unbounded", discard: true }))
    while (waiting < count) yield* Effect.sleep("10 millis")
    gc()
    const perCaller = (process.memoryUsage().heapUsed - before) / count
    yield* Deferred.succeed(gate, undefined)
    yield* Fiber.join(callers)
    return perCaller
  })

const concurrent = (filename: string) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const host = yield* SessionHost
    const created = yield* Effect.forEach(
      Array.from({ length: sessionCount }),
      () => sessions.create(principal, { agent: shortAgent }),
      { concurrency: 64 }
    )
    gc()
    const heapBefore = process.memoryUsage().heapUsed
    peakRss = process.memoryUsage().rss
    resetPeakRss()
    let ended = 0
    let perWaiting: number | undefined
    const t0 = performance.now()
    const c0 = cpuMicros()
    yield* Effect.forEach(created, (session) =>
      Effect.gen(function*() {
        const accepted = yield* sessions.send(principal, session.id, { text: "hello" })
        const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
        yield* checkToolTurn(result.usage, result.output)
        if (++ended === heapAt) {
          gc()
          perWaiting = (process.memoryUsage().heapUsed - heapBefore) / (sessionCount - ended)
        }
      }), { concurrency: "unbounded", discard: true })
    const wall = performance.now() - t0
    const cpu = cpuMicros() - c0
    const kernelPeak = kernelPeakRss()
    console.log(`\n${sessionCount} sessions × 1 tool turn, all at once (SQLite file)`)
    console.log(`  wall s                      ${fixed(wall / 1000, 2)}`)
    console.log(`  turns/s                     ${fixed((sessionCount / wall) * 1000)}`)
    console.log(`  CPU ms per turn             ${fixed(cpu / sessionCount / 1000, 3)}`)
    console.log(`  peak RSS MB                 ${fixed(Math.max(peakRss, kernelPeak ?? 0) / 1024 / 1024)}${
      kernelPeak === undefined ? " (sampled every 20 ms)" : ` (the kernel's high-water mark; a 20 ms timer saw ${fixed(peakRss / 1024 / 1024)})`
    }`)
    if (perWaiting !== undefined) {
      const floor = yield* bareCallers(sessionCount - heapAt)
      console.log(`  heap per waiting caller     ${fixed(perWaiting)} bytes after ${heapAt} turns (bare Effect callers: ${fixed(floor)})`)
    }
    console.log(`  live actors after the turns ${(yield* host.running).length}`)
    // The bench host passivates after 200 ms idle.
    yield* Effect.sleep("1500 millis")
    gc()
    console.log(`  live actors after idling    ${(yield* host.running).length}`)
    console.log(`  heap retained after passivation MB ${fixed((process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024, 1)}`)
    console.log(`  load average at the end     ${loadAverage()}`)
    return created[0]!.id as string
  }).pipe(
    Effect.provide(runtime(filename)),
    Effect.map((sessionId) => {
      const stored = storedPerTurn(filename, sessionId)[0]!
      const size = statSync(filename).size
      console.log(
        `  bytes stored for one turn   log ${stored.log}, operations ${stored.operations}, inbox ${stored.inbox} (${stored.records} records)`
      )
      console.log(`  database file after closing ${fixed(size / 1024 / 1024, 1)} MiB (${fixed(size / sessionCount)} bytes per session)`)
    })
  )

const main = async () => {
  console.log(`node ${process.version}, load average ${loadAverage()}`)
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-"))
  try {
    if (only === "all" || only === "seq") await Effect.runPromise(sequential(dir))
    if (only === "all" || only === "many") await Effect.runPromise(concurrent(join(dir, "many.db")))
  } finally {
    clearInterval(sampleRss)
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
