/**
 * An incremental Server-Sent Events parser (the WHATWG event-stream format):
 * text goes in as it arrives, whole events come out. The page reads its
 * streams with `fetch` rather than `EventSource`, which can send neither an
 * `Authorization` header nor a `Last-Event-ID` of the page's choosing.
 *
 * Pure: no DOM, so it is tested in Node.
 *
 * @since 0.3.0
 */

/** One dispatched event: `id` only when the event had an `id:` line. */
export interface SseEvent {
  readonly event: string
  readonly data: string
  readonly id: string | undefined
}

/** A parser fed chunks of decoded text; `comments` counts `: ping` lines (liveness). */
export class SseParser {
  private buffer = ""
  private data: Array<string> = []
  private event = ""
  private id: string | undefined = undefined
  /** How many comment lines (heartbeats) were seen. */
  comments = 0

  /** Feeds a chunk and returns the events it completed. */
  feed(chunk: string): ReadonlyArray<SseEvent> {
    this.buffer += chunk
    const out: Array<SseEvent> = []
    let start = 0
    for (;;) {
      const at = this.lineEnd(start)
      if (at === -1) break
      const line = this.buffer.slice(start, at.index)
      start = at.next
      this.line(line, out)
    }
    this.buffer = this.buffer.slice(start)
    return out
  }

  // A line ends at \n, \r\n or \r; a lone \r at the end of the buffer may still be half of \r\n.
  private lineEnd(from: number): { index: number; next: number } | -1 {
    for (let i = from; i < this.buffer.length; i++) {
      const c = this.buffer.charCodeAt(i)
      if (c === 10) return { index: i, next: i + 1 }
      if (c === 13) {
        if (i + 1 === this.buffer.length) return -1
        return { index: i, next: this.buffer.charCodeAt(i + 1) === 10 ? i + 2 : i + 1 }
      }
    }
    return -1
  }

  private line(line: string, out: Array<SseEvent>): void {
    if (line === "") {
      if (this.data.length > 0) out.push({ event: this.event === "" ? "message" : this.event, data: this.data.join("\n"), id: this.id })
      this.data = []
      this.event = ""
      this.id = undefined
      return
    }
    if (line.startsWith(":")) {
      this.comments++
      return
    }
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "data") this.data.push(value)
    else if (field === "event") this.event = value
    else if (field === "id" && !value.includes("\0")) this.id = value
  }
}
