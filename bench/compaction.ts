/**
 * Context compaction figures (issue 15) on a SQLite file with the scripted
 * zero-latency model. One session, N sequential tool turns: the user asks,
 * the model calls `fetch`, which returns 20 KB of text, and the model answers.
 * With compaction on (a 32,000-token window), old results are archived and,
 * once the markers and messages pile up, the older conversation summarized
 * (the scripted model's default summary); with it off, the history grows.
 *
 * Reported per mode:
 * - the context tokens of each model request (four characters a token, what
 *   the scripted model reports), by tenth of the run: the maximum, against the
 *   threshold;
 * - CPU per turn (median, first tenth against last tenth);
 * - bytes stored per turn (log bodies and operation receipts, read from the
 *   closed file);
 * - the cost of one micro and one summary compaction: the median CPU of the
 *   turns that compacted so, less the median of the turns that did not (a
 *   difference of medians: noisy under load), and the CPU of the decisions
 *   alone, timed in a loop on a conversation at the threshold.
 *
 *   node bench/run.mjs compaction [--turns 1000] [--kb 20] [--window 32000] [--only on|off]
 */
import Database from "better-sqlite3"
import { Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Compaction from "../src/actors/Compaction.js"
import * as ContextEstimate from "../src/actors/ContextEstimate.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { CompactionSettings } from "../src/schema/Compaction.js"
import * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, cpuMicros, loadAverage, upperMedian } from "./support.js"

const turns = Number(arg("turns", "1000"))
const kb = Number(arg("kb", "20"))
const contextWindow = Number(arg("window", "32000"))
const only = arg("only", "all")

const text = (k: number) => `result ${k}: ${"lorem ipsum dolor sit amet ".repeat(Math.ceil((kb * 1024) / 27))}`.slice(0, kb * 1024)

const fetchTool = Tool.make({
  name: "fetch",
  description: "Fetches a document.",
  parameters: Schema.Struct({ k: Schema.Number }),
  success: Schema.String,
  metadata: { sideEffect: "read", idempotency: "supported" },
  handler: ({ k }) => Effect.succeed(text(k))
})

const settings = new CompactionSettings({ contextWindow, reservedOutputTokens: 4_096, bufferTokens: 2_048 })
const threshold = Compaction.resolve(settings, undefined, undefined).threshold

const agentFor = (enabled: boolean) =>
  new Agent({
    name: "reader",
    instructions: "Fetch what is asked, then answer.",
    model: new ModelRef({ name: "scripted" }),
    tools: [fetchTool.spec],
    compaction: new CompactionSettings({ ...settings, enabled })
  })

const decide = (request: Model.Request): ScriptedModel.ScriptedReply => {
  const last = request.messages[request.messages.length - 1]
  if (last?.role === "tool") return "Fetched."
  const k = Number(/(\d+)$/.exec(last?.content ?? "")?.[1] ?? 0)
  return { toolCalls: [{ id: `call_${k}`, name: "fetch", arguments: JSON.stringify({ k }) }] }
}

/** The context tokens of each turn request, as the scripted model counts them. */
const requestTokens: Array<number> = []
const model = Layer.effect(
  Model.Model,
  Effect.map(ScriptedModel.make({ fallback: decide }), (inner) =>
    Model.Model.of({
      stream: (request) =>
        Stream.suspend(() => {
          if (request.purpose !== "summary") {
            let chars = request.instructions.length
            for (const message of request.messages) chars += message.content.length
            requestTokens.push(Math.ceil(chars / 4))
          }
          return inner.stream(request)
        })
    }))
)

const runtime = (filename: string) =>
  Troupe.layerSqlite({ filename }, { model, tools: Toolkit.layer([fetchTool]) }) as Layer.Layer<Troupe.Services>

interface StoredTurn {
  log: number
  operations: number
  modes: Array<string>
}

/** Bytes and compactions of each turn, read from the closed file. */
const storedPerTurn = (filename: string, sessionId: string): ReadonlyArray<StoredTurn> => {
  const db = new Database(filename, { readonly: true })
  try {
    const log = db.prepare(
      `SELECT length(CAST(body AS BLOB)) AS bytes, CAST(body AS TEXT) AS body FROM troupe_log WHERE session_id = ? ORDER BY seq`
    ).all(sessionId) as Array<{ bytes: number; body: string }>
    const operations = db.prepare(
      `SELECT coalesce(sum(length(CAST(input AS BLOB))), 0) + coalesce(sum(length(CAST(output AS BLOB))), 0) AS bytes
      FROM troupe_operations WHERE session_id = ? GROUP BY turn_id ORDER BY min(started_seq)`
    ).all(sessionId) as Array<{ bytes: number }>
    const out: Array<StoredTurn> = []
    for (const row of log) {
      const tag = /"_tag":"(\w+)"/.exec(row.body)?.[1]
      if (tag === "turn_started") out.push({ log: 0, operations: 0, modes: [] })
      const turn = out[out.length - 1]
      if (turn === undefined) continue
      turn.log += row.bytes
      if (tag === "context_compacted") turn.modes.push(/"mode":"(\w+)"/.exec(row.body)![1]!)
    }
    out.forEach((turn, i) => (turn.operations = operations[i]?.bytes ?? 0))
    return out
  } finally {
    db.close()
  }
}

const fmt = (x: number, digits = 0) => x.toFixed(digits)

