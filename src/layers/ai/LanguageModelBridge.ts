/**
 * A `Model` over `@effect/ai`'s `LanguageModel`, so any `@effect/ai` provider
 * layer (OpenAI, Anthropic, Google, Amazon Bedrock, OpenRouter…) can drive a
 * troupe turn. Instructions become the system message, the conversation
 * becomes a `Prompt`, and each `ToolSpec` becomes a user-defined tool whose
 * parameters are described by the spec's own JSON Schema; tool calls are never
 * resolved by `@effect/ai`, because troupe runs tools itself (permissions,
 * callbacks, budgets). `AiError`s become `ModelError`s, retryable only for
 * dropped connections and 408/429/5xx responses.
 *
 * Which model is called, and its sampling settings, are the provider layer's
 * business: `@effect/ai` has no provider-neutral place for them, so the
 * request's `model` and `settings` are not forwarded.
 *
 * The public module is `EffectAiModel`, which loads this one (and `@effect/ai`
 * under it) when the layer is built (decision 0049).
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ToolSpec } from "../../schema/Agent.js"
import { ModelError } from "../../schema/Errors.js"
import * as Model from "../../services/Model.js"

// Any JSON object decodes, keys kept: the spec's JSON Schema, not this
// schema, is what the model is shown, and troupe validates arguments itself.
const AnyArguments = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

/** The `@effect/ai` tool offered to the model for a troupe `ToolSpec`; its JSON Schema is the spec's. */
export const toolFromSpec = (spec: ToolSpec): Tool.Any =>
  Tool.make(spec.name, { description: spec.description }).setParameters(
    AnyArguments.annotations({ jsonSchema: jsonSchemaOf(spec) })
  )

// With a `type`, the annotation replaces the generated schema verbatim; without
// one (`{}`: no arguments), Effect would merge it into its own, whose
// `additionalProperties` is an Effect-specific `unknown` schema.
const jsonSchemaOf = (spec: ToolSpec): object =>
  "type" in spec.parameters ? spec.parameters : { type: "object", properties: {}, ...spec.parameters }

// Handlers are never called: every request sets `disableToolCallResolution`.
const toolkitOf = (tools: ReadonlyArray<ToolSpec>): Toolkit.WithHandler<Record<string, Tool.Any>> => {
  const record: Record<string, Tool.Any> = {}
  for (const spec of tools) record[spec.name] = toolFromSpec(spec)
  return {
    tools: record,
    handle: (name) => Effect.dieMessage(`EffectAiModel: tool ${String(name)} is run by troupe, not @effect/ai`)
  }
}

const parseArguments = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    // A model's malformed arguments are replayed as it wrote them.
    return text
  }
}

/** The `Prompt` for a request: the instructions as the system message, then the conversation. */
export const toPrompt = (request: Pick<Model.Request, "instructions" | "messages">): Prompt.Prompt => {
  const messages: Array<Prompt.Message> = []
  if (request.instructions.length > 0) {
    messages.push(Prompt.makeMessage("system", { content: request.instructions }))
  }
  // Troupe's tool results carry only the call id; providers that want the name get it from the call.
  const toolNames = new Map<string, string>()
  for (const message of request.messages) {
    switch (message.role) {
      case "user":
        messages.push(Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: message.content })] }))
        break
      case "assistant": {
        const content: Array<Prompt.AssistantMessagePart> = []
        if (message.content.length > 0 || !message.toolCalls?.length) {
          content.push(Prompt.makePart("text", { text: message.content }))
        }
        for (const call of message.toolCalls ?? []) {
          toolNames.set(call.id, call.name)
          content.push(Prompt.makePart("tool-call", {
            id: call.id,
            name: call.name,
            params: parseArguments(call.arguments),
            providerExecuted: false
          }))
        }
        messages.push(Prompt.makeMessage("assistant", { content }))
        break
      }
      case "tool":
        messages.push(Prompt.makeMessage("tool", {
          content: [Prompt.makePart("tool-result", {
            id: message.toolCallId,
            name: toolNames.get(message.toolCallId) ?? "",
            isFailure: false,
            result: message.content,
            providerExecuted: false
          })]
        }))
        break
    }
  }
  return Prompt.fromMessages(messages)
}

/** Troupe's name for an `@effect/ai` finish reason. */
export const finishReason = (reason: Response.FinishReason): Model.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "tool-calls":
      return "tool_calls"
    case "length":
      return "length"
    case "content-filter":
      return "content_filter"
    default:
      return "other"
  }
}

const isRetryableStatus = (status: number) => status === 408 || status === 429 || status >= 500

/** The `ModelError` for a failure of an `@effect/ai` call. */
export const toModelError = (error: unknown): ModelError => {
  if (AiError.isAiError(error)) {
    switch (error._tag) {
      case "HttpRequestError":
        return new ModelError({ reason: error.message, retryable: error.reason === "Transport" })
      case "HttpResponseError": {
        const status = error.response.status
        return new ModelError({
          reason: error.message,
          retryable: error.reason === "StatusCode" && isRetryableStatus(status),
          status
        })
      }
      default:
        return new ModelError({ reason: error.message, retryable: false })
    }
  }
  if (error instanceof Error) return new ModelError({ reason: error.message, retryable: false })
  return new ModelError({ reason: String(error), retryable: false })
}

const errorReason = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error) ?? String(error)

// One `@effect/ai` stream part as troupe events; parts troupe has no use for
// (text boundaries, reasoning, sources, streamed tool arguments, metadata) vanish.
const toEvents = (part: Response.StreamPart<Record<string, Tool.Any>>): Effect.Effect<
  ReadonlyArray<Model.Event>,
  ModelError
> => {
  switch (part.type) {
    case "text-delta":
      return Effect.succeed(part.delta.length > 0 ? [Model.Event.TextDelta({ text: part.delta })] : [])
    case "tool-call":
      // A provider-executed tool (web search…) already ran; its result is the provider's text.
      return Effect.succeed(
        part.providerExecuted
          ? []
          : [Model.Event.ToolCallEvent({
            call: { id: part.id, name: part.name, arguments: JSON.stringify(part.params ?? {}) }
          })]
      )
    case "finish":
      return Effect.succeed([
        Model.Event.UsageEvent({
          inputTokens: part.usage.inputTokens ?? 0,
          outputTokens: part.usage.outputTokens ?? 0
        }),
        Model.Event.Finish({ reason: finishReason(part.reason) })
      ])
    case "error":
      return Effect.fail(new ModelError({ reason: errorReason(part.error), retryable: false }))
    default:
      return Effect.succeed([])
  }
}

/** Builds the model from the `LanguageModel` in context. */
export const make = Effect.gen(function*() {
  const languageModel = yield* LanguageModel.LanguageModel
  return Model.Model.of({
    stream: (request) => {
      const prompt = toPrompt(request)
      const parts = request.tools.length > 0
        ? languageModel.streamText({
          prompt,
          toolkit: toolkitOf(request.tools),
          disableToolCallResolution: true
        })
        : languageModel.streamText({ prompt })
      return parts.pipe(
        Stream.mapError(toModelError),
        Stream.mapEffect(toEvents),
        Stream.mapConcatChunk(Chunk.unsafeFromArray),
        Stream.withSpan("EffectAiModel.stream", { attributes: { model: request.model, agent: request.agentName } })
      )
    }
  })
})

/** A `Model` layer over any `@effect/ai` provider's `LanguageModel`. */
export const layer: Layer.Layer<Model.Model, never, LanguageModel.LanguageModel> = Layer.effect(Model.Model, make)
