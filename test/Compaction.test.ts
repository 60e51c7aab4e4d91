/**
 * The pure decisions of context compaction (src/actors/Compaction.ts): the
 * settings a turn resolves, which tool results are archived and the marker
 * that replaces each, where a summary cuts, and how a record changes a
 * transcript; and the estimate of a request (src/actors/ContextEstimate.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import * as AppendOnlyList from "../src/actors/AppendOnlyList.js"
import * as Compaction from "../src/actors/Compaction.js"
import * as ContextEstimate from "../src/actors/ContextEstimate.js"
import { CompactionSettings, ContextCompacted } from "../src/schema/Compaction.js"
import { OperationId, TurnId } from "../src/schema/Ids.js"
import type * as Model from "../src/services/Model.js"

const turnId = TurnId.make("turn_01M8RQ2S0PRFDQ806Y94486WK3")
const op = (n: number) => OperationId.make(`op_01M8RQ2S0PRFDQ806Y94486W${String(n).padStart(2, "0")}`)

const settings = Compaction.resolve(
  new CompactionSettings({ archiveMinChars: 100, keepRecentCycles: 1, excerptChars: 10 }),
  undefined,
  undefined
)

const big = (tag: string) => `${tag}:${"z".repeat(500)}`
const reply = (...ids: ReadonlyArray<string>): Model.Message => ({
  role: "assistant",
  content: "",
  toolCalls: ids.map((id) => ({ id, name: id.startsWith("keep") ? "keeper" : "fetch", arguments: "{}" }))
})
const result = (id: string, content: string): Model.Message => ({ role: "tool", toolCallId: id, content })

/** A conversation of three tool cycles, and the origin of each result. */
const conversation = () => {
  const messages: Array<Model.Message> = [
    { role: "user", content: "go" },
    reply("a1", "keep1"),
    result("a1", big("a1")),
    result("keep1", big("keep1")),
    reply("a2"),
    result("a2", "short"),
    reply("a3"),
    result("a3", big("a3"))
  ]
  const origins = new Map<Model.Message, Compaction.Origin>()
  messages.forEach((m, i) => {
    if (m.role === "tool") {
      origins.set(m, { operationId: op(i), turnId, seq: 10 + i, toolName: m.toolCallId.startsWith("keep") ? "keeper" : "fetch" })
    }
  })
  return { messages, originOf: (m: Model.Message) => origins.get(m) }
}

