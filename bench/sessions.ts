/**
 * Session-actor figures on a SQLite file with the scripted zero-latency model:
 *
 * - one session × N sequential turns (send, then await the turn): turns/s, CPU
 *   per turn, p50/p99 latency, and the cost of the first 10% of turns against
 *   the last 10% (is per-turn cost flat as history grows?);
 * - M sessions × 1 turn, all at once: wall time, throughput, peak RSS;
 * - after the M actors passivate: how much heap they leave behind.
 *
 *   node bench/run.mjs sessions [--turns 1000] [--sessions 10000]
 */
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, cpuMicros, loadAverage, percentile, upperMedian } from "./support.js"

const turns = Number(arg("turns", "1000"))
const sessionCount = Number(arg("sessions", "10000"))

const agent = new Agent({ name: "bench", instructions: "benchmark", model: new ModelRef({ name: "scripted" }) })

let peakRss = 0
const sampleRss = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss)
}, 20)

const sequential = Effect.gen(function*() {
  const sessions = yield* Sessions
  const session = yield* sessions.create(principal, { agent })
  const latencies: Array<number> = []
  const cpu: Array<number> = []
  const c0 = cpuMicros()
  const t0 = performance.now()
  for (let i = 0; i < turns; i++) {
    const c = cpuMicros()
    const t = performance.now()
    const accepted = yield* sessions.send(principal, session.id, { text: `message ${i}` })
    yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
    latencies.push(performance.now() - t)
    cpu.push(cpuMicros() - c)
  }
  const wall = performance.now() - t0
  const totalCpu = cpuMicros() - c0
  const sorted = [...latencies].sort((a, b) => a - b)
  const tenth = Math.max(1, Math.floor(turns / 10))
  const first = upperMedian(cpu.slice(0, tenth))
  const last = upperMedian(cpu.slice(-tenth))
  console.log(`\none session × ${turns} sequential turns (SQLite file)`)
  console.log(`  turns/s                     ${((turns / wall) * 1000).toFixed(0)}`)
  console.log(`  CPU ms per turn (mean)      ${(totalCpu / turns / 1000).toFixed(3)}`)
  console.log(`  latency p50 / p99 ms        ${percentile(sorted, 0.5).toFixed(3)} / ${percentile(sorted, 0.99).toFixed(3)}`)
  console.log(`  CPU µs/turn first 10% (median) ${first.toFixed(0)}, last 10% ${last.toFixed(0)}, ratio ${(last / first).toFixed(2)}`)
})

const concurrent = Effect.gen(function*() {
  const sessions = yield* Sessions
  const host = yield* SessionHost
  const created = yield* Effect.forEach(Array.from({ length: sessionCount }), () => sessions.create(principal, { agent }), {
    concurrency: 64
  })
  global.gc?.()
  const heapBefore = process.memoryUsage().heapUsed
  peakRss = process.memoryUsage().rss
  const t0 = performance.now()
  const c0 = cpuMicros()
  yield* Effect.forEach(created, (session) =>
    Effect.gen(function*() {
      const accepted = yield* sessions.send(principal, session.id, { text: "hello" })
      yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
    }), { concurrency: "unbounded", discard: true })
  const wall = performance.now() - t0
  const cpu = cpuMicros() - c0
  console.log(`\n${sessionCount} sessions × 1 turn, all at once (SQLite file)`)
  console.log(`  wall s                      ${(wall / 1000).toFixed(2)}`)
  console.log(`  turns/s                     ${((sessionCount / wall) * 1000).toFixed(0)}`)
  console.log(`  CPU ms per turn             ${(cpu / sessionCount / 1000).toFixed(3)}`)
  console.log(`  peak RSS MB                 ${(peakRss / 1024 / 1024).toFixed(0)}`)
  console.log(`  live actors after the turns ${(yield* host.running).length}`)
  // The bench host passivates after 200 ms idle.
  yield* Effect.sleep("1500 millis")
  global.gc?.()
  console.log(`  live actors after idling    ${(yield* host.running).length}`)
  console.log(
    `  heap retained after passivation MB ${((process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024).toFixed(1)}`
  )
})

const main = async () => {
  console.log(`node ${process.version}, load average ${loadAverage()}`)
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-"))
  const runtime = (name: string) =>
    Troupe.layerSqlite({ filename: join(dir, name) }, { host: { idleTimeout: "200 millis" } }) as Layer.Layer<
      Troupe.Services
    >
  try {
    await Effect.runPromise(Effect.provide(sequential, runtime("seq.db")))
    await Effect.runPromise(Effect.provide(concurrent, runtime("many.db")))
  } finally {
    clearInterval(sampleRss)
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
