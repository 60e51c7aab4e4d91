/**
 * Server-Sent Events framing (the WHATWG `text/event-stream` format, as
 * HTTP.md uses it): `encode` builds one event's bytes on the server;
 * `Parser` reads a stream of text chunks back into events on the client,
 * whatever the chunk boundaries, keeping the last `id:` seen (the cursor to
 * resume from with `Last-Event-ID`).
 *
 * @since 0.3.0
 */

/** One event as received. `id` is the last id seen so far (SSE's "last event ID"), `undefined` before any. */
export interface Event {
  readonly event: string
  readonly data: string
  /** The event's own `id:` field, when it had one. */
  readonly id: string | undefined
}

/** Why the server ended an event stream (`event: end`). */
export type EndReason = "replayed" | "closed" | "slow_consumer" | "shutdown"

/** The data of an `event: end`. */
export interface End {
  readonly reason: EndReason
  readonly cursor: number
}

/** One event's text: `id:` (when given), `event:`, and `data:` lines (one per line of `data`), then a blank line. */
export const encode = (event: string, data: string, id?: number | string): string => {
  let text = id === undefined ? "" : `id: ${id}\n`
  text += `event: ${event}\n`
  // A newline in data would end the field: each line is a `data:` line of its own (JSON text has none).
  text += data.includes("\n") ? data.split("\n").map((line) => `data: ${line}\n`).join("") : `data: ${data}\n`
  return `${text}\n`
}

/** A comment line, which keeps proxies and the client's read timeout from closing an idle stream. */
export const ping = ": ping\n\n"

/** An incremental parser of `text/event-stream`. */
export class Parser {
  private buffer = ""
  private eventType = ""
  private data: Array<string> = []
  private ownId: string | undefined = undefined
  private seenData = false

  /** The last `id:` received. */
  lastEventId: string | undefined = undefined

  /** Feeds a chunk of text; returns the events it completes. */
  push(chunk: string): ReadonlyArray<Event> {
    this.buffer += chunk
    const events: Array<Event> = []
    for (;;) {
      const at = this.buffer.search(/\r\n|\r|\n/)
      if (at < 0) break
      const newline = this.buffer.startsWith("\r\n", at) ? 2 : 1
      const line = this.buffer.slice(0, at)
      this.buffer = this.buffer.slice(at + newline)
      const event = this.line(line)
      if (event !== undefined) events.push(event)
    }
    return events
  }

  private line(line: string): Event | undefined {
    if (line === "") {
      if (!this.seenData) {
        this.eventType = ""
        this.ownId = undefined
        return undefined
      }
      const event: Event = { event: this.eventType === "" ? "message" : this.eventType, data: this.data.join("\n"), id: this.ownId }
      this.eventType = ""
      this.data = []
      this.ownId = undefined
      this.seenData = false
      return event
    }
    if (line.startsWith(":")) return undefined
    const colon = line.indexOf(":")
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    switch (field) {
      case "event":
        this.eventType = value
        break
      case "data":
        this.data.push(value)
        this.seenData = true
        break
      case "id":
        if (!value.includes("\0")) {
          this.ownId = value
          this.lastEventId = value
        }
        break
    }
    return undefined
  }
}
