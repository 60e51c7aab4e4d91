/**
 * A duplex byte stream as the connection code sees it: pull the next chunk,
 * write bytes with backpressure, close. One shape for unix sockets, TCP
 * sockets and a pair of stdio streams, on the server and in the client.
 *
 * Reading is pull-based (`read` takes whatever the stream has buffered), so
 * a reader that stops pulling stops the socket: the kernel's buffers fill and
 * the peer's writes wait. A write, when it runs, hands bytes to the stream at
 * once while it is below its writable high-water mark and otherwise waits,
 * first in first out, for `drain`; so at most one high-water mark (plus the
 * frame that crossed it) is ever buffered per connection, however many fibers
 * write. Writes run in the same tick are corked into one system call.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"

/** The stream failed or was closed; `reason` is a short description (an errno code or `closed`). */
export class TransportError extends Schema.TaggedError<TransportError>()("TransportError", {
  reason: Schema.String
}) {
  override get message() {
    return `transport ${this.reason}`
  }
}

/** A duplex byte stream. */
export interface Transport {
  /** The next bytes received, `None` once the peer has ended the stream. One reader at a time. */
  readonly read: Effect.Effect<Option.Option<Uint8Array>, TransportError>
  /**
   * Writes `bytes`, waiting while the output is above its high-water mark.
   * `onWritten` runs synchronously right after the bytes are handed to the
   * stream (before any other fiber can run), e.g. to free a correlation id
   * exactly when its terminal frame leaves. Interrupting a waiting write drops
   * it whole: bytes are never half-written. Like any effect, it does nothing
   * until it is run, and each run writes the bytes again (so `retry`,
   * `zipRight` and reuse behave as they read).
   */
  readonly write: (bytes: Uint8Array, onWritten?: () => void) => Effect.Effect<void, TransportError>
  /**
   * Flushes, ends the output and waits (at most `linger`) for the peer to end
   * its side, discarding what it still sends, then destroys the stream. Closing
   * only once the peer has read everything keeps a last error frame from being
   * lost to a reset. Never fails; safe to call twice.
   */
  readonly close: (linger: Duration.DurationInput) => Effect.Effect<void>
  /** Destroys the stream at once. Safe to call twice. */
  readonly destroy: Effect.Effect<void>
  /** Whether the stream can no longer be written. */
  readonly isClosed: () => boolean
}
