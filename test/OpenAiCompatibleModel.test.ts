/**
 * The OpenAI-compatible model against a local server speaking the wire format
 * over real HTTP: streamed text, fragmented parallel tool calls, the request
 * it sends, retries before the first event, typed errors, SSE split at any
 * byte, and a whole troupe turn through it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, ConfigProvider, Duration, Effect, Either, FastCheck as fc, Layer, Redacted, Schema, Stream } from "effect"
import * as OpenAiCompatibleModel from "../src/layers/OpenAiCompatibleModel.js"
import { Agent, ModelRef, ModelSettings, outputOf, ToolSpec } from "../src/schema/Agent.js"
import type { ModelError } from "../src/schema/Errors.js"
import { SessionId, TurnId } from "../src/schema/Ids.js"
import * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { principal } from "./support/fixtures.js"
import * as OpenAiServer from "./support/openAiServer.js"

const { chunk } = OpenAiServer
const apiKey = "sk-test-5f2c9a7e1b3d4c6a8e0f"

/** The model layer pointed at `server`, with retries fast enough for a test. */
const modelLayer = (server: OpenAiServer.OpenAiServer, options: OpenAiCompatibleModel.Options = {}) =>
  OpenAiCompatibleModel.layer({
    baseUrl: server.baseUrl,
    apiKey: Redacted.make(apiKey),
    model: "gpt-test",
    ...options,
    retry: { base: "1 millis", ...options.retry }
  })

const request = (overrides: Partial<Model.Request> = {}): Model.Request => ({
  model: "gpt-test",
  instructions: "You are terse.",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  settings: undefined,
  sessionId: SessionId.make("ses_01J00000000000000000000000"),
  turnId: TurnId.make("turn_01J00000000000000000000000"),
  agentName: "assistant",
  ...overrides
})

/** Streams one call and returns the events it produced and how it ended. */
const call = (req: Model.Request = request()) =>
  Effect.gen(function*() {
    const model = yield* Model.Model
    const events: Array<Model.Event> = []
    const outcome = yield* model.stream(req).pipe(
      Stream.runForEach((event) => Effect.sync(() => void events.push(event))),
      Effect.either
    )
    return { events, outcome }
  })

/** Streams one call that must succeed. */
const events = (req: Model.Request = request()) =>
  Effect.flatMap(Model.Model, (model) => Stream.runCollect(model.stream(req))).pipe(Effect.map(Chunk.toArray))

/** Streams one call that must fail, returning its error. */
const modelError = (req: Model.Request = request()) =>
  Effect.flatMap(Model.Model, (model) => Stream.runDrain(model.stream(req))).pipe(
    Effect.flip,
    Effect.orElse(() => Effect.dieMessage("expected a ModelError, but the call succeeded"))
  )

const hello = [
  chunk.role(),
  chunk.text("Hel"),
  chunk.text("lo,"),
  chunk.text(" world"),
  chunk.finish("stop"),
  chunk.usage(9, 3)
]

const helloEvents = [
  Model.Event.TextDelta({ text: "Hel" }),
  Model.Event.TextDelta({ text: "lo," }),
  Model.Event.TextDelta({ text: " world" }),
  Model.Event.UsageEvent({ inputTokens: 9, outputTokens: 3 }),
  Model.Event.Finish({ reason: "stop" })
]

/** A configuration provider over a fixed set of environment variables. */
const environment = (values: Readonly<Record<string, string>>) => ConfigProvider.fromMap(new Map(Object.entries(values)))

const assertModelError = (
  error: ModelError,
  expected: { readonly retryable: boolean; readonly status?: number; readonly includes?: string }
) => {
  assert.strictEqual(error._tag, "ModelError")
  assert.strictEqual(error.retryable, expected.retryable, error.reason)
  assert.strictEqual(error.status, expected.status, error.reason)
  if (expected.includes !== undefined) assert.include(error.reason, expected.includes)
}

