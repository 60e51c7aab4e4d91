/**
 * What building one of the hot path's Schema class instances costs (issue 16):
 * `new C(props, true)` against `Trusted.make(C, props)`, for a log record, a
 * turn's end, an operation receipt and a session, in alternated rounds.
 *
 *   node bench/run.mjs construct [--count 200000] [--rounds 7]
 */
import { draft } from "../src/internal/SessionDraft.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Usage } from "../src/schema/Budget.js"
import { OperationReceipt } from "../src/schema/Operation.js"
import { LogRecord, OperationStarted, TurnEnded } from "../src/schema/Record.js"
import { Session } from "../src/schema/Session.js"
import * as Trusted from "../src/schema/Trusted.js"
import { arg, benchPrincipal, loadAverage, upperMedian } from "./support.js"

const count = Number(arg("count", "200000"))
const rounds = Number(arg("rounds", "7"))

const turnId = "turn_01J0000000000000000000000" as never
const operationId = "op_01J0000000000000000000000" as never
const usage = Usage.zero
const agent = new Agent({ name: "bench", instructions: "", model: new ModelRef({ name: "scripted" }) })
const session = draft("sess_bench" as never, { principal: benchPrincipal, agent }, undefined, 1)
const cases: ReadonlyArray<readonly [string, Trusted.SchemaClass<object, object>, object]> = [
  ["OperationStarted", OperationStarted as never, { operationId, turnId, kind: "model", name: "m", input: { messages: 3, tools: 1, steers: 0, results: 0 } }],
  ["TurnEnded", TurnEnded as never, { turnId, outcome: "completed", output: "done", usage }],
  ["LogRecord", LogRecord as never, { sessionId: "sess_bench", seq: 3, at: 1, commitId: "commit_1", body: usage }],
  ["OperationReceipt", OperationReceipt as never, {
    operationId, sessionId: "sess_bench", turnId, kind: "tool", name: "echo", input: {}, startedSeq: 2,
    status: "completed", output: "ok", isError: false, endedSeq: 3
  }],
  ["Session", Session as never, { ...session, headSeq: 9, updatedAt: 2 }]
]

let sink: unknown
const time = (f: () => void) => {
  const start = process.hrtime.bigint()
  f()
  return Number(process.hrtime.bigint() - start) / count
}
console.log(`node ${process.version}, ${count} constructions a round, ${rounds} rounds, load ${loadAverage()}`)
for (const [name, klass, props] of cases) {
  const byNew: Array<number> = []
  const byTrusted: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    byNew.push(time(() => {
      for (let i = 0; i < count; i++) sink = new klass(props, true)
    }))
    byTrusted.push(time(() => {
      for (let i = 0; i < count; i++) sink = Trusted.make(klass, props)
    }))
  }
  const a = upperMedian(byNew)
  const b = upperMedian(byTrusted)
  console.log(`  ${name.padEnd(18)} new ${a.toFixed(0)} ns, Trusted.make ${b.toFixed(0)} ns (${(b / a).toFixed(2)})`)
}
void sink
