/**
 * The agents `troupe` serves when no `--agents` file is given.
 *
 * - With no model configured, on the scripted model, so everything works
 *   offline: `demo` (the default), with one server tool, `word_count`: each
 *   turn asks for it on the user's text, runs it, and answers
 *   `You said: <text> (<n> words)` (`1 word`), streamed word by word; and
 *   `assistant`, which echoes: `You said: <text>`.
 * - With an OpenAI-compatible model configured: `assistant`, a plain
 *   assistant on the deployment's default model (`TROUPE_MODEL`), without tools.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as ScriptedModel from "../layers/ScriptedModel.js"
import { Agent, ModelRef } from "../schema/Agent.js"
import type * as Model from "../services/Model.js"
import * as Tool from "../services/Tool.js"
import * as Toolkit from "../services/Toolkit.js"

/** The demo agent's tool: counts the words of a text. */
export const wordCount = Tool.make({
  name: "word_count",
  description: "Counts the words of a text.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.Number,
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ text }) => Effect.succeed(text.split(/\s+/).filter(Boolean).length)
})

/** The built-in offline agent. */
export const demo = new Agent({
  name: "demo",
  description: "A built-in demo on the scripted model: counts your words with a tool, then answers.",
  instructions: "Count the words of the user's message with word_count, then answer briefly.",
  model: new ModelRef({ name: "scripted" }),
  tools: [wordCount.spec]
})

/** The built-in agent on a configured model. */
export const assistant = new Agent({
  name: "assistant",
  description: "A helpful assistant on the configured model.",
  instructions: "You are a helpful assistant. Answer briefly and precisely.",
  model: new ModelRef({ name: "default" })
})

/** The server tools the built-in agents need. */
export const toolkit = Toolkit.layer([wordCount])

const lastUserText = (request: Model.Request): string =>
  [...request.messages].reverse().find((message) => message.role === "user")?.content ?? ""

/**
 * The scripted model's replies: the demo asks for `word_count`, then answers
 * with its result; any other agent on the scripted model echoes the user.
 */
export const scripts: ScriptedModel.Scripts = {
  fallback: (request): ScriptedModel.ScriptedReply => {
    const asked = lastUserText(request)
    if (request.agentName !== demo.name) return `You said: ${asked}`
    const last = request.messages[request.messages.length - 1]
    return last?.role === "tool"
      ? `You said: ${asked} (${last.content} ${last.content === "1" ? "word" : "words"})`
      : { toolCalls: [{ id: "call-1", name: wordCount.name, arguments: JSON.stringify({ text: asked }) }] }
  }
}