describe("OpenAiCompatibleModel", () => {
  describe("streaming", () => {
    it.scopedLive("text arrives as deltas in order, then usage, then the finish reason", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse(hello, { delayMs: 2 }))
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(result, helloEvents)
        const gathered = result.reduce(Model.gather, Model.emptyReply)
        assert.strictEqual(gathered.text, "Hello, world")
      }))

    it.scopedLive("parallel tool calls interleaved by index are gathered and emitted whole at the finish", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse([
          chunk.role(),
          chunk.text("Checking."),
          chunk.toolCall(0, { id: "call_weather", name: "get_weather", arguments: "" }),
          chunk.toolCall(0, { arguments: "{\"ci" }),
          chunk.toolCall(1, { id: "call_time", name: "get_time", arguments: "{\"tz\"" }),
          chunk.toolCall(0, { arguments: "ty\": \"Par" }),
          chunk.toolCall(1, { arguments: ": \"Europe/Paris\"}" }),
          chunk.toolCall(0, { arguments: "is\"}" }),
          chunk.toolCall(2, { id: "call_noargs", name: "list_files", arguments: "" }),
          chunk.finish("tool_calls"),
          chunk.usage(40, 25)
        ]))
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(result, [
          Model.Event.TextDelta({ text: "Checking." }),
          Model.Event.ToolCallEvent({ call: { id: "call_weather", name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }),
          Model.Event.ToolCallEvent({ call: { id: "call_time", name: "get_time", arguments: "{\"tz\": \"Europe/Paris\"}" } }),
          Model.Event.ToolCallEvent({ call: { id: "call_noargs", name: "list_files", arguments: "{}" } }),
          Model.Event.UsageEvent({ inputTokens: 40, outputTokens: 25 }),
          Model.Event.Finish({ reason: "tool_calls" })
        ])
      }))

    it.scopedLive("a tool name the API refuses (agents.spawn) goes out as agents_spawn, two that map onto one (kit.a_b, kit_a.b) get distinct ones, and calls come back under their own names", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse([
          chunk.toolCall(0, { id: "call_1", name: "agents_spawn", arguments: "{}" }),
          chunk.toolCall(1, { id: "call_2", name: "kit_a_b_2", arguments: "{}" }),
          chunk.toolCall(2, { id: "call_3", name: "kit_a_b", arguments: "{}" }),
          chunk.toolCall(3, { id: "call_4", name: "not_offered", arguments: "{}" }),
          chunk.finish("tool_calls")
        ]))
        const tool = (name: string) => new ToolSpec({ name, description: name, parameters: { type: "object" } })
        const history = (name: string, i: number) => [
          { role: "assistant" as const, content: "", toolCalls: [{ id: `call_0${i}`, name, arguments: "{}" }] },
          { role: "tool" as const, toolCallId: `call_0${i}`, content: "ok" }
        ]
        const result = yield* events(request({
          messages: [{ role: "user", content: "go" }, ...history("agents.spawn", 0), ...history("kit_a.b", 1)],
          tools: [tool("agents.spawn"), tool("kit.a_b"), tool("kit_a.b")]
        })).pipe(Effect.provide(modelLayer(server)))
        const [received] = yield* server.requests
        const body = received!.body as { tools: ReadonlyArray<{ function: { name: string } }>; messages: ReadonlyArray<{ tool_calls?: ReadonlyArray<{ function: { name: string } }> }> }
        assert.deepStrictEqual(body.tools.map((t) => t.function.name), ["agents_spawn", "kit_a_b", "kit_a_b_2"])
        assert.deepStrictEqual(body.messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.function.name)), ["agents_spawn", "kit_a_b_2"])
        assert.deepStrictEqual(
          result.flatMap((e) => (e._tag === "ToolCallEvent" ? [e.call.name] : [])),
          ["agents.spawn", "kit_a.b", "kit.a_b", "not_offered"]
        )
      }))

    it.scopedLive("finish reasons map onto the port's, and a stream that ends after one without [DONE] is complete", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        const reasons = [
          ["stop", "stop"],
          ["length", "length"],
          ["content_filter", "content_filter"],
          ["tool_calls", "tool_calls"],
          ["function_call", "tool_calls"],
          ["eos_token", "other"]
        ] as const
        for (const [wire] of reasons) {
          yield* server.enqueue(OpenAiServer.sse([chunk.text("x"), chunk.finish(wire)], { done: false }))
        }
        yield* Effect.gen(function*() {
          for (const [wire, mapped] of reasons) {
            const result = yield* events()
            assert.deepStrictEqual(result.at(-1), Model.Event.Finish({ reason: mapped }), wire)
          }
        }).pipe(Effect.provide(modelLayer(server)))
      }))

    it.scopedLive("tool calls from servers that omit `index` and `id` and say `stop` come out whole, with generated ids", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse([
          { choices: [{ delta: { tool_calls: [{ function: { name: "search", arguments: "{\"q\":" } }] } }] },
          { choices: [{ delta: { tool_calls: [{ function: { arguments: "\"effect\"}" } }] } }] },
          { choices: [{ delta: {}, finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: 4 } }
        ]))
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.strictEqual(result.length, 3)
        const [toolCall, usage, finish] = result
        assert(toolCall?._tag === "ToolCallEvent")
        assert.strictEqual(toolCall.call.name, "search")
        assert.strictEqual(toolCall.call.arguments, "{\"q\":\"effect\"}")
        assert.match(toolCall.call.id, /^call_[0-9a-f]{32}$/)
        assert.deepStrictEqual(usage, Model.Event.UsageEvent({ inputTokens: 3, outputTokens: 4 }))
        assert.deepStrictEqual(finish, Model.Event.Finish({ reason: "tool_calls" }))
      }))

    it.scopedLive("usage repeated in every chunk (vLLM's continuous stats) is reported once, the last", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        const withUsage = (body: object, prompt: number, completion: number) => ({
          ...body,
          usage: { prompt_tokens: prompt, completion_tokens: completion }
        })
        yield* server.enqueue(OpenAiServer.sse([
          withUsage(chunk.text("a"), 5, 1),
          withUsage(chunk.text("b"), 5, 2),
          withUsage(chunk.finish("stop"), 5, 2)
        ]))
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(result.filter((e) => e._tag === "UsageEvent"), [
          Model.Event.UsageEvent({ inputTokens: 5, outputTokens: 2 })
        ])
      }))

    it.scopedLive.prop(
      "SSE split at arbitrary byte boundaries, with CRLF, comments and multi-byte text, streams the same events",
      {
        cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 24 }),
        crlf: fc.boolean()
      },
      ({ crlf, cuts }) =>
        Effect.gen(function*() {
          const server = yield* OpenAiServer.make
          const eol = crlf ? "\r\n" : "\n"
          const text = `: keep-alive${eol}${eol}` + OpenAiServer.sseText([
            chunk.role(),
            chunk.text("Grüße, "),
            chunk.text("世界 🎭"),
            chunk.toolCall(0, { id: "call_1", name: "note", arguments: "{\"text\": \"é" }),
            chunk.toolCall(0, { arguments: "🎭\"}" }),
            chunk.finish("tool_calls"),
            chunk.usage(11, 7)
          ], { eol })
          const bytes = Buffer.byteLength(text)
          yield* server.enqueue(OpenAiServer.sseSplit(text, cuts.map((cut) => Math.floor(cut * bytes))))
          const result = yield* events().pipe(Effect.provide(modelLayer(server)))
          assert.deepStrictEqual(result, [
            Model.Event.TextDelta({ text: "Grüße, " }),
            Model.Event.TextDelta({ text: "世界 🎭" }),
            Model.Event.ToolCallEvent({ call: { id: "call_1", name: "note", arguments: "{\"text\": \"é🎭\"}" } }),
            Model.Event.UsageEvent({ inputTokens: 11, outputTokens: 7 }),
            Model.Event.Finish({ reason: "tool_calls" })
          ])
        }),
      { fastCheck: { numRuns: 25 } }
    )

    it.scopedLive("one byte per write streams the same events", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        const text = OpenAiServer.sseText([
          { choices: [{ delta: { content: "Hé" } }] },
          { choices: [{ delta: { content: "🎭" }, finish_reason: "stop" }], usage: { prompt_tokens: 2, completion_tokens: 1 } }
        ], { eol: "\r\n" })
        const cuts = Array.from({ length: Buffer.byteLength(text) }, (_, i) => i)
        yield* server.enqueue(OpenAiServer.sseSplit(text, cuts, 0))
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(result, [
          Model.Event.TextDelta({ text: "Hé" }),
          Model.Event.TextDelta({ text: "🎭" }),
          Model.Event.UsageEvent({ inputTokens: 2, outputTokens: 1 }),
          Model.Event.Finish({ reason: "stop" })
        ])
      }))
  })

  describe("the request", () => {
    it.scopedLive("carries the system message, the conversation, tools, settings, stream options and the bearer key", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse(hello))
        const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
        yield* events(request({
          model: "default",
          instructions: "You are a weather bot.",
          messages: [
            { role: "user", content: "Weather in Paris?" },
            {
              role: "assistant",
              content: "",
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }]
            },
            { role: "tool", toolCallId: "call_1", content: "{\"celsius\":21}" },
            { role: "assistant", content: "21 °C." },
            { role: "user", content: "Thanks!" }
          ],
          tools: [new ToolSpec({ name: "get_weather", description: "Current weather", parameters })],
          settings: new ModelSettings({ temperature: 0.2, topP: 0.9, maxOutputTokens: 256, seed: 7 })
        })).pipe(Effect.provide(modelLayer(server)))
        const [received] = yield* server.requests
        assert(received !== undefined)
        assert.strictEqual(received.method, "POST")
        assert.strictEqual(received.path, "/v1/chat/completions")
        assert.strictEqual(received.headers.authorization, `Bearer ${apiKey}`)
        assert.strictEqual(received.headers["content-type"], "application/json")
        assert.strictEqual(received.headers.accept, "text/event-stream")
        assert.isUndefined(received.headers.traceparent)
        assert.deepStrictEqual(received.body, {
          // The agent asked for "default": the configured model is used.
          model: "gpt-test",
          messages: [
            { role: "system", content: "You are a weather bot." },
            { role: "user", content: "Weather in Paris?" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{
                id: "call_1",
                type: "function",
                function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" }
              }]
            },
            { role: "tool", tool_call_id: "call_1", content: "{\"celsius\":21}" },
            { role: "assistant", content: "21 °C." },
            { role: "user", content: "Thanks!" }
          ],
          tools: [{ type: "function", function: { name: "get_weather", description: "Current weather", parameters } }],
          temperature: 0.2,
          top_p: 0.9,
          max_tokens: 256,
          seed: 7,
          stream: true,
          stream_options: { include_usage: true }
        })
      }))

    it.scopedLive("an explicit model name wins; max_completion_tokens and no stream_options when asked; no tools, no key when unset", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse(hello))
        yield* events(request({
          model: "llama3.2",
          instructions: "",
          settings: new ModelSettings({ maxOutputTokens: 64 })
        })).pipe(
          Effect.provide(OpenAiCompatibleModel.layer({
            baseUrl: `${server.baseUrl}/`,
            model: "gpt-test",
            maxTokensParameter: "max_completion_tokens",
            streamOptions: false,
            headers: { "x-gateway-route": "blue" }
          }))
        )
        const [received] = yield* server.requests
        assert(received !== undefined)
        assert.strictEqual(received.path, "/v1/chat/completions")
        assert.isUndefined(received.headers.authorization)
        assert.strictEqual(received.headers["x-gateway-route"], "blue")
        assert.deepStrictEqual(received.body, {
          model: "llama3.2",
          messages: [{ role: "user", content: "hi" }],
          max_completion_tokens: 64,
          stream: true
        })
      }))

    it.scopedLive("an agent's output schema goes out as a non-strict json_schema response_format, unless turned off", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse(hello))
        yield* server.enqueue(OpenAiServer.sse(hello))
        const output = outputOf(Schema.Struct({ total: Schema.Number }), { name: "invoice.v1" })
        yield* events(request({ output })).pipe(Effect.provide(modelLayer(server)))
        yield* events(request({ output })).pipe(Effect.provide(modelLayer(server, { responseFormat: false })))
        const [sent, plain] = yield* server.requests
        const body = sent!.body as { readonly response_format?: unknown }
        assert.deepStrictEqual(body.response_format, {
          type: "json_schema",
          json_schema: { name: "invoice_v1", schema: output.schema, strict: false }
        })
        assert.notProperty(plain!.body as object, "response_format")
      }))

    it.scopedLive("\"default\" with no configured model fails without calling the server", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        const error = yield* modelError(request({ model: "default" })).pipe(
          Effect.provide(OpenAiCompatibleModel.layer({ baseUrl: server.baseUrl }))
        )
        assertModelError(error, { retryable: false, includes: "TROUPE_MODEL" })
        assert.lengthOf(yield* server.requests, 0)
      }))
  })

  describe("retries", () => {
    it.scopedLive("a 429 is retried after its Retry-After, then the reply streams", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.error(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", {
            "retry-after-ms": "60"
          }),
          OpenAiServer.sse(hello)
        )
        const started = Date.now()
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.isAtLeast(Date.now() - started, 55)
        assert.deepStrictEqual(result, helloEvents)
        assert.lengthOf(yield* server.requests, 2)
      }))

    it.scopedLive("5xx on every attempt ends in a retryable ModelError with the last status", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.error(500, "The server had an error", "server_error", null),
          OpenAiServer.error(502, "Bad gateway", "server_error", null),
          OpenAiServer.error(503, "The engine is currently overloaded", "server_error", null),
          OpenAiServer.sse(hello)
        )
        const error = yield* modelError().pipe(Effect.provide(modelLayer(server, { retry: { times: 2 } })))
        assertModelError(error, { retryable: true, status: 503, includes: "The engine is currently overloaded" })
        // Three attempts: the first and two retries; the fourth reply was never asked for.
        assert.lengthOf(yield* server.requests, 3)
      }))

    it.scopedLive("a refused connection is retried, then reported as retryable", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        // Nothing listens on port 9 of localhost (discard), so every connection is refused.
        const error = yield* modelError().pipe(
          Effect.provide(modelLayer(server, { baseUrl: "http://127.0.0.1:9/v1", retry: { times: 1 } }))
        )
        assertModelError(error, { retryable: true, includes: "could not reach http://127.0.0.1:9" })
      }))

    it.scopedLive("a connection dropped before the first event is retried", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.sse([chunk.role()], { done: false, end: "destroy" }),
          OpenAiServer.sse(hello)
        )
        const result = yield* events().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(result, helloEvents)
        assert.lengthOf(yield* server.requests, 2)
      }))

    it.scopedLive("a server that goes quiet past the idle timeout is cut off and retried", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.sse([chunk.role()], { done: false, end: "hang" }),
          OpenAiServer.sse(hello)
        )
        const result = yield* events().pipe(Effect.provide(modelLayer(server, { idleTimeout: "150 millis" })))
        assert.deepStrictEqual(result, helloEvents)
        const [first, second] = yield* server.requests
        assert.isTrue(first?.aborted())
        assert.isFalse(second?.aborted())
      }))
  })

  describe("errors", () => {
    it.scopedLive("a 401 is not retried and carries the server's message, never the key", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.error(
            401,
            `Incorrect API key provided: ${apiKey}. You can find your API key at https://platform.openai.com/account/api-keys.`,
            "invalid_request_error",
            "invalid_api_key"
          ),
          OpenAiServer.sse(hello)
        )
        const error = yield* modelError().pipe(Effect.provide(modelLayer(server)))
        assertModelError(error, { retryable: false, status: 401, includes: "Incorrect API key provided" })
        assert.include(error.reason, "invalid_api_key")
        assert.notInclude(error.reason, apiKey)
        assert.notInclude(JSON.stringify(error), apiKey)
        assert.notInclude(String(error), apiKey)
        assert.lengthOf(yield* server.requests, 1)
      }))

    it.scopedLive("a 400 is a non-retryable ModelError with the server's message and code", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.error(400, "'messages' must contain at least one message", "invalid_request_error", "bad_messages")
        )
        const error = yield* modelError().pipe(Effect.provide(modelLayer(server)))
        assertModelError(error, {
          retryable: false,
          status: 400,
          includes: "HTTP 400: 'messages' must contain at least one message (bad_messages)"
        })
      }))

    it.scopedLive("a 429 for an exhausted quota is not retried", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.error(429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
          OpenAiServer.sse(hello)
        )
        const error = yield* modelError().pipe(Effect.provide(modelLayer(server)))
        assertModelError(error, { retryable: false, status: 429, includes: "exceeded your current quota" })
        assert.lengthOf(yield* server.requests, 1)
      }))

    it.scopedLive("error bodies that are not OpenAI's shape still give their message", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          { status: 404, headers: { "content-type": "application/json" }, parts: ["{\"error\":\"model 'llama9' not found\"}"] },
          { status: 422, headers: { "content-type": "application/json" }, parts: ["{\"detail\":\"temperature too high\"}"] },
          { status: 418, headers: { "content-type": "text/plain" }, parts: ["I'm a teapot"] },
          {
            status: 422,
            headers: { "content-type": "application/json" },
            parts: [JSON.stringify({
              object: "error",
              message: { detail: [{ type: "extra_forbidden", loc: ["body", "stream_options"], msg: "Extra inputs are not permitted" }] },
              type: "invalid_request_error",
              code: null
            })]
          }
        )
        yield* Effect.gen(function*() {
          assertModelError(yield* modelError(), {
            retryable: false,
            status: 404,
            includes: "model 'llama9' not found"
          })
          assertModelError(yield* modelError(), {
            retryable: false,
            status: 422,
            includes: "temperature too high"
          })
          assertModelError(yield* modelError(), {
            retryable: false,
            status: 418,
            includes: "I'm a teapot"
          })
          assertModelError(yield* modelError(), {
            retryable: false,
            status: 422,
            includes: "Extra inputs are not permitted"
          })
        }).pipe(Effect.provide(modelLayer(server)))
      }))

    it.scopedLive("a 200 with a JSON body instead of an event stream is a non-retryable ModelError", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          { headers: { "content-type": "application/json" }, parts: ["{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}"] },
          { headers: { "content-type": "application/json" }, parts: ["{\"error\":{\"message\":\"upstream exploded\"}}"] }
        )
        yield* Effect.gen(function*() {
          assertModelError(yield* modelError(), {
            retryable: false,
            status: 200,
            includes: "instead of an event stream"
          })
          assertModelError(yield* modelError(), {
            retryable: false,
            status: 200,
            includes: "upstream exploded"
          })
        }).pipe(Effect.provide(modelLayer(server)))
        assert.lengthOf(yield* server.requests, 2)
      }))

    it.scopedLive("a malformed JSON chunk is a non-retryable ModelError", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.sse([chunk.role(), "{\"choices\": [{\"delta\": {\"content\": \"oops\"", chunk.text("never")]),
          OpenAiServer.sse(hello)
        )
        const error = yield* modelError().pipe(Effect.provide(modelLayer(server)))
        assertModelError(error, { retryable: false, includes: "malformed stream chunk" })
        assert.lengthOf(yield* server.requests, 1)
      }))

    it.scopedLive("an error streamed after the 200 is a ModelError with its message", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse([
          chunk.text("partial"),
          { error: { object: "error", message: "CUDA out of memory", type: "InternalServerError", code: 500 } }
        ], { done: false }))
        const { events: seen, outcome } = yield* call().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(seen, [Model.Event.TextDelta({ text: "partial" })])
        assert(Either.isLeft(outcome))
        assertModelError(outcome.left, { retryable: true, status: 500, includes: "CUDA out of memory" })
        assert.lengthOf(yield* server.requests, 1)
      }))

    it.scopedLive("a stream cut mid-way fails after the events already streamed, and is not retried", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(
          OpenAiServer.sse([chunk.role(), chunk.text("Hel"), chunk.text("lo")], { done: false, end: "destroy" }),
          OpenAiServer.sse(hello)
        )
        const { events: seen, outcome } = yield* call().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(seen, [Model.Event.TextDelta({ text: "Hel" }), Model.Event.TextDelta({ text: "lo" })])
        assert(Either.isLeft(outcome))
        assertModelError(outcome.left, { retryable: true, includes: "connection was lost" })
        assert.lengthOf(yield* server.requests, 1)
      }))

    it.scopedLive("a body that ends cleanly before any finish reason is a truncated reply", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse([chunk.text("Hel")], { done: false }))
        const { events: seen, outcome } = yield* call().pipe(Effect.provide(modelLayer(server)))
        assert.deepStrictEqual(seen, [Model.Event.TextDelta({ text: "Hel" })])
        assert(Either.isLeft(outcome))
        assertModelError(outcome.left, { retryable: true, includes: "ended before the model finished" })
      }))

    it.scopedLive("a consumer that stops early closes the connection", () =>
      Effect.gen(function*() {
        const server = yield* OpenAiServer.make
        yield* server.enqueue(OpenAiServer.sse(
          [chunk.text("one"), ...Array.from({ length: 50 }, () => chunk.text(" more"))],
          { delayMs: 20 }
        ))
        const first = yield* Effect.flatMap(Model.Model, (model) => Stream.runCollect(Stream.take(model.stream(request()), 1))).pipe(
          Effect.provide(modelLayer(server))
        )
        assert.deepStrictEqual(Chunk.toArray(first), [Model.Event.TextDelta({ text: "one" })])
        const [received] = yield* server.requests
        yield* Effect.sleep("40 millis").pipe(Effect.repeat({ until: () => received?.aborted() === true, times: 50 }))
        assert.isTrue(received?.aborted())
      }))
  })

  it.scopedLive("a troupe turn through the model outputs the streamed text and records its usage", () =>
    Effect.gen(function*() {
      const server = yield* OpenAiServer.make
      yield* server.enqueue(OpenAiServer.sse(hello, { delayMs: 1 }))
      const result = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, {
          agent: new Agent({
            name: "assistant",
            instructions: "You are assistant.",
            model: new ModelRef({ name: "default", settings: new ModelSettings({ temperature: 0 }) })
          })
        })
        const accepted = yield* sessions.send(me, session.id, { text: "Say hello." })
        return yield* sessions.awaitTurn(me, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
      }).pipe(Effect.provide(Troupe.layerTest({ model: modelLayer(server) })))
      assert.strictEqual(result.output, "Hello, world")
      assert.strictEqual(result.usage.inputTokens, 9)
      assert.strictEqual(result.usage.outputTokens, 3)
      assert.strictEqual(result.usage.totalTokens, 12)
      assert.strictEqual(result.usage.modelCalls, 1)
      const [received] = yield* server.requests
      assert.deepStrictEqual(received?.body, {
        model: "gpt-test",
        messages: [{ role: "system", content: "You are assistant." }, { role: "user", content: "Say hello." }],
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true }
      })
    }))

  it.effect("layerConfig reads the base URL, the redacted key and the default model", () =>
    Effect.gen(function*() {
      const configured = yield* OpenAiCompatibleModel.config
      assert.strictEqual(configured.baseUrl, "http://localhost:11434/v1")
      assert(configured.apiKey !== undefined)
      assert.strictEqual(Redacted.value(configured.apiKey), "sk-local")
      assert.notInclude(String(configured.apiKey), "sk-local")
      assert.strictEqual(configured.model, "llama3.2")
      assert.strictEqual(configured.maxTokensParameter, "max_completion_tokens")
      assert.strictEqual(configured.streamOptions, false)
      assert.strictEqual(configured.idleTimeout?.toString(), Duration.seconds(90).toString())
      const defaults = yield* OpenAiCompatibleModel.config.pipe(
        Effect.withConfigProvider(environment({ TROUPE_MODEL_API_KEY: "" }))
      )
      assert.strictEqual(defaults.baseUrl, "https://api.openai.com/v1")
      assert.isUndefined(defaults.apiKey)
      assert.isUndefined(defaults.model)
      assert.isUndefined(defaults.maxTokensParameter)
      assert.isUndefined(defaults.streamOptions)
      // Building the layer from configuration succeeds without touching the network.
      yield* Layer.build(OpenAiCompatibleModel.layerConfig()).pipe(Effect.scoped)
    }).pipe(
      Effect.withConfigProvider(environment({
        TROUPE_MODEL_BASE_URL: "http://localhost:11434/v1",
        TROUPE_MODEL_API_KEY: "sk-local",
        TROUPE_MODEL: "llama3.2",
        TROUPE_MODEL_MAX_TOKENS_PARAMETER: "max_completion_tokens",
        TROUPE_MODEL_STREAM_OPTIONS: "false",
        TROUPE_MODEL_IDLE_TIMEOUT: "90 seconds"
      }))
    ))
})
