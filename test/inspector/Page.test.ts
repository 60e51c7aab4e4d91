/**
 * The page's pure parts, in Node: the SSE parser (split chunks, CRLF,
 * comments, ids) and the timeline fold (a tool call with its approval in one
 * row, deltas to the streaming model call, turn totals, no duplicates on a
 * replayed cursor).
 */
import { assert, describe, it } from "@effect/vitest"
import { Timeline } from "../../src/inspector/page/Fold.js"
import { SseParser } from "../../src/inspector/page/Sse.js"
import type { DurableEvent } from "../../src/inspector/page/Types.js"

describe("SseParser", () => {
  it("parses events split anywhere, with CRLF, comments and ids", () => {
    const text = ": ping\r\nid: 7\r\nevent: turn_started\r\ndata: {\"a\":1}\r\n\r\nevent: assistant_delta\ndata: x\ndata: y\n\n"
    for (let cut = 0; cut < text.length; cut++) {
      const parser = new SseParser()
      const events = [...parser.feed(text.slice(0, cut)), ...parser.feed(text.slice(cut))]
      assert.deepStrictEqual(events, [
        { event: "turn_started", data: "{\"a\":1}", id: "7" },
        { event: "assistant_delta", data: "x\ny", id: undefined }
      ], `cut at ${cut}`)
      assert.strictEqual(parser.comments, 1)
    }
  })
})

const ev = (cursor: number, record: Record<string, unknown>): DurableEvent => ({ cursor, at: 1000 + cursor * 10, record: record as never })

describe("Timeline", () => {
  it("folds a turn: the message, a streamed model call, a tool call with its approval, the end with budgets", () => {
    const t = new Timeline({ totalTokens: 100 })
    t.add(ev(1, { _tag: "turn_started", turnId: "turn_1", inputId: "in_1", text: "delete it" }))
    t.add(ev(2, { _tag: "operation_started", operationId: "op_m", turnId: "turn_1", kind: "model", name: "m", input: { messages: 1, tools: 1 } }))
    assert.isDefined(t.delta("turn_1", "thinking "))
    t.add(ev(3, { _tag: "operation_completed", operationId: "op_m", turnId: "turn_1", output: { text: "", toolCalls: [{ name: "rm" }], inputTokens: 5, outputTokens: 2 } }))
    assert.isUndefined(t.delta("turn_1", "late"), "no model call streams after it completed")
    t.add(ev(4, { _tag: "operation_started", operationId: "op_t", turnId: "turn_1", kind: "tool", name: "rm", input: { callId: "c", arguments: "{\"p\":1}", requestedBy: "op_m" } }))
    t.add(ev(5, { _tag: "callback_opened", callbackId: "cb_1", turnId: "turn_1", operationId: "op_t", kind: "approval", request: {} }))
    assert.strictEqual(t.totals.pendingCallbacks, 1)
    const tool = t.rows.find((r) => r.kind === "tool")!
    assert.strictEqual(tool.status, "waiting")
    t.add(ev(6, { _tag: "callback_resolved", callbackId: "cb_1", turnId: "turn_1", resolution: "answered", result: { decision: "deny", reason: "no" } }))
    assert.strictEqual(tool.status, "denied")
    t.add(ev(7, { _tag: "operation_completed", operationId: "op_t", turnId: "turn_1", output: { error: "denied by the user: no" }, isError: true }))
    t.add(ev(7, { _tag: "renamed", title: "duplicate cursor, ignored" }))
    t.add(ev(8, { _tag: "turn_ended", turnId: "turn_1", outcome: "completed", output: "ok", usage: { inputTokens: 5, outputTokens: 2, totalTokens: 7, modelCalls: 1, toolCalls: 1, toolCallsByName: {}, wallTimeMs: 3, costMicros: 0 } }))
    assert.deepStrictEqual(t.rows.map((r) => r.kind), ["user", "model", "tool", "turn_end"])
    assert.strictEqual(tool.status, "denied")
    assert.include(tool.summary, "denied")
    assert.include(tool.fields.map(([k, v]) => `${k}=${v}`), "duration=30 ms")
    assert.include(t.rows[1]!.fields.map(([k, v]) => `${k}=${v}`), "tokens in=5")
    assert.include(t.rows[3]!.fields.map(([k, v]) => `${k}=${v}`), "totalTokens=7 of 100")
    assert.deepStrictEqual({ ...t.totals }, { turns: 1, totalTokens: 7, pendingCallbacks: 0, lastAt: 1080 })
  })
})
