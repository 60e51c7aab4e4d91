/**
 * A `Model` over the OpenAI Chat Completions wire format, streamed as
 * server-sent events: OpenAI itself, Mistral, vLLM, Ollama, llama.cpp,
 * LM Studio and the other servers that speak it. Rate limits (429), server
 * errors (5xx), timeouts and dropped connections are retried with exponential
 * backoff, but only until the first event of a reply has been streamed;
 * everything else is a `ModelError` carrying the server's message (with the
 * API key scrubbed from it).
 *
 * @since 0.1.0
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import type * as ConfigError from "effect/ConfigError"
import { ModelError } from "../schema/Errors.js"
import * as Model from "../services/Model.js"

/** The base URL used when none is configured. */
export const defaultBaseUrl = "https://api.openai.com/v1"

/** Model names that mean "the configured default model". */
export const defaultModelNames: ReadonlyArray<string> = ["", "default"]

/** How failed calls are retried before any event of the reply has been streamed. */
export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  readonly times?: number | undefined
  /** The first backoff delay; each retry doubles it, with jitter (default 200 ms). */
  readonly base?: Duration.DurationInput | undefined
  /** No wait exceeds this, `Retry-After` included (default 30 s). */
  readonly maxDelay?: Duration.DurationInput | undefined
}

/** Options of the layer. */
export interface Options {
  /** Everything before `/chat/completions`, e.g. `http://localhost:11434/v1` (default: OpenAI's). */
  readonly baseUrl?: string | undefined
  /** Sent as `Authorization: Bearer …`; local servers usually need none. */
  readonly apiKey?: Redacted.Redacted | undefined
  /** The model used when an agent's model name is `"default"` (or empty). */
  readonly model?: string | undefined
  /**
   * The request field for `maxOutputTokens`: `max_tokens` (default; what most
   * compatible servers read) or `max_completion_tokens` (what OpenAI's
   * reasoning models require).
   */
  readonly maxTokensParameter?: "max_tokens" | "max_completion_tokens" | undefined
  /**
   * Ask for usage with `stream_options: { include_usage: true }` (default true).
   * Turn it off for servers that reject the field (Mistral's API does, and
   * reports usage in its last chunk anyway).
   */
  readonly streamOptions?: boolean | undefined
  /**
   * Send an agent's output schema as `response_format: { type: "json_schema" }`
   * (default true). Turn it off for servers that reject the field; the output
   * is checked, and sent back when it does not match, all the same.
   */
  readonly responseFormat?: boolean | undefined
  /** Extra request headers (e.g. `OpenAI-Organization`, a gateway's routing header). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Backoff for 408, 429, 5xx, timeouts and lost connections (default: 3 retries from 200 ms). */
  readonly retry?: RetryOptions | undefined
  /**
   * The longest wait for the response headers, and between two reads of the
   * streamed body, before the attempt counts as failed (default 15 seconds,
   * so that with its retries a hung server is reported within about a minute;
   * a local server that spends minutes on a long prompt before the first byte
   * needs more).
   */
  readonly idleTimeout?: Duration.DurationInput | undefined
}

// ---------------------------------------------------------------------------
// The wire format: what is sent and what streams back.

interface WireToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

