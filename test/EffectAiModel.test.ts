/**
 * The `@effect/ai` adapter against a scripted provider built with
 * `LanguageModel.make` (the way `@effect/ai` providers are made): streamed
 * text, tool calls, usage and finish, the prompt and tools the provider
 * receives, error mapping, and a whole troupe turn through it.
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Schema, Stream } from "effect"
import * as EffectAiModel from "../src/layers/EffectAiModel.js"
import { Agent, ModelRef, ToolSpec } from "../src/schema/Agent.js"
import type { ModelError } from "../src/schema/Errors.js"
import { SessionId, TurnId } from "../src/schema/Ids.js"
import * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { principal } from "./support/fixtures.js"

/** One scripted provider reply: encoded stream parts, or a failure. */
type Reply = ReadonlyArray<Response.StreamPartEncoded> | AiError.AiError

/** A fake provider: replies in order (the last repeats), every call's options kept. */
const fakeProvider = (replies: ReadonlyArray<Reply>) => {
  const calls: Array<LanguageModel.ProviderOptions> = []
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.succeed([]),
      streamText: (options) =>
        Stream.suspend(() => {
          calls.push(options)
          const reply = replies[Math.min(calls.length - 1, replies.length - 1)]!
          return AiError.isAiError(reply) ? Stream.fail(reply) : Stream.fromIterable(reply)
        })
    })
  )
  return { calls, layer }
}

const usage = (inputTokens: number, outputTokens: number) => ({
  inputTokens,
  outputTokens,
  totalTokens: inputTokens + outputTokens
})

const request = (overrides: Partial<Model.Request> = {}): Model.Request => ({
  model: "any",
  instructions: "You are terse.",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  settings: undefined,
  sessionId: SessionId.make("ses_01J00000000000000000000000"),
  turnId: TurnId.make("turn_01J00000000000000000000000"),
  agentName: "assistant",
  ...overrides
})

/** Streams one call through the adapter over `replies`; returns the events or the error, and the provider's calls. */
const call = (replies: ReadonlyArray<Reply>, req: Model.Request = request()) => {
  const provider = fakeProvider(replies)
  return Effect.gen(function*() {
    const model = yield* Model.Model
    const outcome = yield* model.stream(req).pipe(Stream.runCollect, Effect.map((chunk) => [...chunk]), Effect.either)
    return { outcome, calls: provider.calls }
  }).pipe(Effect.provide(EffectAiModel.layer.pipe(Layer.provide(provider.layer))))
}

const events = (outcome: Either.Either<Array<Model.Event>, ModelError>) => {
  assert(Either.isRight(outcome), `expected events, got ${Either.isLeft(outcome) ? outcome.left.message : ""}`)
  return outcome.right
}

const failure = (outcome: Either.Either<Array<Model.Event>, ModelError>) => {
  assert(Either.isLeft(outcome), "expected a failure")
  return outcome.left
}

const request_ = {
  method: "POST" as const,
  url: "https://api.example.test/v1/responses",
  urlParams: [],
  hash: Option.none<string>(),
  headers: {}
}

const httpStatus = (status: number) =>
  new AiError.HttpResponseError({
    module: "Fake",
    method: "streamText",
    reason: "StatusCode",
    request: request_,
    response: { status, headers: {} },
    description: `status ${status}`
  })

