/**
 * Fold speed on restart (issue 10): how fast an actor rebuilds its
 * `SessionState` from a long log. A log of tool turns (8 records each: the
 * turn's start, two model calls with their replies, the tool call and its
 * result, the end) is folded
 *
 * - in memory, records already decoded: the fold alone;
 * - from a SQLite file through `SqliteSessionStore` pages of 1,000, as an
 *   actor does when it starts: read, decode and fold.
 *
 * Figures are records per second, medians of `--rounds`.
 *
 *   node bench/run.mjs fold [--records 100000] [--rounds 5]
 */
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SessionActor from "../src/actors/SessionActor.js"
import * as SessionState from "../src/actors/SessionState.js"
import * as Transcript from "../src/actors/Transcript.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Usage } from "../src/schema/Budget.js"
import {
  makeCommitId,
  makeInputId,
  makeOperationId,
  makeTurnId,
  type SessionId
} from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import {
  LogRecord,
  OperationCompleted,
  OperationStarted,
  type RecordBody,
  TurnEnded,
  TurnStarted
} from "../src/schema/Record.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { arg, benchPrincipal as principal, loadAverage, median } from "./support.js"

const recordCount = Number(arg("records", "100000"))
const rounds = Number(arg("rounds", "5"))


/** One tool turn's 8 records, as the actor writes them. */
const toolTurn = (k: number) =>
  Effect.gen(function*() {
    const turnId = yield* makeTurnId
    const [first, tool, second] = [yield* makeOperationId, yield* makeOperationId, yield* makeOperationId]
    const callId = `call_${k}`
    return [
      new TurnStarted({ turnId, inputId: yield* makeInputId, text: `lookup ${k}` }),
      new OperationStarted({ operationId: first, turnId, kind: "model", name: "scripted", input: { messages: 4 * k + 1, tools: 1, steers: 0 } }),
      new OperationCompleted({
        operationId: first,
        turnId,
        output: { text: "", toolCalls: [{ id: callId, name: "lookup", arguments: `{"id":"${k}"}` }], inputTokens: 10, outputTokens: 0, finishReason: "tool_calls" },
        isError: false
      }),
      new OperationStarted({ operationId: tool, turnId, kind: "tool", name: "lookup", input: { callId, arguments: `{"id":"${k}"}`, requestedBy: first } }),
      new OperationCompleted({ operationId: tool, turnId, output: `record ${k} ok`, isError: false }),
      new OperationStarted({ operationId: second, turnId, kind: "model", name: "scripted", input: { messages: 4 * k + 3, tools: 1, steers: 0 } }),
      new OperationCompleted({
        operationId: second,
        turnId,
        output: { text: `answer: record ${k} ok`, toolCalls: [], inputTokens: 12, outputTokens: 4, finishReason: "stop" },
        isError: false
      }),
      new TurnEnded({ turnId, outcome: "completed", output: `answer: record ${k} ok`, usage: Usage.zero })
    ] satisfies ReadonlyArray<RecordBody>
  })

const program = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "troupe-fold-"))
  const filename = join(dir, "fold.db")
  const turns = Math.ceil((recordCount - 1) / 8)
  console.log(`fold: ${turns} tool turns (${turns * 8 + 1} records), ${rounds} rounds; load ${loadAverage()}`)

  // Write the log once, through the store, a turn per commit.
  const sessionId: SessionId = yield* Effect.gen(function*() {
    const store = yield* SessionStore
    const agent = new Agent({ name: "folded", instructions: "x", model: new ModelRef({ name: "scripted" }) })
    const session = yield* store.create({ principal, agent })
    let lease = (yield* store.acquire(session.id, "bench", 600_000)).pipe((o) => o._tag === "Some" ? o.value : undefined)!
    let head = session.headSeq
    for (let k = 0; k < turns; k++) {
      const message = new Message({ inputId: yield* makeInputId, text: `lookup ${k}` })
      yield* store.push(session.id, message)
      const records = yield* toolTurn(k)
      const receipt = yield* store.append({
        commitId: yield* makeCommitId,
        sessionId: session.id,
        owner: lease.owner,
        epoch: lease.epoch,
        expectedHeadSeq: head,
        records,
        consumes: [message.inputId]
      })
      head = receipt.headSeq
      if (k % 2000 === 1999) lease = yield* store.renew(lease, 600_000)
    }
    return session.id
  }).pipe(Effect.provide(SqliteSessionStore.layer({ filename })))

  const readAll = Effect.gen(function*() {
    const store = yield* SessionStore
    const all: Array<LogRecord> = []
    let after = 0
    for (;;) {
      const page = yield* store.readLog(sessionId, { after, limit: 1000 })
      all.push(...page.records)
      after = page.cursor
      if (!page.more) return all
    }
  })
  // What an actor does when it starts.
  const restart = SessionActor.foldLog(sessionId)

  const stats = yield* Effect.gen(function*() {
    const records = yield* readAll
    const foldRates: Array<number> = []
    const restartRates: Array<number> = []
    let last: SessionState.SessionState | undefined
    for (let round = 0; round < rounds + 1; round++) {
      const t0 = performance.now()
      last = SessionState.fold(SessionState.empty(sessionId), records)
      const t1 = performance.now()
      const rebuilt = yield* restart
      const t2 = performance.now()
      if (rebuilt.head !== last.head || rebuilt.transcript.length !== last.transcript.length) {
        return yield* Effect.dieMessage("the restart fold disagrees with the in-memory one")
      }
      // The first round warms the JIT.
      if (round === 0) continue
      foldRates.push(records.length / ((t1 - t0) / 1000))
      restartRates.push(records.length / ((t2 - t1) / 1000))
    }
    return { records: records.length, transcript: Transcript.toArray(last!.transcript).length, foldRates, restartRates }
  }).pipe(Effect.provide(SqliteSessionStore.layer({ filename })))
  rmSync(dir, { recursive: true, force: true })

  const k = (x: number) => `${Math.round(x / 1000).toLocaleString("en")}k`
  console.log(`records folded: ${stats.records}, transcript messages: ${stats.transcript}`)
  console.log(`fold alone (decoded records): ${k(median(stats.foldRates))} records/s (rounds: ${stats.foldRates.map(k).join(" ")})`)
  console.log(`restart (read from SQLite, decode, fold): ${k(median(stats.restartRates))} records/s (rounds: ${stats.restartRates.map(k).join(" ")})`)
  console.log(`load ${loadAverage()}`)
})

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