type WireMessage =
  | { readonly role: "system" | "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content: string | null; readonly tool_calls?: ReadonlyArray<WireToolCall> }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

const Nullable = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

const ToolCallDelta = Schema.Struct({
  index: Nullable(Schema.Number),
  id: Nullable(Schema.String),
  function: Nullable(Schema.Struct({ name: Nullable(Schema.String), arguments: Nullable(Schema.String) }))
})

const StreamChunk = Schema.Struct({
  choices: Nullable(Schema.Array(Schema.Struct({
    index: Nullable(Schema.Number),
    // A string everywhere but in Mistral's reasoning models, which stream an array of typed parts.
    delta: Nullable(Schema.Struct({ content: Nullable(Schema.Unknown), tool_calls: Nullable(Schema.Array(ToolCallDelta)) })),
    finish_reason: Nullable(Schema.String)
  }))),
  usage: Nullable(Schema.Struct({ prompt_tokens: Nullable(Schema.Number), completion_tokens: Nullable(Schema.Number) })),
  // vLLM, OpenRouter and others report failures that happen after the 200 inside the stream.
  error: Nullable(Schema.Unknown)
})

const decodeChunk = Schema.decodeEither(Schema.parseJson(StreamChunk))
const parseJson = Schema.decodeUnknownOption(Schema.parseJson())

/** One retry of a model call: why the last attempt failed, and which attempt comes next of how many at most. */
export interface Retry {
  readonly cause: string
  readonly attempt: number
  readonly attempts: number
}

/**
 * Who hears of retries while they happen (default: no one). Read when the
 * model is built; `troupe run` shows them on its status line.
 */
export class RetryNotice extends Context.Reference<RetryNotice>()("troupe/OpenAiCompatibleModel/RetryNotice", {
  defaultValue: () => ({ onRetry: (_retry: Retry): Effect.Effect<void> => Effect.void })
}) {}

// ---------------------------------------------------------------------------
// Failures of one attempt. `retryAfter` is the server's `Retry-After`.

interface Failure {
  readonly error: ModelError
  readonly retryAfter?: Duration.Duration | undefined
}

const failure = (reason: string, retryable: boolean, status?: number, retryAfter?: Duration.Duration): Failure => ({
  error: new ModelError(status === undefined ? { reason, retryable } : { reason, retryable, status }),
  retryAfter
})

const clip = (text: string, max = 500) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** Pulls a human-readable message and a code out of an error body in any of the common shapes. */
const describeError = (body: unknown, fallback: string): { readonly message: string; readonly code: string | undefined } => {
  // Mistral nests its validation errors as an object under `message`.
  const text = (value: unknown) =>
    typeof value === "string"
      ? value.length > 0 ? value : undefined
      : Predicate.isObject(value)
      ? JSON.stringify(value)
      : undefined
  const code = (value: unknown) => (typeof value === "string" || typeof value === "number" ? String(value) : undefined)
  if (Predicate.isRecord(body)) {
    const error = body["error"]
    if (Predicate.isRecord(error)) {
      return {
        message: text(error["message"]) ?? fallback,
        code: code(error["code"]) ?? code(error["type"])
      }
    }
    const message = text(error) ?? text(body["message"]) ?? text(body["detail"])
    if (message !== undefined) return { message, code: code(body["code"]) ?? code(body["type"]) }
  }
  return { message: fallback, code: undefined }
}

const isRetryableStatus = (status: number) => status === 408 || status === 429 || status >= 500

const retryAfterOf = (headers: HttpClientResponse.HttpClientResponse["headers"], now: number) => {
  const ms = Number(headers["retry-after-ms"])
  if (headers["retry-after-ms"] !== undefined && Number.isFinite(ms) && ms >= 0) return Duration.millis(ms)
  const value = headers["retry-after"]
  if (value === undefined) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds) && seconds >= 0) return Duration.seconds(seconds)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Duration.millis(Math.max(0, date - now))
}

const finishReasonOf = (reason: string): Model.FinishReason => {
  switch (reason) {
    case "stop":
    case "length":
    case "content_filter":
    case "tool_calls":
      return reason
    // The pre-tools name of the same thing.
    case "function_call":
      return "tool_calls"
    default:
      return "other"
  }
}

const contentText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  let text = ""
  for (const part of content) {
    if (Predicate.isRecord(part) && part["type"] === "text" && typeof part["text"] === "string") text += part["text"]
  }
  return text
}

// ---------------------------------------------------------------------------
// Folding the stream of chunks into events.

interface PendingCall {
  readonly index: number
  id: string
  name: string
  arguments: string
  emitted: boolean
}

/**
 * The state of one streamed reply. Text is emitted as it arrives; tool calls
 * are gathered by `index` and emitted once the server says why it stopped;
 * usage is kept (some servers repeat it in every chunk) and emitted once,
 * just before `Finish`.
 */
class Reply {
  private readonly calls = new Map<number, PendingCall>()
  private lastIndex = -1
  private finishReason: Model.FinishReason | undefined
  private usage: { readonly inputTokens: number; readonly outputTokens: number } | undefined
  done = false