describe("EffectAiModel", () => {
  it.effect("text deltas arrive in order, then usage, then the finish reason", () =>
    Effect.gen(function*() {
      const { outcome } = yield* call([[
        { type: "response-metadata", id: "r1", modelId: "fake", timestamp: undefined },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Hello" },
        { type: "text-delta", id: "t", delta: "" },
        { type: "text-delta", id: "t", delta: ", " },
        { type: "text-delta", id: "t", delta: "world" },
        { type: "text-end", id: "t" },
        { type: "finish", reason: "stop", usage: usage(12, 3) }
      ]])
      assert.deepStrictEqual(events(outcome), [
        Model.Event.TextDelta({ text: "Hello" }),
        Model.Event.TextDelta({ text: ", " }),
        Model.Event.TextDelta({ text: "world" }),
        Model.Event.UsageEvent({ inputTokens: 12, outputTokens: 3 }),
        Model.Event.Finish({ reason: "stop" })
      ])
    }))

  it.effect("tool calls become troupe tool calls with JSON arguments, and are not run by @effect/ai", () =>
    Effect.gen(function*() {
      const parameters: Record<string, unknown> = {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city"],
        additionalProperties: false
      }
      const { outcome, calls } = yield* call(
        [[
          { type: "tool-params-start", id: "c1", name: "get_weather" },
          { type: "tool-params-delta", id: "c1", delta: "{\"city\":\"Paris\"}" },
          { type: "tool-params-end", id: "c1" },
          { type: "tool-call", id: "c1", name: "get_weather", params: { city: "Paris", days: 2, extra: [1] } },
          { type: "tool-call", id: "c2", name: "get_time", params: {} },
          { type: "finish", reason: "tool-calls", usage: usage(30, 8) }
        ]],
        request({
          tools: [
            new ToolSpec({ name: "get_weather", description: "Current weather", parameters }),
            new ToolSpec({ name: "get_time", description: "The time", parameters: {} })
          ]
        })
      )
      assert.deepStrictEqual(events(outcome), [
        Model.Event.ToolCallEvent({
          call: { id: "c1", name: "get_weather", arguments: "{\"city\":\"Paris\",\"days\":2,\"extra\":[1]}" }
        }),
        Model.Event.ToolCallEvent({ call: { id: "c2", name: "get_time", arguments: "{}" } }),
        Model.Event.UsageEvent({ inputTokens: 30, outputTokens: 8 }),
        Model.Event.Finish({ reason: "tool_calls" })
      ])
      // The provider sees the specs' own JSON Schemas and may choose freely.
      const [options] = calls
      assert(options !== undefined)
      assert.strictEqual(options.toolChoice, "auto")
      const offered: unknown = options.tools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        parameters: Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast)
      }))
      assert.deepStrictEqual(
        offered,
        [
          { name: "get_weather", description: "Current weather", parameters },
          {
            name: "get_time",
            description: "The time",
            parameters: { type: "object", properties: {} }
          }
        ]
      )
    }))

  it.effect("the provider receives the instructions as the system message, then the conversation", () =>
    Effect.gen(function*() {
      const { calls } = yield* call(
        [[{ type: "finish", reason: "stop", usage: usage(1, 0) }]],
        request({
          messages: [
            { role: "user", content: "Weather in Paris?" },
            {
              role: "assistant",
              content: "Checking.",
              toolCalls: [{ id: "c1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }]
            },
            { role: "tool", toolCallId: "c1", content: "{\"temp\":21}" },
            { role: "assistant", content: "21°C." },
            { role: "user", content: "Thanks" }
          ]
        })
      )
      const [options] = calls
      assert(options !== undefined)
      assert.deepStrictEqual(options.tools, [])
      assert.strictEqual(options.toolChoice, "none")
      // Encoded, as a provider serializes it; empty provider options left out.
      const plain: unknown = JSON.parse(JSON.stringify(
        Schema.encodeSync(Prompt.Prompt)(options.prompt).content,
        (key, value) => key === "options" ? undefined : value
      ))
      assert.deepStrictEqual(plain, [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Checking." },
            { type: "tool-call", id: "c1", name: "get_weather", params: { city: "Paris" }, providerExecuted: false }
          ]
        },
        {
          role: "tool",
          content: [{
            type: "tool-result",
            id: "c1",
            name: "get_weather",
            isFailure: false,
            result: "{\"temp\":21}",
            providerExecuted: false
          }]
        },
        { role: "assistant", content: "21°C." },
        { role: "user", content: "Thanks" }
      ])
    }))

  it.effect("finish reasons map onto troupe's; missing usage counts as zero", () =>
    Effect.gen(function*() {
      const reasons: Array<[Response.FinishReason, Model.FinishReason]> = [
        ["stop", "stop"],
        ["tool-calls", "tool_calls"],
        ["length", "length"],
        ["content-filter", "content_filter"],
        ["error", "other"],
        ["pause", "other"],
        ["other", "other"],
        ["unknown", "other"]
      ]
      for (const [reason, expected] of reasons) {
        const { outcome } = yield* call([[{
          type: "finish",
          reason,
          usage: { inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }
        }]])
        assert.deepStrictEqual(events(outcome), [
          Model.Event.UsageEvent({ inputTokens: 0, outputTokens: 0 }),
          Model.Event.Finish({ reason: expected })
        ])
      }
    }))

  it.effect("AiErrors become ModelErrors, retryable only when transient", () =>
    Effect.gen(function*() {
      const rateLimited = failure((yield* call([httpStatus(429)])).outcome)
      assert.strictEqual(rateLimited._tag, "ModelError")
      assert.isTrue(rateLimited.retryable)
      assert.strictEqual(rateLimited.status, 429)
      assert.include(rateLimited.reason, "status 429")

      const serverError = failure((yield* call([httpStatus(503)])).outcome)
      assert.isTrue(serverError.retryable)
      assert.strictEqual(serverError.status, 503)

      const badRequest = failure((yield* call([httpStatus(400)])).outcome)
      assert.isFalse(badRequest.retryable)
      assert.strictEqual(badRequest.status, 400)

      const transport = failure(
        (yield* call([
          new AiError.HttpRequestError({
            module: "Fake",
            method: "streamText",
            reason: "Transport",
            request: request_,
            description: "connection reset"
          })
        ])).outcome
      )
      assert.isTrue(transport.retryable)
      assert.strictEqual(transport.status, undefined)

      const unknown = failure(
        (yield* call([
          new AiError.UnknownError({ module: "Fake", method: "streamText", description: "boom" })
        ])).outcome
      )
      assert.isFalse(unknown.retryable)
      assert.include(unknown.reason, "boom")
    }))

  it.effect("an error part in the stream fails the call after the events before it", () =>
    Effect.gen(function*() {
      const provider = fakeProvider([[
        { type: "text-delta", id: "t", delta: "Hel" },
        { type: "error", error: { message: "overloaded" } }
      ]])
      const seen: Array<Model.Event> = []
      const error = yield* Effect.flip(
        Effect.gen(function*() {
          const model = yield* Model.Model
          yield* model.stream(request()).pipe(Stream.runForEach((event) => Effect.sync(() => void seen.push(event))))
        }).pipe(Effect.provide(EffectAiModel.layer.pipe(Layer.provide(provider.layer))))
      )
      assert.deepStrictEqual(seen, [Model.Event.TextDelta({ text: "Hel" })])
      assert.isFalse(error.retryable)
      assert.include(error.reason, "overloaded")
    }))

  it.effect("malformed tool-call parts from the provider become a ModelError", () =>
    Effect.gen(function*() {
      const { outcome } = yield* call(
        [[{ type: "tool-call", id: "c1", name: "get_weather", params: "not an object" }]],
        request({ tools: [new ToolSpec({ name: "get_weather", description: "w", parameters: { type: "object" } })] })
      )
      const error = failure(outcome)
      assert.isFalse(error.retryable)
    }))

  it.effect("a troupe turn through an @effect/ai provider outputs the streamed text and records its usage", () =>
    Effect.gen(function*() {
      const provider = fakeProvider([[
        { type: "text-delta", id: "t", delta: "Hello" },
        { type: "text-delta", id: "t", delta: ", world" },
        { type: "finish", reason: "stop", usage: usage(9, 3) }
      ]])
      const result = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, {
          agent: new Agent({
            name: "assistant",
            instructions: "You are assistant.",
            model: new ModelRef({ name: "default" })
          })
        })
        const accepted = yield* sessions.send(me, session.id, { text: "Say hello." })
        return yield* sessions.awaitTurn(me, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
      }).pipe(
        Effect.provide(Troupe.layerTest({ model: EffectAiModel.layer.pipe(Layer.provide(provider.layer)) }))
      )
      assert.strictEqual(result.output, "Hello, world")
      assert.strictEqual(result.usage.inputTokens, 9)
      assert.strictEqual(result.usage.outputTokens, 3)
      assert.strictEqual(result.usage.modelCalls, 1)
      const [options] = provider.calls
      assert(options !== undefined)
      assert.deepStrictEqual(
        options.prompt.content.map((message) => message.role),
        ["system", "user"]
      )
      assert.strictEqual(options.prompt.content[0]?.content, "You are assistant.")
    }))
})
