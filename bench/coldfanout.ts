/**
 * The fan-out run cold, as the peers' cell runs it (issue 33): each round a fresh process builds
 * the runtime, warms up one session for 20 tool turns, then creates 500 sessions at once and runs
 * one tool turn in each (create, send, await through `ManagedRuntime.runPromise`, as the cell does).
 * Nothing but that one session warms the code, so session creation and an actor's start run cold.
 *
 * It reports the process's CPU per session split by thread: the main thread, and V8's other threads
 * (the optimising compiler and the GC's helpers), read from /proc/self/task at both ends of the
 * measured window. In this cell most of the CPU is on the other threads: the optimising compiler
 * compiling the functions that turn hot during the window (history, "Issue 33, a sixth pass").
 *
 * `--profile FILE` runs one more process that records a CPU profile of the window's main thread
 * (node:inspector's profiler, started at the mark and stopped when the 500 sessions are done) and
 * writes it to FILE, for DevTools or any `.cpuprofile` reader. `--heap FILE` likewise records what
 * the window allocates (V8's sampling heap profiler, every 1 KiB, the objects the GC has collected
 * since kept in) as a `.heapprofile`.
 *
 * `--jobs N` runs one more process under `--trace-opt --perf-basic-prof` and lists the optimising
 * compiler's jobs of the window, the N longest, each with the function it compiled (the `src/` file
 * whose code it is in the bundle, with the bundle's line) and the size of the code it made. A job's
 * time is its wall time on a compiler thread, inflated by tracing and by load; the sizes are stable.
 *
 *   node bench/run.mjs coldfanout [--sessions 500] [--rounds 5] [--only memory|sqlite] [--jobs 25] [--profile FILE] [--heap FILE]
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { Session as Inspector } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, ManagedRuntime } from "effect"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import type * as Model from "../src/services/Model.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type { SessionId } from "../src/schema/Ids.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, echo, loadAverage, threadCpu, upperMedian } from "./support.js"

const sessionCount = Number(arg("sessions", "500"))
const rounds = Number(arg("rounds", "5"))
const only = arg("only", "memory,sqlite").split(",")
const jobs = Number(arg("jobs", "0"))
const recordings = { cpu: arg("profile", ""), heap: arg("heap", "") }
const warmTurns = 20
const mark = "--- measured window ---"

const answer = "The tool said hi."
const decide = (request: Model.Request): ScriptedReply =>
  request.messages[request.messages.length - 1]?.role === "tool"
    ? answer
    : { toolCalls: [{ id: `call_${request.turnId}`, name: "echo", arguments: "{\"text\":\"hi\"}" }] }
const agent = new Agent({ name: "cold", instructions: "benchmark", model: new ModelRef({ name: "scripted" }), tools: [echo.spec] })

interface Round {
  readonly mainMs: number
  readonly otherMs: number
  readonly wallMs: number
}

/** Starts the window's CPU or allocation profile, if asked for; the function it returns stops it and returns the profile. */
const startRecording = async (kind: string | undefined): Promise<(() => Promise<unknown>) | undefined> => {
  if (kind === undefined) return undefined
  const inspector = new Inspector()
  inspector.connect()
  if (kind === "cpu") {
    await inspector.post("Profiler.enable")
    await inspector.post("Profiler.setSamplingInterval", { interval: 200 })
    await inspector.post("Profiler.start")
    return async () => (await inspector.post("Profiler.stop")).profile
  }
  await inspector.post("HeapProfiler.enable")
  await inspector.post("HeapProfiler.startSampling", {
    samplingInterval: 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  })
  return async () => (await inspector.post("HeapProfiler.stopSampling")).profile
}

/** One cold round in this process: the runtime, a warm-up session, then the measured fan-out. */
const child = async (kind: string, filename: string): Promise<Round> => {
  const options = { scripts: { fallback: decide }, tools: Toolkit.layer([echo]) }
  const layer = kind === "sqlite" ? Troupe.layerSqlite({ filename }, options) : Troupe.layer(MemorySessionStore.layer, options)
  const runtime = ManagedRuntime.make(layer)
  await runtime.runtime()
  const create = Effect.flatMap(Sessions, (sessions) => sessions.create(principal, { agent }))
  const turn = (sessionId: SessionId, text: string) =>
    Effect.flatMap(Sessions, (sessions) =>
      Effect.flatMap(sessions.send(principal, sessionId, { text }), (accepted) =>
        Effect.flatMap(
          sessions.awaitTurn(principal, sessionId, accepted.turnId!, { after: accepted.cursor! - 1 }),
          (result) => result.output === answer ? Effect.void : Effect.dieMessage(`not a tool turn: ${result.output}`)
        )))
  const warm = await runtime.runPromise(create)
  for (let k = 0; k < warmTurns; k++) await runtime.runPromise(turn(warm.id, `warm-up ${k}`))
  ;(globalThis as { gc?: () => void }).gc?.()
  console.log(mark)
  const recorder = await startRecording(process.env.COLD_RECORD)
  const before = threadCpu()
  const t0 = performance.now()
  await Promise.all(Array.from({ length: sessionCount }, async (_, i) => {
    const session = await runtime.runPromise(create)
    await runtime.runPromise(turn(session.id, `session ${i}`))
  }))
  const wallMs = performance.now() - t0
  const after = threadCpu()
  if (recorder !== undefined) writeFileSync(process.env.COLD_RECORD_FILE!, JSON.stringify(await recorder()))
  await runtime.dispose()
  let mainMs = 0
  let otherMs = 0
  for (const [tid, ms] of after) {
    const spent = ms - (before.get(tid) ?? 0)
    if (tid === String(process.pid)) mainMs += spent
    else otherMs += spent
  }
  return { mainMs, otherMs, wallMs }
}