  constructor(private readonly makeId: () => string, private readonly toolName: (wire: string) => string) {}

  /** Folds one `data:` payload in, pushing events to `out`; a failure ends the reply. */
  onData(data: string, out: Array<Model.Event>): Failure | undefined {
    if (this.done) return undefined
    if (data.trim() === "[DONE]") {
      this.close(out)
      return undefined
    }
    const decoded = decodeChunk(data)
    if (Either.isLeft(decoded)) return failure(`malformed stream chunk: ${clip(data, 200)}`, false)
    const chunk = decoded.right
    if (chunk.error !== undefined && chunk.error !== null) return this.streamedError(chunk.error)
    if (chunk.usage) {
      this.usage = { inputTokens: chunk.usage.prompt_tokens ?? 0, outputTokens: chunk.usage.completion_tokens ?? 0 }
    }
    for (const choice of chunk.choices ?? []) {
      // `n` is never set, so any other choice is noise.
      if ((choice.index ?? 0) !== 0) continue
      const text = contentText(choice.delta?.content)
      if (text.length > 0) out.push(Model.Event.TextDelta({ text }))
      for (const delta of choice.delta?.tool_calls ?? []) this.onToolCall(delta)
      if (choice.finish_reason) {
        this.finishReason = finishReasonOf(choice.finish_reason)
        this.flushCalls(out)
      }
    }
    return undefined
  }

  /** The body ended without `[DONE]`: complete if the server said why it stopped, truncated otherwise. */
  onEnd(out: Array<Model.Event>): Failure | undefined {
    if (this.done) return undefined
    if (this.finishReason === undefined) return failure("the reply stream ended before the model finished", true)
    this.close(out)
    return undefined
  }

  private onToolCall(delta: typeof ToolCallDelta.Type) {
    // Servers that omit `index` send each call whole, or continue the last one.
    let index = delta.index ?? undefined
    if (index === undefined) {
      const id = delta.id
      const known = id ? [...this.calls.values()].find((call) => call.id === id) : undefined
      index = known !== undefined ? known.index : (id || this.lastIndex < 0) ? this.lastIndex + 1 : this.lastIndex
    }
    this.lastIndex = Math.max(this.lastIndex, index)
    let call = this.calls.get(index)
    if (call === undefined) {
      call = { index, id: "", name: "", arguments: "", emitted: false }
      this.calls.set(index, call)
    }
    if (delta.id && call.id === "") call.id = delta.id
    // The name comes whole in the first fragment; a few servers repeat it in later ones.
    if (delta.function?.name && call.name === "") call.name = delta.function.name
    if (delta.function?.arguments) call.arguments += delta.function.arguments
  }

  private flushCalls(out: Array<Model.Event>) {
    const pending = [...this.calls.values()].filter((call) => !call.emitted).sort((a, b) => a.index - b.index)
    for (const call of pending) {
      call.emitted = true
      out.push(Model.Event.ToolCallEvent({
        call: {
          id: call.id === "" ? this.makeId() : call.id,
          name: this.toolName(call.name),
          // A call without arguments is an empty object, not an empty string.
          arguments: call.arguments.trim() === "" ? "{}" : call.arguments
        }
      }))
    }
  }

  private close(out: Array<Model.Event>) {
    this.flushCalls(out)
    if (this.usage) out.push(Model.Event.UsageEvent(this.usage))
    // Some servers (older Ollama, some llama.cpp templates) say `stop` after calling tools.
    const reason = this.calls.size > 0 && (this.finishReason === undefined || this.finishReason === "stop")
      ? "tool_calls"
      : this.finishReason ?? "other"
    out.push(Model.Event.Finish({ reason }))
    this.done = true
  }

  private streamedError(error: unknown): Failure {
    const { code, message } = describeError({ error }, "the server reported an error mid-stream")
    const status = Number(code)
    const known = Number.isInteger(status) && status >= 400 && status < 600
    return failure(
      `stream error: ${message}${code !== undefined && !known ? ` (${code})` : ""}`,
      known && isRetryableStatus(status),
      known ? status : undefined
    )
  }
}

// ---------------------------------------------------------------------------
// The request.

