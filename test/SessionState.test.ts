/**
 * The fold of a session's log: one pass, pages of any size and commit by
 * commit give the same state (property test over generated logs); a log
 * written before the records were typed still decodes and folds into the
 * conversation its model calls saw; the transcript rules (steers where the
 * model call took them, every tool call answered).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, HashMap, HashSet, Schema } from "effect"
import fc from "fast-check"
import { readFileSync } from "node:fs"
import * as IdSet from "../src/actors/IdSet.js"
import * as SessionState from "../src/actors/SessionState.js"
import * as Transcript from "../src/actors/Transcript.js"
import { Usage } from "../src/schema/Budget.js"
import { ApprovalRequest, ClientToolRequest } from "../src/schema/Callback.js"
import { type CommitId, makeCallbackId, makeCommitId, makeInputId, makeOperationId, makeSessionId, makeTurnId, type TurnId } from "../src/schema/Ids.js"
import {
  CallbackOpened,
  CallbackResolved,
  Closed,
  fromJsonText,
  InputApplied,
  LogRecord,
  OperationCompleted,
  OperationStarted,
  OperationUnknown,
  type RecordBody,
  RecordBody as RecordBodySchema,
  Renamed,
  SessionCreated,
  toJsonText,
  TurnEnded,
  TurnStarted
} from "../src/schema/Record.js"

const sessionId = Effect.runSync(makeSessionId)
const mint = <A>(make: Effect.Effect<A>) => Effect.runSync(make)

/** A random turn, as the shape of what happened in it. */
interface TurnShape {
  readonly text: string
  readonly steersBefore: number
  readonly cycles: ReadonlyArray<{
    readonly steersDuring: number
    readonly take: number
    readonly calls: ReadonlyArray<"completed" | "unknown" | "approved" | "denied" | "client" | "cancelled">
  }>
  readonly end: "completed" | "failed" | "interrupted"
}

const turnShape: fc.Arbitrary<TurnShape> = fc.record({
  text: fc.string({ maxLength: 12 }),
  steersBefore: fc.nat(2),
  cycles: fc.array(
    fc.record({
      steersDuring: fc.nat(2),
      take: fc.nat(3),
      calls: fc.array(fc.constantFrom("completed", "unknown", "approved", "denied", "client", "cancelled"), { maxLength: 3 })
    }),
    { maxLength: 3 }
  ),
  end: fc.constantFrom("completed", "failed", "interrupted")
})

/** The records a session with these turns writes, in order (valid as an actor would write them). */
const recordsOf = (turns: ReadonlyArray<TurnShape>): ReadonlyArray<RecordBody> => {
  let n = 0
  const id = (prefix: string) => `${prefix}_${String(++n).padStart(6, "0")}`
  const records: Array<RecordBody> = [new SessionCreated({ agentName: "a", parentId: null, title: null })]
  for (const turn of turns) {
    const turnId = mint(makeTurnId)
    records.push(new TurnStarted({ turnId, inputId: mint(makeInputId), text: turn.text }))
    let waiting = 0
    const steer = () => {
      waiting++
      records.push(new InputApplied({ inputId: mint(makeInputId), kind: "steer", turnId, detail: { text: id("steer") } }))
    }
    for (let i = 0; i < turn.steersBefore; i++) steer()
    // A callback is cancelled only by an interrupt: the turn ends there.
    let cancelled = false
    for (const cycle of turn.cycles) {
      if (cancelled) break
      const model = mint(makeOperationId)
      const take = Math.min(cycle.take, waiting)
      for (let i = 0; i < cycle.steersDuring; i++) steer()
      waiting -= take
      const toolCalls = cycle.calls.map((_, i) => ({ id: `call${i}`, name: "t", arguments: "{}" }))
      records.push(
        new OperationStarted({ operationId: model, turnId, kind: "model", name: "m", input: { messages: 0, tools: 1, steers: take } }),
        new OperationCompleted({ operationId: model, turnId, output: { text: id("reply"), toolCalls }, isError: false })
      )
      cycle.calls.forEach((kind, i) => {
        if (cancelled) return
        const operationId = mint(makeOperationId)
        const callId = `call${i}`
        records.push(new OperationStarted({ operationId, turnId, kind: "tool", name: "t", input: { callId, arguments: "{}", requestedBy: model } }))
        if (kind === "approved" || kind === "denied" || kind === "client" || kind === "cancelled") {
          const callbackId = mint(makeCallbackId)
          const request = kind === "client"
            ? new ClientToolRequest({ toolName: "t", callId, arguments: "{}" })
            : new ApprovalRequest({ toolName: "t", callId, arguments: "{}" })
          records.push(new CallbackOpened({ callbackId, turnId, operationId, kind: request._tag, request }))
          records.push(
            kind === "cancelled"
              ? new CallbackResolved({ callbackId, turnId, resolution: "cancelled" })
              : new CallbackResolved({
                callbackId,
                turnId,
                resolution: "answered",
                result: kind === "client" ? { output: id("out") } : { decision: kind === "approved" ? "approve_session" : "deny" }
              })
          )
          if (kind === "cancelled") {
            cancelled = true
            return
          }
        }
        records.push(
          kind === "unknown"
            ? new OperationUnknown({ operationId, turnId })
            : new OperationCompleted({ operationId, turnId, output: id("result"), isError: kind === "denied" })
        )
      })
    }
    const outcome = cancelled ? "interrupted" : turn.end
    records.push(new TurnEnded({
      turnId,
      outcome,
      failureCode: outcome === "failed" ? "model_error" : undefined,
      usage: Usage.zero
    }))
  }
  records.push(new Renamed({ title: "t" }), new Closed({}))
  return records
}

