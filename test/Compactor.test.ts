/**
 * Context compaction end to end through `Sessions` (docs/agent-loop.md,
 * "Context compaction"): a turn driven past its threshold by large tool
 * results is micro-compacted, then summarized; a recording model shows what
 * each request carried; the archived text comes back through `read_artifact`;
 * a summary that does not shrink the request, and one whose call fails, leave
 * the conversation as it was.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Compaction from "../src/actors/Compaction.js"
import * as SessionState from "../src/actors/SessionState.js"
import * as Transcript from "../src/actors/Transcript.js"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent } from "../src/schema/Agent.js"
import { CompactionSettings, type ContextCompacted } from "../src/schema/Compaction.js"
import type { LogRecord, OperationCompleted } from "../src/schema/Record.js"
import type { ProductEvent } from "../src/schema/ProductEvent.js"
import * as Model from "../src/services/Model.js"
import type { SessionStore } from "../src/services/SessionStore.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Telemetry from "../src/services/Telemetry.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import * as Script from "./support/compactionScript.js"
import { logOf } from "./support/actors.js"
import { principal } from "./support/fixtures.js"
import { availability, freshSchema } from "./support/postgres.js"
import { call, calls, recording } from "./support/agentLoop.js"

const pg = await availability()
const pgSchema = pg.run ? await freshSchema() : undefined
if (pgSchema !== undefined) afterAll(pgSchema.drop)

const sqliteDir = mkdtempSync(join(tmpdir(), "troupe-compactor-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))

/** The stores the main case runs on: memory, a SQLite file, and PostgreSQL when it answers. */
const stores: ReadonlyArray<readonly [string, () => Layer.Layer<SessionStore, unknown>]> = [
  ["memory", () => MemorySessionStore.layer],
  ["sqlite", () => SqliteSessionStore.layer({ filename: join(sqliteDir, "t.db") })],
  ...(pgSchema === undefined ? [] : [["postgres", () => PgSessionStore.layer({ url: pgSchema.url, maxConnections: 4 })] as const])
]

/** A scripted model that keeps every request, and a telemetry that keeps every event. */
const recordingRuntime = (scripts: ScriptedModel.Scripts, store: Layer.Layer<SessionStore, unknown> = MemorySessionStore.layer) => {
  const { requests, layer: model } = recording(scripts)
  const events: Array<ProductEvent> = []
  /** Whether each of `events` was emitted as excluded from analytics. */
  const excluded: Array<boolean> = []
  const telemetry = Layer.succeed(
    Telemetry.Telemetry,
    Telemetry.Telemetry.of({
      emit: (event) =>
        Effect.flatMap(Telemetry.isExcluded, (isExcluded) =>
          Effect.sync(() => {
            events.push(event)
            excluded.push(isExcluded)
          }))
    })
  )
  const layer = Troupe.layer(store, { model, telemetry, tools: Toolkit.layer([Script.fetchTool, Script.recallTool]) })
  return { requests, events, excluded, layer }
}

const compactions = (log: ReadonlyArray<LogRecord>) =>
  log.flatMap((r) => (r.body._tag === "context_compacted" ? [r.body as ContextCompacted] : []))

/** The request's size as the estimate counts it with no report: four characters a token. */
const tokensOf = (request: Model.Request) => {
  let chars = request.instructions.length
  for (const message of request.messages) chars += message.content.length
  return Math.ceil(chars / 4)
}

/** Every tool result of a request follows the reply that asked for it. */
const assertPaired = (request: Model.Request) => {
  const asked = new Set<string>()
  for (const message of request.messages) {
    if (message.role === "assistant") for (const call of message.toolCalls ?? []) asked.add(call.id)
    if (message.role === "tool") assert.isTrue(asked.has(message.toolCallId), `result ${message.toolCallId} without its call`)
  }
}

/** Runs the script's turn in a new session to its end; returns the session's log. */
const readTurn = (text = "read a and b") =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const who = principal()
    const session = yield* sessions.create(who, { agent: Script.agent })
    const accepted = yield* sessions.send(who, session.id, { text })
    const result = yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
    assert.strictEqual(result.output, "read back")
    return yield* logOf(session.id)
  })

