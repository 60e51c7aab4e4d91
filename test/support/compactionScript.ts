/**
 * One turn that outgrows its context, shared by test/Compactor.test.ts and
 * the crash test's child process (test/support/crashCompaction.ts): the model
 * fetches two 20,000-character pages (tool `fetch`, archivable), then recalls
 * notes of 6,000 characters whose results must be preserved (tool `recall`),
 * until only a summary can bring the request under the threshold; then it
 * reads the first page back through `read_artifact`, twice (the head, and
 * from offset 16,000 to the end), and answers.
 *
 * Every reply is a function of the request alone (its last message), so a
 * process that resumes the turn gets the replies the killed one would have.
 */
import { Effect, Schema } from "effect"
import type * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import { CompactionSettings } from "../../src/schema/Compaction.js"
import type * as Model from "../../src/services/Model.js"
import * as Tool from "../../src/services/Tool.js"

/** The full text of page `name`: 20,000 characters, different at every position that matters. */
export const page = (name: string): string => {
  const head = `PAGE ${name}: `
  let body = ""
  for (let i = 0; body.length < 20_000 - head.length; i++) body += `${name}${i} `
  return (head + body).slice(0, 20_000)
}

/** The text of note `n`: 6,000 characters. */
export const note = (n: number): string => `RECALL ${n}: ${"remember this. ".repeat(500)}`.slice(0, 6_000)

/** How many notes the model recalls before it reads the page back. */
export const NOTES = 6

export const fetchTool = Tool.make({
  name: "fetch",
  description: "Fetches a page.",
  parameters: Schema.Struct({ page: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "read", idempotency: "supported" },
  handler: ({ page: name }) => Effect.succeed(page(name))
})

export const recallTool = Tool.make({
  name: "recall",
  description: "Recalls a note; its text must be kept whole.",
  parameters: Schema.Struct({ n: Schema.Number }),
  success: Schema.String,
  metadata: { sideEffect: "read", idempotency: "supported", preserveResult: true },
  handler: ({ n }) => Effect.succeed(note(n))
})

/** 10,000-token window, 1,000 reserved for output, 1,000 buffer: compacted above 8,000 tokens. */
export const settings = new CompactionSettings({
  contextWindow: 10_000,
  reservedOutputTokens: 1_000,
  bufferTokens: 1_000,
  archiveMinChars: 2_000,
  keepRecentCycles: 1,
  keepRecentMessages: 3,
  excerptChars: 100
})

/** The threshold of `settings`, in tokens. */
export const THRESHOLD = 8_000

export const agent = new Agent({
  name: "reader",
  instructions: "Read, recall, read back.",
  model: new ModelRef({ name: "scripted" }),
  tools: [fetchTool.spec, recallTool.spec],
  compaction: settings
})

/** The first artifact id the request mentions (in a marker, or in a summary that kept it). */
export const artifactIn = (request: Model.Request): string | undefined => {
  for (const message of request.messages) {
    const found = /artifact="(op_[0-9A-Z]{26})"|(op_[0-9A-Z]{26})/.exec(message.content)
    if (found !== null) return found[1] ?? found[2]
  }
  return undefined
}

const call = (id: string, name: string, args: unknown): ScriptedModel.ScriptedReply => ({
  toolCalls: [{ id, name, arguments: JSON.stringify(args) }]
})

/** The turn's next reply, from its request's last message. */
export const reply = (request: Model.Request): ScriptedModel.ScriptedReply => {
  const last = request.messages.at(-1)
  if (last === undefined || last.role !== "tool") return call("c-fetch-a", "fetch", { page: "a" })
  const content = last.content
  if (content.startsWith("PAGE a:")) return call("c-fetch-b", "fetch", { page: "b" })
  if (content.startsWith("PAGE b:")) return call("c-recall-1", "recall", { n: 1 })
  const recalled = /^RECALL (\d+):/.exec(content)
  if (recalled !== null) {
    const n = Number(recalled[1])
    if (n < NOTES) return call(`c-recall-${n + 1}`, "recall", { n: n + 1 })
    return call("c-read-1", "read_artifact", { artifactId: artifactIn(request) ?? "missing" })
  }
  if (content.startsWith("[artifact ") && content.includes("offset\": 8000")) {
    return call("c-read-2", "read_artifact", { artifactId: artifactIn(request) ?? "missing", offset: 16_000 })
  }
  return "read back"
}

/** The summary: the artifact ids it was shown, and how many notes it saw. */
export const summarize = (request: Model.Request): ScriptedModel.ScriptedReply => {
  const text = request.messages.map((m) => m.content).join("\n")
  const artifacts = [...new Set(text.match(/op_[0-9A-Z]{26}/g) ?? [])]
  const notes = (text.match(/RECALL \d+:/g) ?? []).length
  return `The user asked to read pages a and b (archived as ${artifacts.join(", ")}); ${notes} notes were recalled.`
}

/** Scripts for the scripted model. */
export const scripts: ScriptedModel.Scripts = { fallback: reply, summarize }
