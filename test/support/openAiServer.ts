/**
 * A local HTTP server that speaks OpenAI's Chat Completions wire format, for
 * testing model layers over real sockets. Each request to
 * `POST /v1/chat/completions` gets the next scripted reply: an SSE stream
 * (`data: {...}` events, `data: [DONE]`), an error body, or raw bytes split
 * and delayed at will, ending cleanly, with a destroyed socket or not at all.
 * Every request is recorded (headers and JSON body) for assertions.
 *
 * @since 0.1.0
 */
import { Effect, type Scope } from "effect"
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** A piece of a reply body: bytes to write, or a pause. */
export type Part = string | Uint8Array | { readonly delayMs: number }

/** One scripted reply. */
export interface Reply {
  /** Default 200. */
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
  /** Written in order, each flushed before the next. */
  readonly parts: ReadonlyArray<Part>
  /** After the last part: end the response (default), destroy the socket, or leave it hanging. */
  readonly end?: "end" | "destroy" | "hang"
}

/** A request the server received. */
export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  /** The body parsed as JSON, or the raw text when it is not JSON. */
  readonly body: unknown
  /** True once the client closed the connection before the reply ended. */
  readonly aborted: () => boolean
}

/** A running server. */
export interface OpenAiServer {
  /** `http://127.0.0.1:<port>/v1` */
  readonly baseUrl: string
  /** Queues replies, served one per request in order. */
  readonly enqueue: (...replies: ReadonlyArray<Reply>) => Effect.Effect<void>
  /** The requests received so far. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Answers each request the queue has no reply for with `respond(body)` (for concurrent callers, whose order varies). */
  readonly respondWith: (respond: (body: unknown) => Reply) => Effect.Effect<void>
}

const readBody = (request: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => resolve(Buffer.concat(parts).toString("utf8")))
    request.on("error", reject)
  })

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const write = (response: ServerResponse, part: string | Uint8Array) =>
  new Promise<void>((resolve) => {
    if (response.destroyed) return resolve()
    response.write(part, () => resolve())
  })

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const serve = async (response: ServerResponse, reply: Reply) => {
  response.writeHead(reply.status ?? 200, { ...reply.headers })
  response.flushHeaders()
  for (const part of reply.parts) {
    if (response.destroyed) return
    if (typeof part === "string" || part instanceof Uint8Array) await write(response, part)
    else await sleep(part.delayMs)
  }
  switch (reply.end ?? "end") {
    case "end":
      return void response.end()
    case "destroy":
      return void response.socket?.destroy()
    case "hang":
      return
  }
}

/** Starts a server on 127.0.0.1 with an ephemeral port, closed (connections and all) with the scope. */
export const make: Effect.Effect<OpenAiServer, never, Scope.Scope> = Effect.gen(function*() {
  const queue: Array<Reply> = []
  const received: Array<RecordedRequest> = []
  let respond: ((body: unknown) => Reply) | undefined
  const server = createServer((request, response) => {
    void readBody(request).then((text) => {
      let aborted = false
      response.on("close", () => {
        if (!response.writableFinished) aborted = true
      })
      received.push({
        method: request.method ?? "",
        path: request.url ?? "",
        headers: request.headers,
        body: parse(text),
        aborted: () => aborted
      })
      if (request.method !== "POST" || request.url !== "/v1/chat/completions") {
        return serve(response, error(404, `no route for ${request.method} ${request.url}`, "invalid_request_error", null))
      }
      return serve(response, queue.shift() ?? respond?.(parse(text)) ?? error(500, "no scripted reply left", "server_error", null))
    }, () => response.destroy())
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.void))
    }),
    () =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    enqueue: (...replies) => Effect.sync(() => void queue.push(...replies)),
    requests: Effect.sync(() => received.slice()),
    respondWith: (f) => Effect.sync(() => void (respond = f))
  }
})

// ---------------------------------------------------------------------------
// Building replies.

/** The raw SSE text of chunks (objects are JSON-encoded), ending with `data: [DONE]` unless `done: false`. */
export const sseText = (
  chunks: ReadonlyArray<unknown>,
  options: { readonly done?: boolean; readonly eol?: "\n" | "\r\n" } = {}
): string => {
  const eol = options.eol ?? "\n"
  let text = ""
  for (const chunk of chunks) text += `data: ${typeof chunk === "string" ? chunk : JSON.stringify(chunk)}${eol}${eol}`
  if (options.done ?? true) text += `data: [DONE]${eol}${eol}`
  return text
}