/** The receipt of the log's one summary operation. */
const summaryReceipt = (log: ReadonlyArray<LogRecord>) => {
  const started = log.filter((r) => r.body._tag === "operation_started" && r.body.kind === "compaction")
  assert.lengthOf(started, 1)
  const operationId = (started[0]!.body as { operationId: string }).operationId
  return log.find((r) => r.body._tag === "operation_completed" && r.body.operationId === operationId)!.body as OperationCompleted
}

/** The `compaction.completed` event of the summary. */
const summaryEvent = (events: ReadonlyArray<ProductEvent>) =>
  events.find((e) => e.event === "compaction.completed" && e.mode === "summary") as Extract<ProductEvent, { event: "compaction.completed" }>

const turnRequests = (requests: ReadonlyArray<Model.Request>) => requests.filter((r) => r.purpose !== "summary")
const toolResult = (request: Model.Request, callId: string) =>
  request.messages.find((m) => m.role === "tool" && m.toolCallId === callId)?.content

describe("context compaction", () => {
  for (const [storeName, store] of stores) {
    it.live(`large tool results are archived, then the older messages summarized; read_artifact reads the text back (${storeName})`, () => {
      const { events, layer, requests } = recordingRuntime(Script.scripts, store())
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: Script.agent })
        const accepted = yield* sessions.send(who, session.id, { text: "read a and b" })
        const result = yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
        assert.strictEqual(result.output, "read back")
        const log = yield* logOf(session.id)
        const records = compactions(log)
        const micro = records.filter((r) => r.mode === "micro")
        const summaries = records.filter((r) => r.mode === "summary")
        assert.lengthOf(micro, 2, "page a, then page b, archived")
        assert.lengthOf(summaries, 1)
        assert.isBelow(log.findIndex((r) => r.body === micro[1]), log.findIndex((r) => r.body === summaries[0]), "micro first, then the summary")
        const [pageA] = micro[0]!.archived!
        assert.strictEqual(pageA!.toolName, "fetch")
        assert.strictEqual(pageA!.callId, "c-fetch-a")
        assert.strictEqual(pageA!.chars, 20_000)
        // The artifact is the fetch call's receipt.
        const fetchA = log.find((r) => r.body._tag === "operation_started" && r.body.kind === "tool" && r.body.name === "fetch")!
        assert.strictEqual(pageA!.artifactId, (fetchA.body as { operationId: string }).operationId)

        const turn = turnRequests(requests)
        // The request right after the first archive: page a is a closed marker, page b (the last cycle's) whole.
        const firstMarked = turn.find((r) => toolResult(r, "c-fetch-a")?.startsWith("<archived_tool_result") === true)!
        assert.isDefined(firstMarked)
        const marker = toolResult(firstMarked, "c-fetch-a")!
        assert.include(marker, `tool="fetch"`)
        assert.include(marker, `artifact="${pageA!.artifactId}"`)
        assert.include(marker, `chars="20000"`)
        assert.include(marker, Script.page("a").slice(0, 100), "its head")
        assert.include(marker, Script.page("a").slice(-100), "its tail")
        assert.include(marker, "read_artifact")
        assert.isTrue(marker.endsWith("</archived_tool_result>"))
        assert.isBelow(marker.length, 600)
        assert.strictEqual(toolResult(firstMarked, "c-fetch-b"), Script.page("b"))
        assert.include(firstMarked.tools.map((t) => t.name), "read_artifact", "offered once something is archived")
        assert.notInclude(turn[0]!.tools.map((t) => t.name), "read_artifact", "not before")
        // The request before it carried page a whole.
        const before = turn[turn.indexOf(firstMarked) - 1]!
        assert.strictEqual(toolResult(before, "c-fetch-a"), Script.page("a"))

        // Preserved results are never archived.
        for (const request of turn) {
          for (const message of request.messages) {
            if (message.role === "tool" && message.toolCallId.startsWith("c-recall")) assert.match(message.content, /^RECALL \d+:/)
          }
        }

        // The summary call was given the older messages, not the tools; the next request starts with its summary.
        const summaryCalls = requests.filter((r) => r.purpose === "summary")
        assert.lengthOf(summaryCalls, 1)
        assert.deepStrictEqual(summaryCalls[0]!.tools, [])
        assert.strictEqual(summaryCalls[0]!.instructions, Compaction.SUMMARY_INSTRUCTIONS)
        const summarized = requests[requests.indexOf(summaryCalls[0]!) + 1]!
        assert.isTrue(Compaction.isSummary(summarized.messages[0]!), "the request right after the summary call starts with it")
        assert.include(summarized.messages[0]!.content, `archived as ${pageA!.artifactId}`)
        assert.notStrictEqual(summarized.messages[1]!.role, "tool", "the cut never falls inside a tool block")
        assert.strictEqual(summaries[0]!.replaced! + summarized.messages.length - 1 >= summaries[0]!.messagesBefore, true)
        assert.isBelow(summaries[0]!.tokensAfter, summaries[0]!.tokensBefore)
        // The summary call is an operation with a receipt, committed with the record.
        const summaryOp = log.find((r) => r.body._tag === "operation_started" && r.body.kind === "compaction")!
        assert.strictEqual((summaryOp.body as { operationId: string }).operationId, summaries[0]!.operationId)
        const summarySeq = log.find((r) => r.body === summaries[0])!.seq
        assert.strictEqual(summaryOp.seq, summarySeq - 2)

        for (const request of turn) assertPaired(request)
        // Every request the turn made is under the threshold, but the ones that led to a compaction.
        const over = turn.filter((r) => tokensOf(r) > Script.THRESHOLD)
        assert.deepStrictEqual(over, [])

        // read_artifact gave the archived text back, page by page.
        const reads = log.flatMap((r) => {
          if (r.body._tag !== "operation_completed") return []
          const output = r.body.output
          return typeof output === "string" && output.startsWith("[artifact ") ? [output] : []
        })
        assert.lengthOf(reads, 2)
        const [head, tail] = reads.map((text) => text.slice(text.indexOf("\n") + 1))
        assert.strictEqual(head, Script.page("a").slice(0, 8_000))
        assert.strictEqual(tail, Script.page("a").slice(16_000))
        assert.include(reads[0]!, `read on with "offset": 8000`)
        assert.include(reads[1]!, "this is the end")

        // Events: two micro compactions archiving one result each, then a summary.
        const names = events.flatMap((e) => (e.event.startsWith("compaction.") ? [`${e.event} ${(e as { mode: string }).mode}`] : []))
        assert.deepStrictEqual(names, [
          "compaction.started micro",
          "compaction.completed micro",
          "compaction.started micro",
          "compaction.completed micro",
          "compaction.started summary",
          "compaction.completed summary"
        ])
        const completed = events.filter((e) => e.event === "compaction.completed") as Array<Extract<ProductEvent, { event: "compaction.completed" }>>
        assert.deepStrictEqual(completed.map((e) => [e.outcome, e.usage.archived]), [["compacted", 1], ["compacted", 1], ["compacted", 0]])
        for (const e of completed) assert.isBelow(e.usage.tokensAfter, e.usage.tokensBefore)

        // The conversation folded from the log (as after a restart) is the compacted one the last request was sent, and its reply.
        const folded = Transcript.toArray(SessionState.fold(SessionState.empty(session.id), log).transcript)
        assert.isTrue(Compaction.isSummary(folded[0]!))
        assert.deepStrictEqual(folded, [...turn.at(-1)!.messages, { role: "assistant", content: "read back", toolCalls: undefined }])
      }).pipe(Effect.provide(layer), Effect.orDie)
    }, 30_000)
  }

  it.live("a summary that does not shrink the request is rejected: the history stays, and no second summary is tried", () => {
    const bloated = { ...Script.scripts, summarize: () => "x".repeat(60_000) }
    const { events, layer, requests } = recordingRuntime(bloated)
    return Effect.gen(function*() {
      const log = yield* readTurn()
      assert.notInclude(compactions(log).map((r) => r.mode), "summary", "no summary record")
      assert.lengthOf(requests.filter((r) => r.purpose === "summary"), 1, "tried once in the turn")
      for (const request of turnRequests(requests)) assert.isFalse(Compaction.isSummary(request.messages[0]!))
      assert.strictEqual(turnRequests(requests).at(-1)!.messages[0]!.content, "read a and b")
      // Its receipt says it was rejected.
      assert.strictEqual((summaryReceipt(log).output as { rejected?: boolean }).rejected, true)
      const summary = summaryEvent(events)
      assert.strictEqual(summary.outcome, "rejected")
      assert.isAtLeast(summary.usage.tokensAfter, summary.usage.tokensBefore)
    }).pipe(Effect.provide(layer))
  }, 30_000)

  it.live("a summary call that fails keeps the history as it was, and the turn goes on", () => {
    const failing = { ...Script.scripts, summarize: () => ({ fail: "the summarizer is down" }) }
    const { events, layer, requests } = recordingRuntime(failing)
    return Effect.gen(function*() {
      const log = yield* readTurn()
      assert.notInclude(compactions(log).map((r) => r.mode), "summary")
      assert.lengthOf(requests.filter((r) => r.purpose === "summary"), 1)
      const receipt = summaryReceipt(log)
      assert.strictEqual(receipt.isError, true)
      assert.deepStrictEqual(receipt.output, { error: "the summarizer is down" })
      assert.strictEqual(summaryEvent(events).outcome, "failed")
    }).pipe(Effect.provide(layer))
  }, 30_000)

  it.live("read_artifact refuses an id that was never archived, bad arguments and an offset past the end, as tool errors", () => {
    const bad: Record<string, Model.ToolCall> = {
      "c-read-1": { id: "c-bad-1", name: "read_artifact", arguments: JSON.stringify({ artifactId: "op_01M8RQ2S0PRFDQ806Y94486WK3" }) },
      "c-bad-1": { id: "c-bad-2", name: "read_artifact", arguments: "{not json" },
      "c-bad-2": { id: "c-bad-3", name: "read_artifact", arguments: JSON.stringify({ artifactId: "x", offset: -1 }) }
    }
    const scripts: ScriptedModel.Scripts = {
      ...Script.scripts,
      fallback: (request) => {
        const last = request.messages.at(-1)
        if (last?.role === "tool" && last.toolCallId === "c-bad-3") {
          const id = Script.artifactIn(request)!
          return { toolCalls: [{ id: "c-bad-4", name: "read_artifact", arguments: JSON.stringify({ artifactId: id, offset: 20_001 }) }] }
        }
        if (last?.role === "tool" && last.toolCallId === "c-bad-4") return "done"
        const next = last?.role === "tool" ? bad[last.toolCallId] : undefined
        return next !== undefined ? { toolCalls: [next] } : Script.reply(request)
      }
    }
    const { layer } = recordingRuntime(scripts)
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: Script.agent })
      const accepted = yield* sessions.send(who, session.id, { text: "read a and b" })
      assert.strictEqual((yield* sessions.awaitTurn(who, session.id, accepted.turnId!)).output, "done")
      const log = yield* logOf(session.id)
      const byCall = new Map<string, string>()
      for (const r of log) {
        if (r.body._tag === "operation_started" && r.body.kind === "tool" && "callId" in r.body.input) byCall.set(r.body.operationId, r.body.input.callId)
      }
      const errors = log.flatMap((r) =>
        r.body._tag === "operation_completed" && r.body.isError && byCall.get(r.body.operationId)?.startsWith("c-bad")
          ? [[byCall.get(r.body.operationId), (r.body.output as { error: string }).error] as const]
          : []
      )
      assert.deepStrictEqual(errors.map(([id]) => id), ["c-bad-1", "c-bad-2", "c-bad-3", "c-bad-4"])
      assert.include(errors[0]![1], "no archived tool result has the artifact id")
      assert.include(errors[1]![1], "invalid arguments for read_artifact")
      assert.include(errors[2]![1], "invalid arguments for read_artifact")
      assert.include(errors[3]![1], "offset 20001 is past the end")
    }).pipe(Effect.provide(layer))
  }, 30_000)

  it.live("the compaction events of a turn whose sender asked to be excluded from analytics are excluded, the next sender's not", () => {
    const { events, excluded, layer } = recordingRuntime(Script.scripts)
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: Script.agent })
      const first = yield* sessions.send(who, session.id, { text: "read a and b" }).pipe(Telemetry.withExcluded(true))
      yield* sessions.awaitTurn(who, session.id, first.turnId!)
      const during = events.map((e, i) => [e.event, excluded[i]] as const).filter(([name]) => name.startsWith("compaction."))
      assert.isAbove(during.length, 0)
      for (const [, isExcluded] of during) assert.isTrue(isExcluded)
      const seen = events.length
      const second = yield* sessions.send(who, session.id, { text: "again" })
      yield* sessions.awaitTurn(who, session.id, second.turnId!)
      const after = events.slice(seen).map((e, i) => [e.event, excluded[seen + i]] as const).filter(([name]) => name.startsWith("compaction."))
      assert.isAbove(after.length, 0, "the second turn compacts too (its first request is over the threshold)")
      for (const [, isExcluded] of after) assert.isFalse(isExcluded)
    }).pipe(Effect.provide(layer))
  }, 30_000)

  it.live("after a handoff, the compaction settings are those of the agent the turn was handed to", () => {
    // Handed to an agent whose window is tight, a turn begun by one that never compacts is compacted.
    const archivist = new Agent({ ...Script.agent, name: "archivist", instructions: "Answer." }, true)
    const front = new Agent({
      ...Script.agent,
      name: "front",
      compaction: new CompactionSettings({ ...Script.settings, enabled: false }),
      handoffs: [archivist]
    }, true)
    const { layer: model, requests } = recording({
      agents: {
        front: [calls(call("f1", "fetch", { page: "a" })), calls(call("f2", "fetch", { page: "b" })), calls(call("t1", "transfer_to_archivist"))],
        archivist: ["done"]
      }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: front })
      const accepted = yield* sessions.send(who, session.id, { text: "read a and b" })
      const result = yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
      assert.strictEqual(result.output, "done")
      assert.deepStrictEqual(compactions(yield* logOf(session.id)).map((r) => r.mode), ["micro"])
      const handedTo = requests.filter((r) => r.agentName === "archivist")
      assert.lengthOf(handedTo, 1)
      assert.notStrictEqual(toolResult(handedTo[0]!, "f1"), Script.page("a"), "page a was archived before archivist's call")
      // front's own calls went out whole: its settings turn compaction off.
      assert.strictEqual(toolResult(requests.filter((r) => r.agentName === "front").at(-1)!, "f1"), Script.page("a"))
    }).pipe(Effect.provide(Troupe.layer(MemorySessionStore.layer, { model, tools: Toolkit.layer([Script.fetchTool]) })))
  }, 30_000)

  it.live("a turn under its threshold is never compacted, and compaction can be turned off per run", () => {
    const { layer, requests } = recordingRuntime(Script.scripts)
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: Script.agent })
      const accepted = yield* sessions.send(who, session.id, {
        text: "read a and b",
        run: { compaction: { enabled: false } }
      })
      yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
      const log = yield* logOf(session.id)
      assert.deepStrictEqual(compactions(log), [])
      assert.lengthOf(requests.filter((r) => r.purpose === "summary"), 0)
      assert.strictEqual(toolResult(turnRequests(requests).at(-2)!, "c-fetch-a"), Script.page("a"))
    }).pipe(Effect.provide(layer))
  }, 30_000)
})