const wireMessages = (request: Model.Request, names: WireNames): Array<WireMessage> => {
  const messages: Array<WireMessage> = []
  if (request.instructions.length > 0) messages.push({ role: "system", content: request.instructions })
  for (const message of request.messages) {
    switch (message.role) {
      case "user":
        messages.push({ role: "user", content: message.content })
        break
      case "assistant": {
        const calls = message.toolCalls ?? []
        if (calls.length === 0) {
          messages.push({ role: "assistant", content: message.content })
          break
        }
        messages.push({
          role: "assistant",
          // Several servers reject an empty string next to tool calls; null is what OpenAI itself sends.
          content: message.content.length > 0 ? message.content : null,
          tool_calls: calls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: names.wire(call.name), arguments: call.arguments }
          }))
        })
        break
      }
      case "tool":
        messages.push({ role: "tool", tool_call_id: message.toolCallId, content: message.content })
        break
    }
  }
  return messages
}

/**
 * A tool's name as the Chat Completions API takes it (`^[a-zA-Z0-9_-]{1,64}$`):
 * troupe's built-in `agents.spawn` goes out as `agents_spawn`, and the calls
 * that come back are named by the request's own tools again.
 */
export const wireToolName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64)

/** A request's tool names on the wire and back. */
interface WireNames {
  /** The wire name of a tool (of the request, or of an earlier call). */
  readonly wire: (name: string) => string
  /** The tool a wire name stands for (a name no tool of the request has is kept as it came). */
  readonly name: (wire: string) => string
}

/**
 * The wire names of a request's tools: each its `wireToolName`, made unique in
 * the request, since two names may map onto one (`kit.a_b` and `kit_a.b`, an
 * MCP tool and a hand-written one): a later tool gets `_2`, `_3`, … so that a
 * call never comes back as the other tool.
 */
const wireNamesOf = (request: Model.Request): WireNames => {
  const toWire = new Map<string, string>()
  const fromWire = new Map<string, string>()
  for (const tool of request.tools) {
    if (toWire.has(tool.name)) continue
    const base = wireToolName(tool.name)
    let wire = base
    for (let n = 2; fromWire.has(wire); n++) wire = `${base.slice(0, 63 - String(n).length)}_${n}`
    toWire.set(tool.name, wire)
    fromWire.set(wire, tool.name)
  }
  return { wire: (name) => toWire.get(name) ?? wireToolName(name), name: (wire) => fromWire.get(wire) ?? wire }
}

/** The JSON body of a streamed Chat Completions request. */
const requestBody = (request: Model.Request, model: string, options: Options, names: WireNames): Record<string, unknown> => {
  const body: Record<string, unknown> = { model, messages: wireMessages(request, names) }
  // OpenAI rejects an empty `tools` array.
  if (request.tools.length > 0) {
    body["tools"] = request.tools.map((tool) => ({
      type: "function",
      function: { name: names.wire(tool.name), description: tool.description, parameters: tool.parameters }
    }))
  }
  const settings = request.settings
  if (settings?.temperature !== undefined) body["temperature"] = settings.temperature
  if (settings?.topP !== undefined) body["top_p"] = settings.topP
  if (settings?.maxOutputTokens !== undefined) {
    body[options.maxTokensParameter ?? "max_tokens"] = settings.maxOutputTokens
  }
  if (settings?.seed !== undefined) body["seed"] = settings.seed
  if (request.output !== undefined && (options.responseFormat ?? true)) {
    // Not strict: OpenAI's strict mode refuses optional fields, which Effect schemas have; the runtime checks the output.
    body["response_format"] = {
      type: "json_schema",
      json_schema: { name: wireToolName(request.output.name), schema: request.output.schema, strict: false }
    }
  }
  body["stream"] = true
  if (options.streamOptions ?? true) body["stream_options"] = { include_usage: true }
  return body
}

// ---------------------------------------------------------------------------
// The service.

