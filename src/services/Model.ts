/**
 * The `Model` port: one streaming call to a language model. A call takes the
 * instructions, the conversation, the tools on offer and settings, and streams
 * text deltas, tool calls, usage and a finish reason.
 *
 * Layers: `ScriptedModel.layer` (deterministic, for tests, examples and the
 * embedded default) and `OpenAiCompatibleModel.layer` / `layerConfig` (Chat
 * Completions over HTTP: OpenAI, Mistral, vLLM, Ollama, llama.cpp…).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { ModelSettings, OutputSpec, ToolSpec } from "../schema/Agent.js"
import type { ModelError } from "../schema/Errors.js"
import type { SessionId, TurnId } from "../schema/Ids.js"

/** One message of the conversation sent to the model. */
export type Message =
  | { readonly role: "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content: string; readonly toolCalls?: ReadonlyArray<ToolCall> | undefined }
  | { readonly role: "tool"; readonly toolCallId: string; readonly content: string }

/** A tool call the model asked for; `arguments` is JSON text. */
export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** A model call. `sessionId`, `turnId` and `agentName` identify it; providers may ignore them. */
export interface Request {
  readonly model: string
  readonly instructions: string
  readonly messages: ReadonlyArray<Message>
  readonly tools: ReadonlyArray<ToolSpec>
  readonly settings: ModelSettings | undefined
  readonly sessionId: SessionId
  readonly turnId: TurnId
  readonly agentName: string
  /** `summary` for the call that summarizes the conversation (context compaction); absent for a turn's own calls. */
  readonly purpose?: "summary" | undefined
  /** The JSON Schema the reply's text must match (an agent's structured output), for providers that take one. */
  readonly output?: OutputSpec | undefined
}

/**
 * A request's messages as a session's history holds them: `items`' first
 * `length` entries, which never change (the history only grows past them),
 * then `rest` (the waiting steers and child results). A request made with one
 * (`withHistory`) says so (`historyOf`): a model that reads the messages again
 * per call (the scripted model counts their characters) reads only those past
 * what it read before, rather than walking the whole history per call.
 */
export interface History {
  readonly items: ReadonlyArray<Message>
  readonly length: number
  readonly rest: ReadonlyArray<Message>
}

const histories = new WeakMap<Request, History>()

/**
 * A request of `fields` whose messages are `history`'s, as an array of their own (a request may be
 * kept while the session goes on). Made at once: an array made only when first read (a getter) cost
 * far more garbage collection past 16,384 messages, where V8 puts such arrays in its large-object space.
 */
export const withHistory = (fields: Omit<Request, "messages">, history: History): Request => {
  const messages = history.items.slice(0, history.length)
  for (const message of history.rest) messages.push(message)
  const request: Request = { ...fields, messages }
  histories.set(request, history)
  return request
}

/** The history `request` was made of (`withHistory`), if it was. */
export const historyOf = (request: Request): History | undefined => histories.get(request)

/** Why the model stopped. */
export type FinishReason = "stop" | "tool_calls" | "length" | "content_filter" | "other"

/** One piece of a streamed reply. */
export type Event = Data.TaggedEnum<{
  TextDelta: { readonly text: string }
  ToolCallEvent: { readonly call: ToolCall }
  UsageEvent: { readonly inputTokens: number; readonly outputTokens: number }
  Finish: { readonly reason: FinishReason }
}>

/** Constructors for `Event`. */
export const Event = Data.taggedEnum<Event>()

/** The port. */
export class Model extends Context.Tag("troupe/Model")<
  Model,
  {
    /** Streams one model call. */
    readonly stream: (request: Request) => Stream.Stream<Event, ModelError>
    /**
     * The same call's events all at once, for providers that have the whole
     * reply before they return (no network stream): it spares the turn the
     * cost of a stream. The deltas are still published, just together.
     */
    readonly whole?: ((request: Request) => Effect.Effect<ReadonlyArray<Event>, ModelError>) | undefined
  }
>() {}

/** A whole reply, gathered from a stream. */
export interface Reply {
  readonly text: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly inputTokens: number
  readonly outputTokens: number
  readonly finishReason: FinishReason
}

/** An empty reply to gather events into. */
export const emptyReply: Reply = { text: "", toolCalls: [], inputTokens: 0, outputTokens: 0, finishReason: "other" }

/** Folds one event into a reply. */
export const gather = (reply: Reply, event: Event): Reply => {
  switch (event._tag) {
    case "TextDelta":
      return { ...reply, text: reply.text + event.text }
    case "ToolCallEvent":
      return { ...reply, toolCalls: [...reply.toolCalls, event.call] }
    case "UsageEvent":
      return {
        ...reply,
        inputTokens: reply.inputTokens + event.inputTokens,
        outputTokens: reply.outputTokens + event.outputTokens
      }
    case "Finish":
      return { ...reply, finishReason: event.reason }
  }
}