const run = (enabled: boolean, dir: string) =>
  Effect.gen(function*() {
    requestTokens.length = 0
    const filename = join(dir, `${enabled ? "on" : "off"}.db`)
    const cpu: Array<number> = []
    const sessionId = yield* Effect.gen(function*() {
      const sessions = yield* Sessions
      const session = yield* sessions.create(principal, { agent: agentFor(enabled) })
      for (let i = 0; i < turns; i++) {
        const c = cpuMicros()
        const accepted = yield* sessions.send(principal, session.id, { text: `fetch ${i}` })
        const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
        cpu.push(cpuMicros() - c)
        if (result.output !== "Fetched.") return yield* Effect.dieMessage(`turn ${i} answered ${result.output}`)
      }
      return session.id as string
    }).pipe(Effect.provide(runtime(filename)))
    const stored = storedPerTurn(filename, sessionId)
    const tenth = Math.max(1, Math.floor(turns / 10))
    const perRequest = Math.floor(requestTokens.length / 10)
    const maxByTenth = Array.from({ length: 10 }, (_, d) => Math.max(...requestTokens.slice(d * perRequest, (d + 1) * perRequest)))
    console.log(`\ncompaction ${enabled ? "on" : "off"}: ${turns} turns, ${kb} KB tool results; load ${loadAverage()}`)
    console.log(`  context tokens per request, max by tenth of the run: ${maxByTenth.join(" ")} (threshold ${threshold})`)
    console.log(`  context tokens, max over the run: ${Math.max(...requestTokens)}; last request: ${requestTokens.at(-1)}`)
    console.log(
      `  CPU per turn: median ${fmt(upperMedian(cpu) / 1000, 2)} ms, first tenth ${fmt(upperMedian(cpu.slice(0, tenth)) / 1000, 2)} ms, last tenth ${
        fmt(upperMedian(cpu.slice(-tenth)) / 1000, 2)
      } ms`
    )
    const bytes = stored.map((t) => t.log + t.operations)
    console.log(
      `  stored per turn: median ${fmt(upperMedian(bytes) / 1024, 1)} KB (log ${fmt(upperMedian(stored.map((t) => t.log)) / 1024, 1)} KB, receipts ${
        fmt(upperMedian(stored.map((t) => t.operations)) / 1024, 1)
      } KB); file ${fmt(statSync(filename).size / 1024 / 1024, 1)} MB`
    )
    if (enabled) {
      const plain = cpu.filter((_, i) => stored[i]?.modes.length === 0)
      const micro = cpu.filter((_, i) => stored[i]?.modes.join() === "micro")
      const summary = cpu.filter((_, i) => stored[i]?.modes.includes("summary"))
      const base = upperMedian(plain)
      console.log(`  turns: ${plain.length} without compaction, ${micro.length} with a micro one, ${summary.length} with a summary`)
      if (micro.length > 0) console.log(`  one micro compaction: +${fmt((upperMedian(micro) - base) / 1000, 2)} ms CPU (turn median ${fmt(upperMedian(micro) / 1000, 2)} ms)`)
      if (summary.length > 0) {
        console.log(`  one summary compaction: +${fmt((upperMedian(summary) - base) / 1000, 2)} ms CPU (turn median ${fmt(upperMedian(summary) / 1000, 2)} ms)`)
      }
    }
  })

/**
 * The decisions of one compaction on their own (no commit, no model call), on
 * a conversation at the threshold: `turns` tool turns, the last `full` with
 * their whole result, the others archived already.
 */
const parts = () => {
  const messages: Array<Model.Message> = []
  const origins = new Map<Model.Message, Compaction.Origin>()
  const resolved = Compaction.resolve(settings, undefined, undefined)
  for (let k = 0; k < 40; k++) {
    messages.push({ role: "user", content: `fetch ${k}` })
    messages.push({ role: "assistant", content: "", toolCalls: [{ id: `call_${k}`, name: "fetch", arguments: `{"k":${k}}` }] })
    const full = text(k)
    const result: Model.Message = {
      role: "tool",
      toolCallId: `call_${k}`,
      content: k < 35 ? Compaction.marker("fetch", `op_${k}`, full, resolved.excerptChars) : full
    }
    origins.set(result, { operationId: `op_${k}` as never, turnId: "turn_x" as never, seq: k * 8, toolName: "fetch" })
    messages.push(result)
    messages.push({ role: "assistant", content: "Fetched." })
  }
  const time = (f: () => unknown, n = 2_000) => {
    for (let i = 0; i < 200; i++) f()
    const c = cpuMicros()
    for (let i = 0; i < n; i++) f()
    return (cpuMicros() - c) / n
  }
  const list = { length: messages.length, items: messages }
  const plan = () => Compaction.planMicro(messages, resolved, () => false, (m) => origins.get(m))
  const archived = plan()
  const micro = () => {
    const chosen = plan()
    return Compaction.withArchived(messages, chosen)
  }
  const summary = () => {
    const cut = Compaction.planCut(messages, resolved.keepRecentMessages)!
    const input = Compaction.summaryInput(messages.slice(0, cut), resolved.threshold * 2)
    return [input, messages.slice(cut)]
  }
  console.log(`
one compaction's decisions alone, ${messages.length} messages (${archived.length} to archive):`)
  console.log(`  estimate with no report: ${fmt(time(() => ContextEstimate.estimate(list, [], null, 100)), 1)} µs`)
  console.log(`  micro (plan + markers + new conversation): ${fmt(time(micro), 1)} µs`)
  console.log(`  summary (cut + the summary call's text + the kept part): ${fmt(time(summary), 1)} µs`)
}

const program = Effect.gen(function*() {
  parts()
  const dir = mkdtempSync(join(tmpdir(), "troupe-compaction-"))
  try {
    if (only !== "off") yield* run(true, dir)
    if (only !== "on") yield* run(false, dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

Effect.runPromise(program).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
