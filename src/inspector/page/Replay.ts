/// <reference lib="dom" />
/**
 * A bounded read of a session's log: `GET …/events?follow=false` from a
 * cursor, stopped as soon as enough was read (the page pages earlier events
 * of a long session, counts a list row's turns, reads an archived artifact).
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { SseParser } from "./Sse.js"
import type { DurableEvent } from "./Types.js"

/** The durable event of an SSE `data:` line (`{ cursor, event }`, the event as the wire sends it). */
export const durableOf = (data: string): DurableEvent | undefined => {
  const frame = JSON.parse(data) as { cursor?: number; event?: { _tag?: string; cursor?: number; at?: number; record?: unknown } }
  const event = frame.event
  if (event === undefined || event._tag !== "durable" || event.record === undefined) return undefined
  return { cursor: frame.cursor ?? event.cursor ?? 0, at: event.at ?? 0, record: event.record as DurableEvent["record"] }
}

/**
 * Reads durable events after `after`, calling `onEvent` for each, until the
 * log's end or `stop` says so (the reader is then cancelled, so the server
 * stops sending).
 */
export const replay = async (
  sessionId: string,
  after: number,
  onEvent: (event: DurableEvent) => void,
  stop: (event: DurableEvent) => boolean = () => false
): Promise<void> => {
  const controller = new AbortController()
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/events${Api.query({ after, follow: false })}`, {
      headers: { accept: "text/event-stream", ...Api.authHeaders() },
      signal: controller.signal,
      credentials: "omit",
      cache: "no-store"
    })
    if (response.status === 401 && attempt < 2 && (await Api.askToken((await Api.problemOf(response)).message))) continue
    if (!response.ok || response.body === null) throw new Api.ProblemError(await Api.problemOf(response))
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    const parser = new SseParser()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return
        for (const event of parser.feed(value)) {
          if (event.event === "end") return
          const durable = durableOf(event.data)
          if (durable === undefined) continue
          onEvent(durable)
          if (stop(durable)) return
        }
      }
    } finally {
      controller.abort()
    }
  }
}