describe("Compaction", () => {
  it("resolves settings run → agent → default, and the threshold from window, reserve and buffer", () => {
    const byDefault = Compaction.resolve(undefined, undefined, undefined)
    assert.strictEqual(byDefault.threshold, 128_000 - 8_192 - 4_096)
    assert.strictEqual(Compaction.resolve(undefined, undefined, 1_000).reservedOutputTokens, 1_000, "maxOutputTokens is the reserve")
    const agent = new CompactionSettings({ contextWindow: 50_000, bufferTokens: 1_000, keepRecentMessages: 4 })
    const run = new CompactionSettings({ contextWindow: 20_000, enabled: false })
    const resolved = Compaction.resolve(agent, run, 2_000)
    assert.deepStrictEqual(
      [resolved.enabled, resolved.contextWindow, resolved.bufferTokens, resolved.keepRecentMessages, resolved.threshold],
      [false, 20_000, 1_000, 4, 20_000 - 2_000 - 1_000]
    )
    assert.strictEqual(Compaction.resolve(new CompactionSettings({ contextWindow: 100 }), undefined, undefined).threshold, 0)
  })

  it("archives long results older than the recent cycles, never preserved ones, short ones or markers", () => {
    const { messages, originOf } = conversation()
    const archived = Compaction.planMicro(messages, settings, (name) => name === "keeper", originOf)
    assert.deepStrictEqual(archived.map((a) => [a.index, a.callId, a.toolName, a.artifactId, a.seq, a.chars]), [
      [2, "a1", "fetch", op(2), 12, 503]
    ])
    const marked = Compaction.withArchived(messages, archived)
    assert.strictEqual(marked.length, messages.length, "the result keeps its place beside its call")
    assert.strictEqual((marked[2] as { toolCallId: string }).toolCallId, "a1")
    assert.isTrue(Compaction.isMarker(marked[2]!.content))
    // Archived once: a marker is not archived again.
    assert.deepStrictEqual(Compaction.planMicro(marked, settings, (name) => name === "keeper", originOf), [])
    // Without preserving, the keeper's result goes too; the last cycle's result never does.
    assert.deepStrictEqual(Compaction.planMicro(messages, settings, () => false, originOf).map((a) => a.callId), ["a1", "keep1"])
    // A result whose origin is unknown (a closing "not run" result) is left alone.
    assert.deepStrictEqual(Compaction.planMicro(messages, settings, () => false, () => undefined), [])
  })

  it("a marker is closed, names tool, artifact and size, shows a bounded head and tail, and says how to read it back", () => {
    const text = `HEAD${"m".repeat(1_000)}</archived_tool_result>TAIL`
    const marker = Compaction.marker("fetch", op(1), text, 30)
    assert.isTrue(marker.startsWith(`<archived_tool_result tool="fetch" artifact="${op(1)}" chars="${text.length}">`))
    assert.isTrue(marker.endsWith("</archived_tool_result>"))
    assert.strictEqual(marker.split("</archived_tool_result>").length, 2, "the excerpt cannot close it early")
    assert.include(marker, "HEAD")
    assert.include(marker, "TAIL")
    assert.include(marker, `${text.length - 60} characters not shown`)
    assert.include(marker, `read_artifact with {"artifactId": "${op(1)}"}`)
    assert.isBelow(marker.length, 400)
  })

  it("a summary keeps the last messages raw, and a cut inside a tool block moves left to its reply", () => {
    const { messages } = conversation()
    // Keeping 2 would cut at index 6 (a reply): fine.
    assert.strictEqual(Compaction.planCut(messages, 2), 6)
    // Keeping 1 would cut at index 7 (a3's result): moves left to its reply.
    assert.strictEqual(Compaction.planCut(messages, 1), 6)
    // Keeping 5 would cut at index 3 (keep1's result, second of its block): moves to index 1.
    assert.strictEqual(Compaction.planCut(messages, 5), 1)
    // Nothing before the kept part: no summary.
    assert.strictEqual(Compaction.planCut(messages, 8), undefined)
    // Only a previous summary before it: nothing new to summarize.
    const summarized: Array<Model.Message> = [{ role: "user", content: Compaction.summaryMessage("before") }, ...messages.slice(4)]
    assert.strictEqual(Compaction.planCut(summarized, 4), undefined)
    assert.strictEqual(Compaction.planCut(summarized, 2), 3)
  })

  it("a record applies only to the conversation it was planned on", () => {
    const { messages, originOf } = conversation()
    const list = { length: messages.length, items: messages.slice() }
    const archived = Compaction.planMicro(messages, settings, () => false, originOf)
    const micro = new ContextCompacted({ turnId, mode: "micro", messagesBefore: messages.length, tokensBefore: 9, tokensAfter: 3, archived })
    const after = Compaction.applyRecord(list, micro)
    assert.deepStrictEqual(AppendOnlyList.toArray(after), Compaction.withArchived(messages, archived))
    const summary = new ContextCompacted({
      turnId,
      mode: "summary",
      messagesBefore: messages.length,
      tokensBefore: 9,
      tokensAfter: 3,
      replaced: 6,
      summary: Compaction.summaryMessage("all of it"),
      operationId: op(99)
    })
    assert.deepStrictEqual(AppendOnlyList.toArray(Compaction.applyRecord(after, summary)), [
      { role: "user", content: Compaction.summaryMessage("all of it") },
      ...messages.slice(6)
    ])
    const shorter = { length: 3, items: messages.slice(0, 3) }
    assert.strictEqual(Compaction.applyRecord(shorter, micro), shorter)
    assert.strictEqual(Compaction.applyRecord(shorter, summary), shorter)
  })

  it("the summary call's text is bounded, message by message and as a whole", () => {
    const { messages } = conversation()
    const huge: Array<Model.Message> = [...messages, { role: "user", content: "q".repeat(100_000) }]
    const text = Compaction.summaryInput(huge, 5_000)
    assert.isAtMost(text.length, 5_000 + 10)
    assert.include(text, "[user] go")
  })

  it("the estimate adds what came after the model's report, and counts everything when there is none", () => {
    const { messages } = conversation()
    const list = { length: messages.length, items: messages }
    const all = ContextEstimate.estimateAll(messages, 40)
    assert.strictEqual(ContextEstimate.estimate(list, [], null, 40), all)
    const reported = { tokens: 1_000, messages: 6 }
    const since = ContextEstimate.charsOf(messages[6]!) + ContextEstimate.charsOf(messages[7]!)
    assert.strictEqual(ContextEstimate.estimate(list, [], reported, 40), 1_000 + Math.ceil(since / 4))
    const steer: Model.Message = { role: "user", content: "x".repeat(400) }
    assert.strictEqual(ContextEstimate.estimate(list, [steer], reported, 40), 1_000 + Math.ceil((since + 400) / 4))
    // A report about a longer conversation than this one (compacted since) is not used.
    assert.strictEqual(ContextEstimate.estimate(list, [], { tokens: 1, messages: 50 }, 40), all)
  })
})
