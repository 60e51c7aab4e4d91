/// <reference lib="dom" />
/**
 * A live event stream of the API (HTTP.md, "Event streams") that survives
 * the connection: read with `fetch` (so it sends the Bearer token), parsed by
 * `SseParser`, and reopened after any failure with `Last-Event-ID` set to the
 * last cursor seen, so nothing is missed or seen twice. A stream the server
 * ends with `slow_consumer` or `shutdown` is reopened the same way; `closed`
 * and `replayed` end it. A stream that hears nothing (not even a `: ping`)
 * for 45 s is taken for dead and reopened.
 *
 * Every stream reports whether it is connected; `onConnectivity` hears when
 * any of them is not (the page's "connection lost" banner).
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { type SseEvent, SseParser } from "./Sse.js"

/** How a stream ended for good. */
export interface End {
  readonly reason: string
  readonly cursor: number | undefined
}

/** What a stream is told. */
export interface Handlers {
  /** Each event, durable or volatile; `end` events are handled here, not passed on. */
  readonly onEvent: (event: SseEvent) => void
  /** Called each time the stream (re)opens, before its first event. */
  readonly onOpen?: () => void
  /** Called once when the stream ends for good. */
  readonly onEnd?: (end: End) => void
}

const SILENCE_MS = 45_000
const down = new Set<LiveStream>()
let listener: (connected: boolean) => void = () => {}

/** Hears whether every stream is connected. */
export const onConnectivity = (f: (connected: boolean) => void): void => {
  listener = f
}

const report = () => listener(down.size === 0)

/** One resumable stream; `close()` ends it. */
export class LiveStream {
  /** The last cursor (`id:`) seen: where a reconnect resumes. */
  lastId: string | undefined
  private controller: AbortController | undefined
  private closed = false
  private attempts = 0

  constructor(private readonly path: string, private readonly handlers: Handlers, after?: number) {
    this.lastId = after === undefined ? undefined : String(after)
    void this.run()
  }

  /** Ends the stream; no reconnect. */
  close(): void {
    this.closed = true
    this.controller?.abort()
    down.delete(this)
    report()
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      const end = await this.once().catch(() => undefined)
      if (this.closed) return
      if (end !== undefined && end.reason !== "slow_consumer" && end.reason !== "shutdown") {
        this.closed = true
        down.delete(this)
        report()
        this.handlers.onEnd?.(end)
        return
      }
      if (end?.reason !== "slow_consumer") {
        down.add(this)
        report()
      }
      this.attempts++
      await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 200 * 2 ** Math.min(this.attempts, 5))))
    }
  }

  /** One connection: answers the `end` event, or undefined when the connection broke. */
  private async once(): Promise<End | undefined> {
    const controller = new AbortController()
    this.controller = controller
    const headers: Record<string, string> = { accept: "text/event-stream", ...Api.authHeaders() }
    if (this.lastId !== undefined) headers["last-event-id"] = this.lastId
    const response = await fetch(this.path, { headers, signal: controller.signal, credentials: "omit", cache: "no-store" })
    if (response.status === 401) {
      const problem = await Api.problemOf(response)
      Api.forget()
      if (!(await Api.askToken(problem.message))) return { reason: "unauthenticated", cursor: undefined }
      return undefined
    }
    if (!response.ok || response.body === null) {
      const problem = await Api.problemOf(response)
      // A missing session or a refused request does not get better by retrying.
      if (response.status >= 400 && response.status < 500 && response.status !== 429) return { reason: problem.kind, cursor: undefined }
      return undefined
    }
    this.attempts = 0
    down.delete(this)
    report()
    this.handlers.onOpen?.()
    const parser = new SseParser()
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    let timer = setTimeout(() => controller.abort(), SILENCE_MS)
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return undefined
        clearTimeout(timer)
        timer = setTimeout(() => controller.abort(), SILENCE_MS)
        for (const event of parser.feed(value)) {
          if (event.event === "end") {
            const data = JSON.parse(event.data) as { reason: string; cursor?: number }
            if (data.cursor !== undefined) this.lastId = String(data.cursor)
            return { reason: data.reason, cursor: data.cursor }
          }
          if (event.id !== undefined) this.lastId = event.id
          this.handlers.onEvent(event)
        }
      }
    } finally {
      clearTimeout(timer)
      controller.abort()
    }
  }
}