const sseHeaders = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" }

/** A streamed reply: one write per event, optionally `delayMs` apart, then `[DONE]` unless `done: false`. */
export const sse = (
  chunks: ReadonlyArray<unknown>,
  options: { readonly done?: boolean; readonly delayMs?: number; readonly end?: Reply["end"] } = {}
): Reply => {
  const parts: Array<Part> = []
  for (const chunk of chunks) {
    if (options.delayMs !== undefined && parts.length > 0) parts.push({ delayMs: options.delayMs })
    parts.push(sseText([chunk], { done: false }))
  }
  if (options.done ?? true) parts.push("data: [DONE]\n\n")
  return { headers: sseHeaders, parts, ...(options.end === undefined ? {} : { end: options.end }) }
}

/** A whole streamed answer of `words`, with a little usage: what a scripted agent says when it is done. */
export const textReply = (words: string): Reply =>
  sse([chunk.role(), chunk.text(words), chunk.finish("stop"), chunk.usage(5, 1)])

/** A whole streamed reply calling `list` (`[wire name, arguments]`, ids `call_<name>_<i>`) at once. */
export const toolCallsReply = (...list: ReadonlyArray<readonly [name: string, args: unknown]>): Reply =>
  sse([
    chunk.role(),
    ...list.map(([name, args], i) => chunk.toolCall(i, { id: `call_${name}_${i}`, name, arguments: JSON.stringify(args) })),
    chunk.finish("tool_calls"),
    chunk.usage(5, 1)
  ])

/** A streamed reply whose bytes are cut at `cuts` (byte offsets), each piece a separate write `delayMs` apart. */
export const sseSplit = (text: string, cuts: ReadonlyArray<number>, delayMs = 1): Reply => {
  const bytes = Buffer.from(text, "utf8")
  const offsets = [...new Set(cuts.filter((cut) => cut > 0 && cut < bytes.length))].sort((a, b) => a - b)
  const parts: Array<Part> = []
  let from = 0
  for (const cut of [...offsets, bytes.length]) {
    if (parts.length > 0) parts.push({ delayMs })
    parts.push(new Uint8Array(bytes.subarray(from, cut)))
    from = cut
  }
  return { headers: sseHeaders, parts }
}

/** An error reply with OpenAI's body shape `{ error: { message, type, code } }`. */
export const error = (
  status: number,
  message: string,
  type: string,
  code: string | null,
  headers: Readonly<Record<string, string>> = {}
): Reply => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  parts: [JSON.stringify({ error: { message, type, param: null, code } })]
})

/** Chunks as OpenAI streams them. */
export const chunk = {
  /** The first chunk: the assistant role and empty content. */
  role: () => completion([{ index: 0, delta: { role: "assistant", content: "", refusal: null }, finish_reason: null }]),
  text: (content: string) => completion([{ index: 0, delta: { content }, finish_reason: null }]),
  /** A tool-call fragment: the first one of a call carries `id` and `name`, later ones only `arguments`. */
  toolCall: (index: number, fragment: { readonly id?: string; readonly name?: string; readonly arguments: string }) =>
    completion([{
      index: 0,
      delta: {
        tool_calls: [{
          index,
          ...(fragment.id === undefined ? {} : { id: fragment.id, type: "function" }),
          function: { ...(fragment.name === undefined ? {} : { name: fragment.name }), arguments: fragment.arguments }
        }]
      },
      finish_reason: null
    }]),
  finish: (reason: string) => completion([{ index: 0, delta: {}, finish_reason: reason }]),
  /** The last chunk when `stream_options.include_usage` is set: no choices, only usage. */
  usage: (promptTokens: number, completionTokens: number) => ({
    ...completion([]),
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens }
  })
}

const completion = (choices: ReadonlyArray<unknown>) => ({
  id: "chatcmpl-test",
  object: "chat.completion.chunk",
  created: 1_700_000_000,
  model: "gpt-test",
  system_fingerprint: "fp_test",
  choices,
  usage: null
})
