/**
 * How big the next model request is, in tokens, without a tokenizer: the
 * prompt tokens the model reported for its last call where known, plus about
 * one token per four characters of what was added since; with no report (none
 * yet, or the conversation was compacted since), four characters a token for
 * the whole request, instructions and tool specs included.
 *
 * @since 0.1.0
 */
import type { ToolSpec } from "../schema/Agent.js"
import type * as Model from "../services/Model.js"
import type * as AppendOnlyList from "./AppendOnlyList.js"

/** Characters per token of the estimate: what tokenizers average on English text and JSON. */
export const CHARS_PER_TOKEN = 4

/** What the model reported for a call: its prompt tokens, and how many messages that prompt had. */
export interface Reported {
  readonly tokens: number
  readonly messages: number
}

/** Tokens of `chars` characters. */
export const tokensOf = (chars: number): number => Math.ceil(chars / CHARS_PER_TOKEN)

/** The characters of one message as a request carries it: its text, and the names and arguments of its tool calls. */
export const charsOf = (message: Model.Message): number => {
  let chars = message.content.length
  if (message.role === "assistant" && message.toolCalls !== undefined) {
    for (const call of message.toolCalls) chars += call.name.length + call.arguments.length + call.id.length
  }
  return chars
}

/** The characters of each tool spec measured so far: a spec is immutable, and every turn of its agent measures it. */
const specChars = new WeakMap<ToolSpec, number>()

const charsOfSpec = (tool: ToolSpec): number => {
  let chars = specChars.get(tool)
  if (chars === undefined) {
    chars = tool.name.length + tool.description.length + JSON.stringify(tool.parameters).length
    specChars.set(tool, chars)
  }
  return chars
}

/** The characters every request of a turn carries besides its messages: instructions and tool specs. */
export const fixedChars = (instructions: string, tools: ReadonlyArray<ToolSpec>): number => {
  let chars = instructions.length
  for (const tool of tools) chars += charsOfSpec(tool)
  return chars
}

/**
 * The estimate of a request made of `transcript` then `waiting`: the report
 * plus what came after it when the report covers a prefix of the transcript,
 * else four characters a token of everything. Reads only what is new since
 * the report, so it costs next to nothing between compactions.
 */
export const estimate = (
  transcript: AppendOnlyList.AppendOnlyList<Model.Message>,
  waiting: ReadonlyArray<Model.Message>,
  reported: Reported | null,
  fixed: number
): number => {
  const known = reported !== null && reported.messages <= transcript.length
  let chars = known ? 0 : fixed
  for (let i = known ? reported.messages : 0; i < transcript.length; i++) chars += charsOf(transcript.items[i]!)
  for (const message of waiting) chars += charsOf(message)
  return (known ? reported.tokens : 0) + tokensOf(chars)
}

/** The estimate of a request of `messages` with no report. */
export const estimateAll = (messages: ReadonlyArray<Model.Message>, fixed: number): number => {
  let chars = fixed
  for (const message of messages) chars += charsOf(message)
  return tokensOf(chars)
}