const self = fileURLToPath(import.meta.url)

const spawnChild = (kind: string, dir: string, flags: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const run = spawnSync(process.execPath, ["--expose-gc", ...flags, self, ...process.argv.slice(2)], {
    env: { ...process.env, ...env, COLD_CHILD: kind, COLD_DB: join(dir, `${kind}-${Date.now()}.db`) },
    // `--perf-basic-prof` writes V8's log (isolate-*.log) to the working directory: the bench's own.
    cwd: dir,
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024
  })
  if (run.status !== 0) throw new Error(`cold round failed (${kind}): ${run.stderr.slice(-2000)}`)
  return run
}

const lastLine = (text: string) => text.trimEnd().split("\n").at(-1)!

/** The `src/` file of a line of the bundle: the nearest `// src/…` comment above it. */
const sourceOf = (bundle: ReadonlyArray<string>, line: number) => {
  for (let i = line - 1; i >= 0; i--) if (bundle[i]!.startsWith("// src/")) return bundle[i]!.slice(3)
  return "bench"
}

/** The compiler's jobs of the window, zipped with the optimized code the perf map lists in the same order. */
const listJobs = (kind: string, dir: string) => {
  const run = spawnChild(kind, dir, ["--trace-opt", "--trace-file-names", "--perf-basic-prof"])
  const lines = run.stdout.split("\n")
  const at = lines.indexOf(mark)
  const done = (line: string) => line.startsWith("[completed optimizing")
  const before = lines.slice(0, at).filter(done).length
  const times = lines.slice(at).filter((line) => line.startsWith("[completed compiling")).map((line) => {
    const took = /took ([\d.]+), ([\d.]+), ([\d.]+) ms/.exec(line)
    return took === null ? 0 : Number(took[1]) + Number(took[2]) + Number(took[3])
  })
  const map = `/tmp/perf-${run.pid}.map`
  if (!existsSync(map)) throw new Error(`no perf map at ${map}`)
  const code = readFileSync(map, "utf8").split("\n").filter((line) => line.includes(" JS:*")).slice(before)
  rmSync(map)
  const bundle = readFileSync(self, "utf8").split("\n")
  const rows = times.map((ms, i) => {
    const [, size, ...name] = (code[i] ?? "0 0 ?").split(" ")
    const where = name.join(" ").replace(/^JS:\*/, "")
    const inBundle = /coldfanout\.mjs:(\d+):\d+$/.exec(where)
    const label = inBundle === null
      ? where.replace(/^.*node_modules\//, "")
      : `${where.split(" ")[0] || "(anonymous)"} ${sourceOf(bundle, Number(inBundle[1]))} (bundle line ${inBundle[1]})`
    return { ms, bytes: parseInt(size!, 16), label, troupe: inBundle !== null }
  })
  const total = rows.reduce((sum, row) => sum + row.ms, 0)
  const ours = rows.filter((row) => row.troupe).reduce((sum, row) => sum + row.ms, 0)
  console.log(`\n${kind}: the optimising compiler in the window: ${rows.length} jobs, ${total.toFixed(0)} ms, troupe's code ${ours.toFixed(0)} ms (${(100 * ours / total).toFixed(0)} %); zipped ${code.length} code objects with ${times.length} jobs`)
  for (const row of [...rows].sort((a, b) => b.ms - a.ms).slice(0, jobs)) {
    console.log(`  ${row.ms.toFixed(1).padStart(7)} ms ${String(row.bytes).padStart(7)} B  ${row.label}`)
  }
}

const main = () => {
  console.log(`node ${process.version}, load average ${loadAverage()}`)
  const dir = mkdtempSync(join(tmpdir(), "troupe-coldfanout-"))
  try {
    for (const kind of only) {
      const results: Array<Round> = []
      for (let r = 0; r < rounds; r++) results.push(JSON.parse(lastLine(spawnChild(kind, dir, []).stdout)) as Round)
      const per = (ms: number) => (ms / sessionCount).toFixed(2)
      const med = (f: (r: Round) => number) => per(upperMedian(results.map(f)))
      console.log(`\n${kind}: ${sessionCount} sessions × (create + 1 tool turn), cold (a fresh process per round, one session warmed), medians of ${rounds}`)
      console.log(`  CPU ms per session   ${med((r) => r.mainMs + r.otherMs)} (rounds: ${results.map((r) => per(r.mainMs + r.otherMs)).join(" ")})`)
      console.log(`    main thread        ${med((r) => r.mainMs)} (rounds: ${results.map((r) => per(r.mainMs)).join(" ")})`)
      console.log(`    V8's other threads ${med((r) => r.otherMs)} (rounds: ${results.map((r) => per(r.otherMs)).join(" ")})`)
      console.log(`  wall s               ${(upperMedian(results.map((r) => r.wallMs)) / 1000).toFixed(3)}`)
      if (jobs > 0) listJobs(kind, dir)
      for (const [record, to] of Object.entries(recordings)) {
        if (to === "") continue
        const file = only.length === 1 ? to : to.replace(/(\.\w+)?$/, `-${kind}$1`)
        spawnChild(kind, dir, [], { COLD_RECORD: record, COLD_RECORD_FILE: resolve(file) })
        console.log(`  ${record === "cpu" ? "a CPU profile of the window's main thread" : "what the window allocated"}: ${file}`)
      }
    }
    console.log(`\nload average at the end ${loadAverage()}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.env.COLD_CHILD !== undefined) {
  child(process.env.COLD_CHILD, process.env.COLD_DB!).then(
    (round) => console.log(JSON.stringify(round)),
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
} else {
  main()
}
