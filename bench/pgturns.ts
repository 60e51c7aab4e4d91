/**
 * PostgreSQL tool turns (issue 16): S sessions at once, each running T
 * sequential tool turns through the real runtime (`Troupe.layerPg`'s wiring:
 * the PostgreSQL store, its LISTEN/NOTIFY signals, the shared-store host),
 * with the scripted zero-latency model and the `echo` tool. A tool turn: a
 * user message, the model asks for one call of `echo`, the tool returns, the
 * model answers (2 model calls + 1 tool call).
 *
 * Reported per S, medians of the rounds (each round on a fresh schema):
 * tool turns/s, the client's CPU per turn (this process), the server's CPU per
 * turn (the bench's own backends, read from /proc), p50/p99 of a turn's
 * latency (send → awaitTurn answered), the round trips per turn (every
 * `pg.Client#query` of this process, by statement, so LISTEN/NOTIFY, claims
 * and lease renewals count too) and the store calls per turn (a wrapper of
 * the port). The store's group commit (decision 0021, its default) batches
 * concurrent appends and pushes into one round trip; the batch sizes are
 * reported, and `--group off` sends every write alone.
 *
 *   node bench/run.mjs pgturns [--sessions 8,16,32,64] [--turns 100] [--rounds 3] [--warmup 30]
 *     [--connections 10] [--group on|off] [--inflight 2] [--statements 12]
 *
 * TROUPE_TEST_PG_URL as for the other PostgreSQL benches. The load average is
 * printed with every figure: the machine is shared.
 */
import { Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import pg from "pg"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import * as PgStoreSignals from "../src/layers/PgStoreSignals.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type * as Model from "../src/services/Model.js"
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
  upperMedian,
  withPgSchema
} from "./support.js"

const sessionCounts = arg("sessions", "8,16,32,64").split(",").map(Number)
const turns = Number(arg("turns", "100"))
const rounds = Number(arg("rounds", "3"))
const warmup = Number(arg("warmup", "30"))
const connections = Number(arg("connections", "10"))
// Group commit is the store's default; `--group off` sends every write alone (a baseline checkout ignores the option).
const group = arg("group", "on") === "on"
const inFlight = Number(arg("inflight", "2"))
const shownStatements = Number(arg("statements", "12"))

// ---- counting every round trip of this process -------------------------------------------

/** Round trips by statement (its first words), and the backends that served them. */
let statements = new Map<string, number>()
const backends = new Set<number>()

const labelOf = (text: string): string => {
  const words = text.replace(/\s+/g, " ").trim()
  if (words.startsWith("WITH s AS MATERIALIZED ( SELECT ctid AS version, head_seq")) return "append (one statement)"
  if (words.startsWith("WITH s AS MATERIALIZED ( SELECT ctid AS version, closed")) return "push (one statement)"
  if (words.startsWith("EXECUTE troupe_group_")) return "group commit (appends or pushes together)"
  if (words.startsWith("PREPARE troupe_group_")) return "PREPARE for group commit"
  return words.slice(0, 64)
}

const clientProto = pg.Client.prototype as unknown as {
  query: (...args: Array<unknown>) => unknown
  processID?: number | null
}
const originalQuery = clientProto.query
clientProto.query = function(this: { processID?: number | null }, ...args: Array<unknown>) {
  const first = args[0]
  const text = typeof first === "string" ? first : (first as { text?: unknown } | undefined)?.text
  if (typeof text === "string") {
    const label = labelOf(text)
    statements.set(label, (statements.get(label) ?? 0) + 1)
  }
  if (typeof this.processID === "number") backends.add(this.processID)
  return originalQuery.apply(this, args)
}

/** CPU (user + system) of the given PostgreSQL backends so far, in µs; a backend gone since counts what it last had. */
const lastSeen = new Map<number, number>()
const backendMicros = (): number => {
  const tick = 1_000_000 / 100 // CLK_TCK is 100 on Linux
  let total = 0
  for (const pid of backends) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      const micros = (Number(fields[11]) + Number(fields[12])) * tick
      lastSeen.set(pid, micros)
      total += micros
    } catch {
      total += lastSeen.get(pid) ?? 0
    }
  }
  return total
}

// ---- the runtime -------------------------------------------------------------------------

const askForTool = (id: string): ScriptedReply => ({ toolCalls: [{ id, name: "echo", arguments: "{\"text\":\"hi\"}" }] })
const answer = "The tool said hi."
const decide = (request: Model.Request): ScriptedReply =>
  request.messages[request.messages.length - 1]?.role === "tool" ? answer : askForTool(`call_${request.turnId}`)
const agent = new Agent({ name: "pgturns", instructions: "benchmark", model: new ModelRef({ name: "scripted" }), tools: [echo.spec] })


let batches: Array<number> = []

/** What `Troupe.layerPg` builds, with the store wrapped to count its calls. */
const runtime = (url: string, counts: StoreCounts) => {
  const options: PgSessionStore.Options & { groupCommit?: unknown } = { url, maxConnections: connections }
  options.groupCommit = group ? { inFlight, onBatch: (size: number) => void batches.push(size) } : false
  return Troupe.layer(countingStore(PgSessionStore.layer(options), counts), {
    signals: PgStoreSignals.layer({ url }),
    host: Troupe.sharedStoreHost({}),
    scripts: { fallback: decide },
    tools: Toolkit.layer([echo])
  }) as Layer.Layer<Troupe.Services>
}

const checkToolTurn = (usage: { readonly modelCalls: number; readonly toolCalls: number }, output: string) =>
  usage.modelCalls === 2 && usage.toolCalls === 1 && output === answer
    ? Effect.void
    : Effect.dieMessage(`not a tool turn: ${usage.modelCalls} model calls, ${usage.toolCalls} tool calls, output ${output}`)