const logRecords = (bodies: ReadonlyArray<RecordBody>, commitEvery: ReadonlyArray<number>) => {
  const out: Array<LogRecord> = []
  let at = 1000
  let commit = 0
  const commitIds: Array<CommitId> = []
  bodies.forEach((body, i) => {
    if (commitEvery[i % commitEvery.length]! === 0) {
      at++
      commit++
    }
    out.push(new LogRecord({ sessionId, seq: i + 1, at, commitId: commitIds[commit] ??= mint(makeCommitId), body }))
  })
  return out
}

/** A state as plain data, for comparison. */
const plain = (state: SessionState.SessionState) => ({
  head: state.head,
  closed: state.closed,
  transcript: Transcript.toArray(state.transcript),
  ended: IdSet.toArray(state.ended),
  callbacks: [...HashMap.entries(state.callbacks)].sort(([a], [b]) => a.localeCompare(b)),
  answered: IdSet.toArray(state.pastCallbacks.answered).sort(),
  cancelled: IdSet.toArray(state.pastCallbacks.cancelled).sort(),
  approvals: [...HashSet.values(state.approvals)].sort(),
  active: state.active
})

describe("SessionState", () => {
  it("folding a log in one pass equals folding it in pages of any size, and commit by commit", () => {
    fc.assert(
      fc.property(
        fc.array(turnShape, { maxLength: 6 }),
        fc.array(fc.nat(3), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 20 }),
        (turns, cuts, pageSize) => {
          const log = logRecords(recordsOf(turns), cuts)
          const whole = SessionState.fold(SessionState.empty(sessionId), log)
          let paged = SessionState.empty(sessionId)
          for (let i = 0; i < log.length; i += pageSize) paged = SessionState.fold(paged, log.slice(i, i + pageSize))
          // Commit by commit, as the actor folds what it writes.
          let incremental = SessionState.empty(sessionId)
          for (let i = 0; i < log.length;) {
            let j = i
            while (j < log.length && log[j]!.commitId === log[i]!.commitId) j++
            incremental = SessionState.applyCommit(incremental, log[i]!.seq, log[i]!.at, log.slice(i, j).map((r) => r.body))
            i = j
          }
          assert.deepStrictEqual(plain(paged), plain(whole))
          assert.deepStrictEqual(plain(incremental), plain(whole))
          assert.strictEqual(whole.head, log.length)
          assert.isTrue(whole.closed)
          assert.isUndefined(whole.active)
          // Every turn ended: of its callbacks only the ids of those answered and those cancelled are kept.
          assert.strictEqual(HashMap.size(whole.callbacks), 0)
          const resolved = (resolution: string) =>
            log.flatMap((r) => (r.body._tag === "callback_resolved" && r.body.resolution === resolution ? [r.body.callbackId] : [])).sort()
          assert.deepStrictEqual(IdSet.toArray(whole.pastCallbacks.answered).sort(), resolved("answered"))
          assert.deepStrictEqual(IdSet.toArray(whole.pastCallbacks.cancelled).sort(), resolved("cancelled"))
          assert.deepStrictEqual(IdSet.toArray(whole.ended), log.flatMap((r) => (r.body._tag === "turn_ended" ? [r.body.turnId] : [])))
          // Every tool call in the transcript is answered, right after the reply that asked for it.
          const messages = Transcript.toArray(whole.transcript)
          messages.forEach((message, i) => {
            if (message.role !== "assistant" || message.toolCalls === undefined) return
            const answers = messages.slice(i + 1, i + 1 + message.toolCalls.length)
            assert.deepStrictEqual(
              answers.map((m) => (m.role === "tool" ? m.toolCallId : m.role)),
              message.toolCalls.map((call) => call.id)
            )
          })
          // Every steer is in the transcript once.
          const steers = log.flatMap((r) => r.body._tag === "input_applied" && r.body.detail && "text" in r.body.detail ? [r.body.detail.text] : [])
          assert.deepStrictEqual(messages.filter((m) => m.role === "user" && m.content.startsWith("steer_")).map((m) => m.content).sort(), steers.sort())
        }
      ),
      { numRuns: 300 }
    )
  })

  it("a steer goes in before the reply of the model call that took it, not where it was delivered", () => {
    const turnId = mint(makeTurnId)
    const ops = [mint(makeOperationId), mint(makeOperationId), mint(makeOperationId)]
    const op = (n: number) => ops[n]!
    const records: ReadonlyArray<RecordBody> = [
      new TurnStarted({ turnId, inputId: mint(makeInputId), text: "hi" }),
      new InputApplied({ inputId: mint(makeInputId), kind: "steer", turnId, detail: { text: "early" } }),
      // Delivered while the first call ran: the call took only the first steer.
      new InputApplied({ inputId: mint(makeInputId), kind: "steer", turnId, detail: { text: "late" } }),
      new OperationStarted({ operationId: op(1), turnId, kind: "model", name: "m", input: { messages: 2, tools: 0, steers: 1 } }),
      new OperationCompleted({ operationId: op(1), turnId, output: { text: "one", toolCalls: [] }, isError: false }),
      new OperationStarted({ operationId: op(2), turnId, kind: "model", name: "m", input: { messages: 4, tools: 0, steers: 1 } }),
      new OperationCompleted({ operationId: op(2), turnId, output: { text: "two", toolCalls: [] }, isError: false }),
      new TurnEnded({ turnId, outcome: "completed", output: "two", usage: Usage.zero })
    ]
    const state = SessionState.applyCommit(SessionState.empty(sessionId), 1, 0, records)
    assert.deepStrictEqual(Transcript.toArray(state.transcript).map((m) => m.content), ["hi", "early", "one", "late", "two"])
    assert.strictEqual(SessionState.waitingInputs(SessionState.applyCommit(SessionState.empty(sessionId), 1, 0, records.slice(0, 3)), [records[3]!]), 1)
  })

  it("a turn's end keeps of its callbacks only how they closed; the running turn's stay whole", () => {
    /** A tool call of `turnId` with a callback that is answered, cancelled, or left open. */
    const callback = (turnId: TurnId, resolution: "answered" | "cancelled" | "open") => {
      const operationId = mint(makeOperationId)
      const callbackId = mint(makeCallbackId)
      const request = new ClientToolRequest({ toolName: "t", callId: "c", arguments: "{}" })
      const input = { callId: "c", arguments: "{}", requestedBy: operationId }
      const records: Array<RecordBody> = [
        new OperationStarted({ operationId, turnId, kind: "tool", name: "t", input }),
        new CallbackOpened({ callbackId, turnId, operationId, kind: request._tag, request })
      ]
      if (resolution !== "open") records.push(new CallbackResolved({ callbackId, turnId, resolution, result: { output: "x".repeat(1000) } }))
      return { callbackId, records }
    }
    const first = mint(makeTurnId)
    const answered = callback(first, "answered")
    const cancelled = callback(first, "cancelled")
    const open = callback(first, "open")
    const second = mint(makeTurnId)
    const current = callback(second, "answered")
    const state = SessionState.applyCommit(SessionState.empty(sessionId), 1, 0, [
      new TurnStarted({ turnId: first, inputId: mint(makeInputId), text: "one" }),
      ...answered.records,
      ...cancelled.records,
      ...open.records,
      new TurnEnded({ turnId: first, outcome: "failed", failureCode: "internal", usage: Usage.zero }),
      new TurnStarted({ turnId: second, inputId: mint(makeInputId), text: "two" }),
      ...current.records
    ])
    // The ended turn's entries are gone, with their requests and answers; how each closed is kept.
    assert.deepStrictEqual([...HashMap.keys(state.callbacks)], [current.callbackId])
    assert.strictEqual(SessionState.pastResolution(state, answered.callbackId), "answered")
    assert.strictEqual(SessionState.pastResolution(state, cancelled.callbackId), "cancelled")
    assert.isUndefined(SessionState.pastResolution(state, open.callbackId))
    assert.isUndefined(SessionState.pastResolution(state, current.callbackId))
    assert.deepStrictEqual(IdSet.toArray(state.ended), [first])
    // The running turn's callbacks keep their answers: a resumed turn reads them.
    assert.deepStrictEqual(
      SessionState.callbacksOf(state, second).map((entry) => [entry.status, entry.result]),
      [["answered", { output: "x".repeat(1000) }]]
    )
  })

  it("a transcript branch that appends what the newest version holds shares it, and one that differs copies", () => {
    const base = Transcript.append(Transcript.empty(), { role: "user", content: "a" })
    const ahead = Transcript.append(base, { role: "user", content: "b" })
    const again = Transcript.append(base, { role: "user", content: "b" })
    assert.strictEqual(again.items, ahead.items)
    const other = Transcript.append(base, { role: "user", content: "c" })
    assert.notStrictEqual(other.items, ahead.items)
    assert.deepStrictEqual(Transcript.toArray(ahead), [{ role: "user", content: "a" }, { role: "user", content: "b" }])
    assert.deepStrictEqual(Transcript.toArray(other), [{ role: "user", content: "a" }, { role: "user", content: "c" }])
    assert.deepStrictEqual(Transcript.toArray(base), [{ role: "user", content: "a" }])
  })

  describe("a log written by troupe 0.1 before its records were typed", () => {
    const lines: ReadonlyArray<{ readonly seq: number; readonly body: unknown }> = readFileSync(
      new URL("./fixtures/legacy-log-0.1.jsonl", import.meta.url),
      "utf8"
    ).trim().split("\n").map((line) => JSON.parse(line))

    it("decodes record by record, through the schema and through the stored-text reviver alike", () => {
      const decode = Schema.decodeUnknownSync(RecordBodySchema)
      for (const line of lines) {
        const decoded = decode(line.body)
        assert.deepStrictEqual(fromJsonText(JSON.stringify(line.body)), decoded)
        assert.deepStrictEqual(JSON.parse(toJsonText(decoded)), line.body)
      }
    })

    it("folds into the conversation its turns had: tool calls, results, refusals, client answers and steers", () => {
      let state = SessionState.empty(sessionId)
      for (const line of lines) state = SessionState.apply(state, fromJsonText(JSON.stringify(line.body)), line.seq, 0)
      assert.strictEqual(state.head, 67)
      assert.isTrue(state.closed)
      assert.isUndefined(state.active)
      assert.deepStrictEqual([...HashSet.values(state.approvals)], ["lookup"])
      const messages = Transcript.toArray(state.transcript)
      assert.deepStrictEqual(messages.map((m) => `${m.role}:${m.content}`), [
        "user:find a",
        "assistant:",
        "tool:record a ok",
        "assistant:",
        "tool:ok",
        "user:find b and pick",
        "assistant:two calls",
        "tool:record b ok",
        `tool:{"error":"unknown tool: nope"}`,
        "assistant:",
        `tool:{"path":"/tmp/x"}`,
        "assistant:",
        "tool:ok",
        "user:pick again",
        "assistant:",
        `tool:{"error":"not run: the turn was interrupted"}`,
        "user:hurry up",
        "user:fail please",
        "user:no tools",
        "assistant:",
        `tool:{"error":"not run: the turn failed (budget_exhausted)"}`,
        "user:loop",
        ...Array.from({ length: 6 }, () => "assistant:thinking")
      ])
      const first = messages[1]!
      assert.deepStrictEqual(first.role === "assistant" ? first.toolCalls : undefined, [{ id: "c1", name: "lookup", arguments: "{\"id\":\"a\"}" }])
    })
  })
})
