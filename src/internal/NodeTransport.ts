/**
 * The `Transport` over Node streams: a connected socket (unix or TCP), or a
 * readable and a writable stream such as stdin and stdout. Reading is
 * pull-based, writing has backpressure (see `Transport`); both the server's
 * listeners and the client's connections use it.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Readable, Writable } from "node:stream"
import { type Transport, TransportError } from "../protocol/Transport.js"

/** How a pair of Node streams is closed. */
export interface StreamOptions {
  /**
   * Whether `close` ends and destroys the output (default true). False for
   * `process.stdout`, which must outlive one connection.
   */
  readonly closeOutput?: boolean | undefined
  /** Whether `close` destroys the input (default true). False for `process.stdin`. */
  readonly closeInput?: boolean | undefined
}

interface WriteWaiter {
  readonly bytes: Uint8Array
  readonly onWritten: (() => void) | undefined
  readonly resume: (effect: Effect.Effect<void, TransportError>) => void
}

const errorReason = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "code" in error && typeof error.code === "string") {
    return error.code
  }
  return "failed"
}

class NodeTransport implements Transport {
  private readonly waiters: Array<WriteWaiter> = []
  private wakeReader: (() => void) | undefined = undefined
  private inputEnded = false
  private failure: string | undefined = undefined
  private outputClosed = false
  private corked = false
  private closing = false

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    private readonly options: StreamOptions
  ) {
    input.on("readable", this.onReadable)
    input.on("end", this.onEnd)
    input.on("error", this.onError)
    input.on("close", this.onInputClose)
    output.on("drain", this.onDrain)
    if ((output as unknown) !== input) {
      output.on("error", this.onError)
    }
    output.on("close", this.onOutputClose)
  }

  private readonly onReadable = () => {
    if (this.closing) {
      // Lingering: what the peer still sends is read and dropped, so it can finish writing and see our end.
      while (this.input.read() !== null) {
        // discard
      }
      return
    }
    this.wakeReader?.()
  }

  private readonly onEnd = () => {
    this.inputEnded = true
    this.wakeReader?.()
  }

  private readonly onError = (error: unknown) => {
    if (this.failure === undefined) this.failure = errorReason(error)
    this.wakeReader?.()
    this.failWriters()
  }

  private readonly onInputClose = () => {
    this.inputEnded = true
    this.wakeReader?.()
    if ((this.input as unknown) === this.output) this.onOutputClose()
  }

  private readonly onOutputClose = () => {
    this.outputClosed = true
    this.failWriters()
  }

  private failWriters(): void {
    const waiters = this.waiters.splice(0)
    const error = new TransportError({ reason: this.failure ?? "closed" })
    for (const waiter of waiters) waiter.resume(Effect.fail(error))
  }

  private readonly onDrain = () => {
    while (this.waiters.length > 0 && !this.output.writableNeedDrain && !this.isClosed()) {
      const waiter = this.waiters.shift()!
      this.push(waiter.bytes)
      waiter.onWritten?.()
      waiter.resume(Effect.void)
    }
  }

  private readonly uncork = () => {
    this.corked = false
    this.output.uncork()
  }

  private push(bytes: Uint8Array): void {
    if (!this.corked) {
      this.corked = true
      this.output.cork()
      process.nextTick(this.uncork)
    }
    this.output.write(bytes)
  }

  isClosed(): boolean {
    return this.outputClosed || this.failure !== undefined || this.output.destroyed || this.output.writableEnded
  }

  // Takes what is buffered, or says why there is nothing to wait for; undefined means "wait".
  private attempt(): Effect.Effect<Option.Option<Uint8Array>, TransportError> | undefined {
    const chunk: unknown = this.input.read()
    if (chunk !== null) {
      return Effect.succeed(Option.some(typeof chunk === "string" ? Buffer.from(chunk) : chunk as Uint8Array))
    }
    if (this.failure !== undefined) return Effect.fail(new TransportError({ reason: this.failure }))
    if (this.inputEnded || this.input.readableEnded || this.input.destroyed) return Effect.succeed(Option.none())
    return undefined
  }

  readonly read: Effect.Effect<Option.Option<Uint8Array>, TransportError> = Effect.suspend(() => {
    const ready = this.attempt()
    if (ready !== undefined) return ready
    return Effect.async<Option.Option<Uint8Array>, TransportError>((resume) => {
      this.wakeReader = () => {
        const next = this.attempt()
        if (next !== undefined) {
          this.wakeReader = undefined
          resume(next)
        }
      }
      return Effect.sync(() => {
        this.wakeReader = undefined
      })
    })
  })

  readonly write = (bytes: Uint8Array, onWritten?: () => void): Effect.Effect<void, TransportError> =>
    Effect.suspend(() => {
      if (this.isClosed()) return Effect.fail(new TransportError({ reason: this.failure ?? "closed" }))
      if (this.waiters.length === 0 && !this.output.writableNeedDrain) {
        this.push(bytes)
        onWritten?.()
        return Effect.void
      }
      return Effect.async<void, TransportError>((resume) => {
        const waiter: WriteWaiter = { bytes, onWritten, resume }
        this.waiters.push(waiter)
        return Effect.sync(() => {
          const index = this.waiters.indexOf(waiter)
          if (index >= 0) this.waiters.splice(index, 1)
        })
      })
    })

  readonly destroy: Effect.Effect<void> = Effect.sync(() => {
    this.closing = true
    this.failWriters()
    if (this.options.closeInput !== false) this.input.destroy()
    else {
      // A shared stream (stdin) stays open for whoever comes next; only our listeners go.
      this.input.off("readable", this.onReadable)
      this.input.off("end", this.onEnd)
      this.input.off("close", this.onInputClose)
      this.input.pause()
    }
    if (this.options.closeOutput !== false) this.output.destroy()
    else {
      // The error listeners stay: an EPIPE on a stream nobody listens to would be thrown.
      this.output.off("drain", this.onDrain)
      this.output.off("close", this.onOutputClose)
    }
    this.outputClosed = true
  })

  readonly close = (linger: Duration.DurationInput): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (this.closing) return this.destroy
      this.closing = true
      // Queued writers will not get their turn: the connection is going away.
      this.failWriters()
      const flushAndEnd = Effect.async<void>((resume) => {
        if (this.output.destroyed || this.output.writableFinished) return resume(Effect.void)
        const done = () => resume(Effect.void)
        this.output.once("close", done)
        if (this.options.closeOutput === false) {
          // Only flush: an empty write calls back once everything before it is written.
          this.output.write(new Uint8Array(0), done)
        } else {
          this.output.once("finish", done)
          if (!this.output.writableEnded) this.output.end()
        }
        return Effect.sync(() => {
          this.output.off("close", done)
          this.output.off("finish", done)
        })
      })
      const peerEnded = Effect.async<void>((resume) => {
        if (this.options.closeInput === false || this.inputEnded || this.input.destroyed) return resume(Effect.void)
        const done = () => resume(Effect.void)
        this.input.once("end", done)
        this.input.once("close", done)
        // Drop what is already buffered; `onReadable` drops the rest.
        while (this.input.read() !== null) {
          // discard
        }
        return Effect.sync(() => {
          this.input.off("end", done)
          this.input.off("close", done)
        })
      })
      return flushAndEnd.pipe(
        Effect.andThen(peerEnded),
        Effect.timeout(linger),
        Effect.ignore,
        Effect.ensuring(this.destroy)
      )
    })
}

/** A transport over a readable and a writable Node stream (the same object for a socket). */
export const fromStreams = (input: Readable, output: Writable, options: StreamOptions = {}): Transport =>
  new NodeTransport(input, output, options)

/** A transport over a connected socket (or any Node duplex). */
export const fromDuplex = (duplex: Readable & Writable): Transport => new NodeTransport(duplex, duplex, {})

/** A socket error's `code` (`ENOENT`, `ECONNREFUSED`…), or its message when it has none. */
export const errorCode = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : error instanceof Error
    ? error.message
    : "unknown error"