interface Round {
  readonly turnsPerSecond: number
  readonly cpuMsPerTurn: number
  readonly serverCpuMsPerTurn: number
  readonly p50: number
  readonly p99: number
  readonly roundTripsPerTurn: number
  readonly statements: ReadonlyArray<readonly [string, number]>
  readonly counts: StoreCounts
  readonly batches: ReadonlyArray<number>
  readonly load: string
}

const round = (counts: StoreCounts, sessionCount: number, turnCount: number) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const created = yield* Effect.forEach(
      Array.from({ length: sessionCount }),
      () => sessions.create(principal, { agent }),
      { concurrency: 8 }
    )
    const latencies: Array<number> = []
    for (const key of Object.keys(counts)) delete counts[key]
    statements = new Map()
    batches = []
    const s0 = backendMicros()
    const c0 = cpuMicros()
    const t0 = performance.now()
    yield* Effect.forEach(created, (session) =>
      Effect.gen(function*() {
        for (let i = 0; i < turnCount; i++) {
          const t = performance.now()
          const accepted = yield* sessions.send(principal, session.id, { text: `message ${i}` })
          const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
          latencies.push(performance.now() - t)
          yield* checkToolTurn(result.usage, result.output)
        }
      }), { concurrency: "unbounded", discard: true })
    const wall = performance.now() - t0
    const cpu = cpuMicros() - c0
    const server = backendMicros() - s0
    const total = sessionCount * turnCount
    const sorted = latencies.sort((a, b) => a - b)
    const trips = [...statements.values()].reduce((a, b) => a + b, 0)
    return {
      turnsPerSecond: (total / wall) * 1000,
      cpuMsPerTurn: cpu / total / 1000,
      serverCpuMsPerTurn: server / total / 1000,
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      roundTripsPerTurn: trips / total,
      statements: [...statements.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, n / total] as const),
      counts: { ...counts },
      batches: [...batches],
      load: loadAverage()
    } satisfies Round
  })

const runRound = (sessionCount: number, turnCount: number) =>
  withPgSchema("troupe_pgturns", (url) => {
    const counts: StoreCounts = {}
    return Effect.runPromise(round(counts, sessionCount, turnCount).pipe(Effect.provide(runtime(url, counts))))
  })

const fixed = (x: number, digits = 2) => x.toFixed(digits)

const report = (sessionCount: number, results: ReadonlyArray<Round>) => {
  const med = (pick: (r: Round) => number) => upperMedian(results.map(pick))
  const all = (pick: (r: Round) => number, digits = 2) => results.map((r) => fixed(pick(r), digits)).join(" ")
  console.log(`\n${sessionCount} sessions × ${turns} sequential tool turns at once, medians of ${results.length} rounds (rounds in brackets)`)
  console.log(`  tool turns/s            ${fixed(med((r) => r.turnsPerSecond), 0)} [${all((r) => r.turnsPerSecond, 0)}]`)
  console.log(`  client CPU ms per turn  ${fixed(med((r) => r.cpuMsPerTurn), 3)} [${all((r) => r.cpuMsPerTurn, 3)}]`)
  console.log(`  server CPU ms per turn  ${fixed(med((r) => r.serverCpuMsPerTurn), 3)} [${all((r) => r.serverCpuMsPerTurn, 3)}] (the bench's backends)`)
  console.log(`  latency p50 / p99 ms    ${fixed(med((r) => r.p50))} / ${fixed(med((r) => r.p99))}`)
  console.log(`  round trips per turn    ${fixed(med((r) => r.roundTripsPerTurn))} [${all((r) => r.roundTripsPerTurn)}]`)
  const last = results[results.length - 1]!
  const perTurn = (n: number | undefined) => fixed((n ?? 0) / (sessionCount * turns), 2)
  const written = Object.entries(last.counts).filter(([name]) => storeWrites.has(name))
  const read = Object.entries(last.counts).filter(([name]) => !storeWrites.has(name))
  console.log(`  store writes per turn   ${perTurn(written.reduce((a, [, n]) => a + n, 0))}: ${written.map(([k, n]) => `${k} ${perTurn(n)}`).join(", ")}`)
  console.log(`  store reads per turn    ${read.map(([k, n]) => `${k} ${perTurn(n)}`).join(", ")}`)
  console.log(`  round trips per turn by statement (last round):`)
  for (const [label, n] of last.statements.slice(0, shownStatements)) console.log(`    ${fixed(n, 3).padStart(7)}  ${label}`)
  if (last.batches.length > 0) {
    const sorted = [...last.batches].sort((a, b) => a - b)
    const grouped = sorted.reduce((a, b) => a + b, 0)
    console.log(
      `  group commit (last round): ${sorted.length} round trips carried ${grouped} appends and pushes (${fixed(grouped / sorted.length)} each); ` +
        `size p50 ${percentile(sorted, 0.5)}, p90 ${percentile(sorted, 0.9)}, max ${sorted[sorted.length - 1]}`
    )
  }
  console.log(`  load average            ${results.map((r) => r.load).join(" | ")}`)
}

const main = async () => {
  console.log(`node ${process.version}, pool ${connections}, group commit ${group ? `on (${inFlight} in flight)` : "off"}, load average ${loadAverage()}`)
  if (warmup > 0) await runRound(8, warmup)
  for (const sessionCount of sessionCounts) {
    const results: Array<Round> = []
    for (let r = 0; r < rounds; r++) results.push(await runRound(sessionCount, turns))
    report(sessionCount, results)
  }
}

// Exit once reported: a pool's idle connections may keep the event loop alive a while.
main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