/**
 * Builds the model over the `HttpClient` in context (bring your own client,
 * e.g. `FetchHttpClient.layer`, with `Layer.effect(Model.Model, make(options))`).
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    // @effect/platform's HTTP client and the SSE parser load when a model is made, not when troupe is imported.
    const [HttpClient, HttpClientRequest, Sse] = yield* Effect.promise(() =>
      Promise.all([
        import("@effect/platform/HttpClient"),
        import("@effect/platform/HttpClientRequest"),
        import("@effect/experimental/Sse")
      ])
    )
    const client = (yield* HttpClient.HttpClient).pipe(
      // Trace ids of this process are nobody else's business.
      HttpClient.withTracerPropagation(false)
    )
    const url = `${(options.baseUrl ?? defaultBaseUrl).replace(/\/+$/, "")}/chat/completions`
    const origin = Option.match(Option.liftThrowable(() => new URL(url).origin)(), {
      onNone: () => url,
      onSome: (origin) => origin
    })
    const apiKey = options.apiKey === undefined ? undefined : Redacted.value(options.apiKey)
    const idleTimeout = Duration.decode(options.idleTimeout ?? Duration.seconds(15))
    const notice = yield* RetryNotice
    const retryTimes = options.retry?.times ?? 3
    const retryBase = Duration.decode(options.retry?.base ?? Duration.millis(200))
    const maxDelay = Duration.decode(options.retry?.maxDelay ?? Duration.seconds(30))

    // A server may echo the key it was given (OpenAI does, masked; others may not mask it).
    const scrub = (error: ModelError) =>
      apiKey === undefined || apiKey.length === 0 || !error.reason.includes(apiKey)
        ? error
        : new ModelError({
          reason: error.reason.split(apiKey).join("[redacted]"),
          retryable: error.retryable,
          ...(error.status === undefined ? {} : { status: error.status })
        })

    let baseRequest = HttpClientRequest.post(url).pipe(
      HttpClientRequest.accept("text/event-stream"),
      HttpClientRequest.setHeaders(options.headers ?? {})
    )
    if (options.apiKey !== undefined && apiKey !== "") {
      baseRequest = HttpClientRequest.bearerToken(baseRequest, options.apiKey)
    }

    const requestFailure = (error: HttpClientError.HttpClientError): Failure =>
      error._tag === "RequestError" && error.reason !== "Transport"
        ? failure(`invalid request to ${origin}: ${error.reason}`, false)
        : failure(`could not reach ${origin}: ${error.cause instanceof Error ? error.cause.message : error.message}`, true)

    const readBody = (response: HttpClientResponse.HttpClientResponse) =>
      response.text.pipe(Effect.timeout(idleTimeout), Effect.orElseSucceed(() => ""))

    const statusFailure = (response: HttpClientResponse.HttpClientResponse) =>
      Effect.gen(function*() {
        const text = yield* readBody(response)
        const { code, message } = describeError(
          Option.getOrUndefined(parseJson(text)),
          text.trim().length > 0 ? clip(text.trim()) : "no error message"
        )
        // An exhausted quota is a 429 that no amount of waiting fixes.
        const retryable = isRetryableStatus(response.status) && code !== "insufficient_quota"
        const retryAfter = retryable ? retryAfterOf(response.headers, yield* Clock.currentTimeMillis) : undefined
        return failure(
          `HTTP ${response.status}: ${clip(message)}${code === undefined ? "" : ` (${code})`}`,
          retryable,
          response.status,
          retryAfter
        )
      })

    // A proxy or server that ignores `stream: true` (or reports an error with a 200) answers with plain JSON.
    const unstreamedFailure = (response: HttpClientResponse.HttpClientResponse) =>
      Effect.map(readBody(response), (text) => {
        const { message } = describeError(
          Option.getOrUndefined(parseJson(text)),
          "the server answered with JSON instead of an event stream: does it support `stream: true`?"
        )
        return failure(clip(message), false, response.status)
      })

    const events = (
      response: HttpClientResponse.HttpClientResponse,
      toolName: (wire: string) => string
    ): Stream.Stream<Model.Event, Failure> =>
      Stream.suspend(() => {
        const reply = new Reply(() => `call_${globalThis.crypto.randomUUID().replaceAll("-", "")}`, toolName)
        const data: Array<string> = []
        const parser = Sse.makeParser((event) => {
          if (event._tag !== "Event") return
          // A named `error` event carries the error itself as its data.
          data.push(event.event === "error" ? JSON.stringify({ error: { message: event.data } }) : event.data)
        })
        return response.stream.pipe(
          Stream.mapError((): Failure => failure("the connection was lost while streaming the reply", true)),
          Stream.timeoutFail(
            () => failure(`no data from ${origin} for ${Duration.format(idleTimeout)}`, true),
            idleTimeout
          ),
          Stream.decodeText(),
          // Events folded from a read are delivered before a failure found later in the same read.
          Stream.mapChunks((texts) => {
            const out: Array<Model.Event> = []
            let failed: Failure | undefined
            for (const text of texts) {
              const tooLarge = parser.feed(text)
              if (tooLarge !== undefined) failed = failure(tooLarge.message, false)
              for (let i = 0; failed === undefined && i < data.length; i++) failed = reply.onData(data[i]!, out)
              data.length = 0
              if (failed !== undefined || reply.done) break
            }
            const events = Take.chunk(Chunk.unsafeFromArray(out))
            return failed === undefined ? Chunk.of(events) : Chunk.make(events, Take.fail(failed))
          }),
          Stream.flattenTake,
          Stream.concat(Stream.suspend(() => {
            const out: Array<Model.Event> = []
            const failed = reply.onEnd(out)
            return failed === undefined ? Stream.fromIterable(out) : Stream.fail(failed)
          })),
          // Stop reading at `[DONE]`, whatever the server does with the connection afterwards.
          Stream.takeUntil((event) => event._tag === "Finish")
        )
      })

    const attempt = (body: Record<string, unknown>, toolName: (wire: string) => string): Stream.Stream<Model.Event, Failure> =>
      Stream.unwrap(
        client.execute(HttpClientRequest.bodyUnsafeJson(baseRequest, body)).pipe(
          Effect.mapError(requestFailure),
          Effect.timeoutFail({
            duration: idleTimeout,
            onTimeout: () => failure(`no response from ${origin} within ${Duration.format(idleTimeout)}`, true)
          }),
          Effect.flatMap((response) =>
            response.status < 200 || response.status >= 300
              ? Effect.flatMap(statusFailure(response), Effect.fail)
              : (response.headers["content-type"] ?? "").includes("json")
              ? Effect.flatMap(unstreamedFailure(response), Effect.fail)
              : Effect.succeed(events(response, toolName))
          )
        )
      )

    // `Stream.retry` starts its schedule over whenever the stream emits, even an empty chunk (a
    // server that sends its headers and a role chunk, then hangs, would be retried forever): the
    // attempts are counted here, across those restarts.
    const retryPolicy = (emitted: () => boolean, attempts: () => number) =>
      Schedule.exponential(retryBase).pipe(
        Schedule.jittered,
        Schedule.intersect(Schedule.recurs(retryTimes)),
        Schedule.intersect(Schedule.identity<Failure>()),
        Schedule.modifyDelay(([, last], delay) =>
          Duration.min(last.retryAfter ? Duration.max(delay, last.retryAfter) : delay, maxDelay)
        ),
        // Once a delta reached the caller, a retry would stream it twice: the caller decides.
        Schedule.whileInput((last: Failure) => last.error.retryable && !emitted() && attempts() <= retryTimes)
      )

    return Model.Model.of({
      stream: (request) =>
        Stream.suspend(() => {
          const model = defaultModelNames.includes(request.model) ? options.model : request.model
          if (model === undefined || model === "") {
            return Stream.fail(
              new ModelError({
                reason: `no model to call: the agent asks for "${request.model}" and no default model is configured (TROUPE_MODEL)`,
                retryable: false
              })
            )
          }
          const names = wireNamesOf(request)
          const body = requestBody(request, model, options, names)
          let emitted = false
          const toolName = names.name
          let attempts = 0
          let last: Failure | undefined
          return Stream.suspend(() => {
            attempts++
            const announce = attempts > 1 && last !== undefined
              ? notice.onRetry({
                cause: last.error.status === undefined ? last.error.reason : `HTTP ${last.error.status}`,
                attempt: attempts,
                attempts: retryTimes + 1
              })
              : Effect.void
            return Stream.unwrap(Effect.as(announce, attempt(body, toolName)))
          }).pipe(
            Stream.tapError((failure) => Effect.sync(() => void (last = failure))),
            Stream.mapChunks((chunk) => {
              if (Chunk.isNonEmpty(chunk)) emitted = true
              return chunk
            }),
            Stream.retry(retryPolicy(() => emitted, () => attempts)),
            // A failure that was (or could have been) retried says how many attempts it took.
            Stream.mapError((failure) => scrub(withAttempts(failure.error, attempts))),
            Stream.withSpan("OpenAiCompatibleModel.stream", {
              attributes: { "gen_ai.system": "openai_compatible", "gen_ai.request.model": model, "server.address": origin }
            })
          )
        })
    })
  })

/** A retryable error, or one that ended retries, with the number of attempts made in its reason. */
const withAttempts = (error: ModelError, attempts: number): ModelError =>
  !error.retryable && attempts === 1
    ? error
    : new ModelError({
      reason: `${error.reason} (${attempts} attempt${attempts === 1 ? "" : "s"})`,
      retryable: error.retryable,
      ...(error.status === undefined ? {} : { status: error.status })
    })

