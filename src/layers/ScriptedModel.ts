/**
 * A deterministic `Model`: replies come from scripts keyed by session or by
 * agent name, in order, one per model call (the last reply repeats once a
 * script runs out); the summary calls of context compaction have an answer of
 * their own. Text is streamed word by word; output usage is counted in words,
 * input usage as a quarter of the prompt's characters.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { ModelError } from "../schema/Errors.js"
import * as Model from "../services/Model.js"

/** One scripted reply: plain text, or text with tool calls, or a failure. */
export type ScriptedReply =
  | string
  | { readonly text?: string; readonly toolCalls?: ReadonlyArray<Model.ToolCall> }
  | { readonly fail: string; readonly retryable?: boolean }

/** Where replies come from. Session scripts win over agent scripts, which win over `fallback`. */
export interface Scripts {
  readonly sessions?: Readonly<Record<string, ReadonlyArray<ScriptedReply>>>
  readonly agents?: Readonly<Record<string, ReadonlyArray<ScriptedReply>>>
  /** Used when no script names the call; by default echoes the last user message. */
  readonly fallback?: (request: Model.Request) => ScriptedReply
  /**
   * Answers the calls that summarize a conversation (`purpose: "summary"`);
   * by default the head and tail of the text to summarize. Scripts never see them.
   */
  readonly summarize?: (request: Model.Request) => ScriptedReply
}

const summarizeByDefault = (request: Model.Request): ScriptedReply => {
  const text = request.messages.map((m) => m.content).join("\n")
  return text.length <= 400 ? `Summary: ${text}` : `Summary: ${text.slice(0, 200)} … ${text.slice(-200)}`
}

const echo = (request: Model.Request): ScriptedReply => {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role === "user") return `You said: ${message.content}`
  }
  return "Hello."
}

const words = (text: string) => text.split(/(?<= )/)

/** Builds a scripted model; each script advances once per call. */
export const make = (scripts: Scripts = {}) =>
  Effect.sync(() => {
    const positions = new Map<string, number>()
    const next = (key: string, script: ReadonlyArray<ScriptedReply>): ScriptedReply => {
      const position = positions.get(key) ?? 0
      positions.set(key, position + 1)
      return script[Math.min(position, script.length - 1)]!
    }
    // A session's prompts share their history's message objects (never changed once made). A request
    // made of a history (`Model.historyOf`) counts only its messages past those counted before, kept
    // by the history's array: no walk of the whole history per call.
    const countedHistories = new WeakMap<ReadonlyArray<Model.Message>, { readonly length: number; readonly characters: number }>()
    const fromHistory = (history: Model.History): number => {
      const { items, length, rest } = history
      const before = countedHistories.get(items)
      let from = 0
      let total = 0
      if (before !== undefined && before.length <= length) {
        from = before.length
        total = before.characters
      }
      for (let i = from; i < length; i++) total += items[i]!.content.length
      countedHistories.set(items, { length, characters: total })
      for (const message of rest) total += message.content.length
      return total
    }
    // Otherwise a prompt that starts with the previous one's messages (kept by its first message, so it
    // goes with it) counts only those after them.
    const counted = new WeakMap<Model.Message, { readonly messages: ReadonlyArray<Model.Message>; readonly characters: number }>()
    const characters = (request: Model.Request): number => {
      const history = Model.historyOf(request)
      if (history !== undefined) return fromHistory(history)
      const { messages } = request
      const first = messages[0]
      if (first === undefined) return 0
      const before = counted.get(first)
      let from = 0
      let total = 0
      if (before !== undefined && before.messages.length <= messages.length) {
        const prefix = before.messages
        let i = 0
        while (i < prefix.length && prefix[i] === messages[i]) i++
        if (i === prefix.length) {
          from = i
          total = before.characters
        }
      }
      for (let i = from; i < messages.length; i++) total += messages[i]!.content.length
      counted.set(first, { messages, characters: total })
      return total
    }
    const pick = (request: Model.Request): ScriptedReply => {
      if (request.purpose === "summary") return (scripts.summarize ?? summarizeByDefault)(request)
      const bySession = scripts.sessions?.[request.sessionId]
      if (bySession && bySession.length > 0) return next(`s:${request.sessionId}`, bySession)
      const byAgent = scripts.agents?.[request.agentName]
      if (byAgent && byAgent.length > 0) return next(`a:${request.sessionId}:${request.agentName}`, byAgent)
      return (scripts.fallback ?? echo)(request)
    }
    const reply = (request: Model.Request): Effect.Effect<ReadonlyArray<Model.Event>, ModelError> =>
      Effect.suspend(() => {
        const reply = pick(request)
        if (typeof reply !== "string" && "fail" in reply) {
          return Effect.fail(new ModelError({ reason: reply.fail, retryable: reply.retryable ?? false }))
        }
        const text = typeof reply === "string" ? reply : reply.text ?? ""
        const toolCalls = typeof reply === "string" ? [] : reply.toolCalls ?? []
        // About four characters a token, as real tokenizers average on English.
        const inputTokens = Math.ceil((request.instructions.length + characters(request)) / 4)
        const events: Array<Model.Event> = []
        if (text.length > 0) for (const word of words(text)) events.push(Model.Event.TextDelta({ text: word }))
        for (const call of toolCalls) events.push(Model.Event.ToolCallEvent({ call }))
        events.push(Model.Event.UsageEvent({ inputTokens, outputTokens: text.length > 0 ? words(text).length : 0 }))
        events.push(Model.Event.Finish({ reason: toolCalls.length > 0 ? "tool_calls" : "stop" }))
        return Effect.succeed(events)
      })
    return Model.Model.of({
      stream: (request) => Stream.unwrap(Effect.map(reply(request), (events) => Stream.fromChunk(Chunk.unsafeFromArray(events)))),
      whole: reply
    })
  })

/** A scripted model layer. */
export const layer = (scripts: Scripts = {}): Layer.Layer<Model.Model> => Layer.effect(Model.Model, make(scripts))
