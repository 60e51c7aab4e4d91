/**
 * Tool policy figures (issue 15) on a SQLite file with the scripted
 * zero-latency model.
 *
 * - parallel tool calls: a turn whose one reply asks for `--calls` calls of a
 *   tool that sleeps `--sleep` ms (real time), run with the tool marked
 *   `parallel` and not, alternating A and B turn by turn on one session each:
 *   the turn's wall time (median), and the log records it wrote;
 * - the permission fold: `ToolPolicy.decide` over four layers (host, parent,
 *   agent, run, each with name, side-effect, capability and cost rules) per
 *   call, in ns.
 *
 *   node bench/run.mjs toolPolicy [--turns 40] [--calls 4] [--sleep 20] [--decisions 1000000]
 */
import { Effect, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import * as ToolPolicy from "../src/actors/ToolPolicy.js"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, loadAverage, median } from "./support.js"

const turns = Number(arg("turns", "40"))
const callCount = Number(arg("calls", "4"))
const sleepMs = Number(arg("sleep", "20"))
const decisions = Number(arg("decisions", "1000000"))

const napper = (name: string, parallel: boolean) =>
  Tool.make({
    name,
    description: "Sleeps a little.",
    parameters: Schema.Struct({}),
    success: Schema.String,
    metadata: { sideEffect: "read", idempotency: "supported", parallel },
    handler: () => Effect.as(Effect.sleep(sleepMs), "rested")
  })
const serialTool = napper("nap_serial", false)
const parallelTool = napper("nap_parallel", true)

const reply = (tool: string) => (request: Model.Request): ScriptedReply =>
  request.messages[request.messages.length - 1]?.role === "tool"
    ? "rested"
    : { toolCalls: Array.from({ length: callCount }, (_, i) => ({ id: `c${i}`, name: tool, arguments: "{}" })) }

const agentFor = (tool: Tool.Tool<any, any, any, any>) =>
  new Agent({ name: tool.name, instructions: "benchmark", model: new ModelRef({ name: "scripted" }), tools: [tool.spec] })

const parallelTurns = Effect.gen(function*() {
  const sessions = yield* Sessions
  const store = yield* SessionStore
  const serial = yield* sessions.create(principal, { agent: agentFor(serialTool) })
  const parallel = yield* sessions.create(principal, { agent: agentFor(parallelTool) })
  const wall = { serial: [] as Array<number>, parallel: [] as Array<number> }
  const turn = (sessionId: typeof serial.id, key: "serial" | "parallel", i: number) =>
    Effect.gen(function*() {
      const from = performance.now()
      const accepted = yield* sessions.send(principal, sessionId, { text: `go ${i}` })
      yield* sessions.awaitTurn(principal, sessionId, accepted.turnId!)
      if (i > 0) wall[key].push(performance.now() - from)
    })
  // One warm-up turn each (i = 0, not measured), then A and B alternate.
  for (let i = 0; i <= turns; i++) {
    yield* turn(serial.id, "serial", i)
    yield* turn(parallel.id, "parallel", i)
  }
  const recordsPerTurn = (sessionId: typeof serial.id) =>
    Effect.map(
      store.readLog(sessionId, { limit: 1_000_000 }),
      (page) => page.records.filter((r) => r.body._tag !== "session_created").length / (turns + 1)
    )
  return {
    serialMs: median(wall.serial),
    parallelMs: median(wall.parallel),
    serialRecords: yield* recordsPerTurn(serial.id),
    parallelRecords: yield* recordsPerTurn(parallel.id)
  }
})

const decideCost = () => {
  const rules = (source: string): ToolPolicy.Layer => ({
    source,
    rules: {
      default: "allow",
      rules: { rm: "deny", deploy: "ask", [`only_${source}`]: "allow" },
      sideEffects: { write: "ask" },
      capabilities: { shell: "deny", network: "allow" },
      costs: { money: "ask" }
    }
  })
  const layers = [rules("host"), rules("parent"), rules("agent"), rules("run")]
  const tools: Array<ToolPolicy.Subject> = [
    { name: "fetch", sideEffect: "read", capabilities: ["network"], costs: ["money"] },
    { name: "write_file", sideEffect: "write", capabilities: ["filesystem"] },
    { name: "rm", sideEffect: "write" },
    { name: "search", sideEffect: "none" }
  ]
  let denied = 0
  for (let i = 0; i < 100_000; i++) if (ToolPolicy.decide(layers, tools[i % 4]!).permission === "deny") denied++
  const from = performance.now()
  for (let i = 0; i < decisions; i++) if (ToolPolicy.decide(layers, tools[i % 4]!).permission === "deny") denied++
  const ns = ((performance.now() - from) * 1e6) / decisions
  return { ns, denied }
}

const dir = mkdtempSync(join(tmpdir(), "troupe-bench-policy-"))
const main = Effect.gen(function*() {
  console.log(`load before: ${loadAverage()}`)
  const figures = yield* parallelTurns.pipe(
    Effect.provide(Troupe.layerSqlite({ filename: join(dir, "bench.db") }, { tools: Toolkit.layer([serialTool, parallelTool]), scripts: {
      agents: {},
      fallback: (request) => reply(request.agentName)(request)
    } }))
  )
  console.log(`${callCount} calls of a ${sleepMs} ms tool in one reply, ${turns} turns each, alternating:`)
  console.log(`  serial:   median ${figures.serialMs.toFixed(1)} ms per turn, ${figures.serialRecords.toFixed(1)} records per turn`)
  console.log(`  parallel: median ${figures.parallelMs.toFixed(1)} ms per turn, ${figures.parallelRecords.toFixed(1)} records per turn`)
  console.log(`  ratio serial/parallel: ${(figures.serialMs / figures.parallelMs).toFixed(2)}`)
  const cost = decideCost()
  console.log(`ToolPolicy.decide over 4 layers: ${cost.ns.toFixed(0)} ns per call (${cost.denied} denials)`)
  console.log(`load after: ${loadAverage()}`)
})

Effect.runPromise(main).finally(() => rmSync(dir, { recursive: true, force: true }))