/** The model with its own HTTP client (undici, one connection pool for the layer's life). */
export const layer = (options: Options = {}): Layer.Layer<Model.Model> =>
  Layer.effect(Model.Model, make(options)).pipe(Layer.provide(undiciClient))

/** Node's HTTP client on undici, its module loaded when the layer is built (docs/decisions/0044-drivers-load-when-used.md). */
const undiciClient: Layer.Layer<HttpClient.HttpClient> = Layer.unwrapEffect(
  Effect.map(
    Effect.promise((): Promise<typeof import("@effect/platform-node/NodeHttpClient")> => import("@effect/platform-node/NodeHttpClient")),
    (NodeHttpClient) => NodeHttpClient.layerUndici
  )
)

/**
 * What `layerConfig` reads: `TROUPE_MODEL_BASE_URL`, `TROUPE_MODEL_API_KEY`
 * (redacted; empty means none), `TROUPE_MODEL`, `TROUPE_MODEL_MAX_TOKENS_PARAMETER`,
 * `TROUPE_MODEL_STREAM_OPTIONS` and `TROUPE_MODEL_IDLE_TIMEOUT`.
 */
export const config: Config.Config<Options> = Config.all({
  baseUrl: Config.string("TROUPE_MODEL_BASE_URL").pipe(Config.withDefault(defaultBaseUrl)),
  apiKey: Config.option(Config.redacted("TROUPE_MODEL_API_KEY")),
  model: Config.option(Config.string("TROUPE_MODEL")),
  maxTokensParameter: Config.option(
    Config.literal("max_tokens", "max_completion_tokens")("TROUPE_MODEL_MAX_TOKENS_PARAMETER")
  ),
  streamOptions: Config.option(Config.boolean("TROUPE_MODEL_STREAM_OPTIONS")),
  idleTimeout: Config.option(Config.duration("TROUPE_MODEL_IDLE_TIMEOUT"))
}).pipe(
  Config.map((c): Options => ({
    baseUrl: c.baseUrl,
    apiKey: Option.getOrUndefined(Option.filter(c.apiKey, (key) => Redacted.value(key) !== "")),
    model: Option.getOrUndefined(Option.filter(c.model, (model) => model !== "")),
    maxTokensParameter: Option.getOrUndefined(c.maxTokensParameter),
    streamOptions: Option.getOrUndefined(c.streamOptions),
    idleTimeout: Option.getOrUndefined(c.idleTimeout)
  }))
)

/** The model configured from `config`; `options` set what configuration does not (retries, headers). */
export const layerConfig = (
  options: Omit<Options, "baseUrl" | "apiKey" | "model"> = {}
): Layer.Layer<Model.Model, ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.map(config, (configured) =>
      layer({
        ...options,
        ...configured,
        maxTokensParameter: configured.maxTokensParameter ?? options.maxTokensParameter,
        streamOptions: configured.streamOptions ?? options.streamOptions,
        idleTimeout: configured.idleTimeout ?? options.idleTimeout
      })
    )
  )
