/**
 * The raw client tier: frames in, frames out, CBOR left to the caller. The
 * same surface as microsandbox's `AgentClient` (`connect(path)`, `request`,
 * `stream`, `send`, `readyBytes`, `close`), so code written against one runs
 * against the other.
 *
 * Two ways in:
 * - Promise API, for plain TypeScript: `await AgentClient.connect(path)`
 *   (or `connectTcp(host, port)`, `connectNamed(name)`) gives an `AgentClient`
 *   whose methods return promises; `close()` when done.
 * - Effect API: `AgentClient.make(path)` (or `makeTcp`, `makeNamed`) is a
 *   scoped effect giving a `Connection` whose methods are effects; closing
 *   the scope closes it.
 *
 * Correlation ids are allocated sequentially inside the range the server
 * announced, skipping 0 and ids still in use. An id stays in use until its
 * TERMINAL frame arrives, even if the caller stopped waiting, so a late answer
 * can never be mistaken for the answer to a newer exchange. Frames of a stream
 * are buffered up to `streamBuffer`; beyond that, reading from the socket
 * waits for the consumer (the whole connection is paced by its slowest
 * stream, as in microsandbox's client).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as net from "node:net"
import * as Envelope from "../protocol/Envelope.js"
import * as Frame from "../protocol/Frame.js"
import * as Handshake from "../protocol/Handshake.js"
import * as Messages from "../protocol/Messages.js"
import * as Naming from "../protocol/Naming.js"
import type { InvalidName } from "../protocol/ProtocolError.js"
import * as NodeTransport from "../internal/NodeTransport.js"
import * as Transport from "../protocol/Transport.js"
import * as LazyStream from "./LazyStream.js"

/** Frame flag: the last frame for this id. */
export const FLAG_TERMINAL = Frame.FLAG_TERMINAL
/** Frame flag: the first frame of a streaming exchange. */
export const FLAG_SESSION_START = Frame.FLAG_SESSION_START
/** Frame flag: the client is leaving (id 0). */
export const FLAG_SHUTDOWN = Frame.FLAG_SHUTDOWN

/** One frame: correlation id, flags, and the body (the CBOR envelope `{ v, t, p }`) as bytes. */
export type RawFrame = Frame.RawFrame

/** The connection is closed (by `close`, by the server, or by a transport failure); `reason` says which. */
export class Closed extends Schema.TaggedError<Closed>()("Closed", {
  reason: Schema.String
}) {
  override get message() {
    return `connection closed: ${this.reason}`
  }
}

/** The socket could not be opened. */
export class ConnectError extends Schema.TaggedError<ConnectError>()("ConnectError", {
  address: Schema.String,
  /** An errno code (`ENOENT`, `ECONNREFUSED`, …) or a description. */
  reason: Schema.String
}) {
  override get message() {
    return `cannot connect to ${this.address}: ${this.reason}`
  }
}

/** The server did not complete the handshake (id range, then `core.ready`) in time or in form. */
export class HandshakeError extends Schema.TaggedError<HandshakeError>()("HandshakeError", {
  address: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `handshake with ${this.address} failed: ${this.reason}`
  }
}

/** The server answered the handshake with `core.error` (e.g. `busy` at its connection limit). */
export class Refused extends Schema.TaggedError<Refused>()("Refused", {
  address: Schema.String,
  kind: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.address} refused the connection (${this.kind}): ${this.reason}`
  }
}

/** Every id of the range is in use. */
export class IdRangeExhausted extends Schema.TaggedError<IdRangeExhausted>()("IdRangeExhausted", {}) {
  override get message() {
    return "every correlation id of the range is in use"
  }
}

/** A frame that cannot be sent: a body over 4 MiB, unknown flag bits, an id that is not a u32. */
export class InvalidFrame extends Schema.TaggedError<InvalidFrame>()("InvalidFrame", {
  reason: Schema.String
}) {
  override get message() {
    return `invalid frame: ${this.reason}`
  }
}

/** What a call on an open connection can fail with. */
export type ClientError = Closed | IdRangeExhausted | InvalidFrame

/** What connecting can fail with. */
export type ConnectFailure = ConnectError | HandshakeError | Refused

/** Connection settings. */
export interface ConnectOptions {
  /** Bound on connecting and the handshake (default 10 s; a number is milliseconds). */
  readonly timeout?: Duration.DurationInput | undefined
  /** `timeout` in milliseconds, as microsandbox's client spells it. */
  readonly timeoutMs?: number | undefined
  /** Frames buffered per stream before reading waits for the consumer (default 1024). */
  readonly streamBuffer?: number | undefined
  /** How long `close` waits for the server to hang up after `core.shutdown` (default 1 s). */
  readonly closeTimeout?: Duration.DurationInput | undefined
}

/** An open streaming exchange: its id (for `send`), its frames as an Effect `Stream` and as an async iterator. */
export class AgentStream implements AsyncIterableIterator<RawFrame> {
  private stream: Stream.Stream<RawFrame, ClientError> | undefined

  /**
   * Every frame buffered, waiting for one when there is none; an empty chunk
   * after the TERMINAL one (or after `close`). A consumer that takes frames in
   * bulk pays per chunk, not per frame.
   */
  readonly pullChunk: Effect.Effect<Chunk.Chunk<RawFrame>, ClientError>

  constructor(
    /** The correlation id; pass it to `send` for follow-up frames. */
    readonly id: number,
    /** The next frame, `None` after the TERMINAL one (or after `close`). */
    readonly pull: Effect.Effect<Option.Option<RawFrame>, ClientError>,
    /** Stops delivering frames; the id stays reserved until the server ends the exchange. */
    readonly cancel: Effect.Effect<void>,
    pullChunk?: Effect.Effect<Chunk.Chunk<RawFrame>, ClientError>
  ) {
    this.pullChunk = pullChunk ?? Effect.map(pull, Option.match({ onNone: () => Chunk.empty(), onSome: Chunk.of }))
  }

  /**
   * Its frames, ending after the TERMINAL one. Consume either this or the iterator, once.
   * (Made when first read, with the `effect/Stream` its connection loaded: `LazyStream`.)
   */
  get frames(): Stream.Stream<RawFrame, ClientError> {
    this.stream ??= LazyStream.get().repeatEffectChunkOption(
      Effect.flatMap(
        Effect.mapError(this.pullChunk, Option.some),
        (chunk) => (Chunk.isEmpty(chunk) ? Effect.fail(Option.none()) : Effect.succeed(chunk))
      )
    )
    return this.stream
  }

  /** The next frame. */
  next(): Promise<IteratorResult<RawFrame>> {
    return runPromise(this.pull).then((frame): IteratorResult<RawFrame> =>
      Option.isSome(frame) ? { done: false, value: frame.value } : { done: true, value: undefined }
    )
  }

  /** Stops the iteration (a `break` out of `for await` calls this). */
  async return(): Promise<IteratorResult<RawFrame>> {
    await this.close()
    return { done: true, value: undefined }
  }

  /** Stops delivering frames. Idempotent. */
  close(): Promise<void> {
    return runPromise(this.cancel)
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<RawFrame> {
    return this
  }
}

/** The Effect API of an open connection. */
export interface Connection {
  /** Where it is connected (`unix:<path>` or `tcp:<host>:<port>`). */
  readonly address: string
  /** The correlation ids the server handed out. */
  readonly idRange: Handshake.IdRange
  /** The body bytes of the `core.ready` frame received in the handshake. */
  readonly readyBytes: () => Uint8Array
  /** Sends one frame and waits for the first frame on its id (the TERMINAL answer of a request). */
  readonly request: (flags: number, body: Uint8Array) => Effect.Effect<RawFrame, ClientError>
  /** Opens a streaming exchange (pass `FLAG_SESSION_START`). */
  readonly stream: (flags: number, body: Uint8Array) => Effect.Effect<AgentStream, ClientError>
  /** Sends a frame on an id of the caller's choosing, e.g. a follow-up on an open stream. */
  readonly send: (id: number, flags: number, body: Uint8Array) => Effect.Effect<void, ClientError>
  /** Sends `core.shutdown` and closes; pending calls fail with `Closed`. Idempotent. */
  readonly close: Effect.Effect<void>
  /** Completes with the reason once the connection is closed, whoever closed it. */
  readonly closed: Effect.Effect<Closed>
}

const DEFAULT_TIMEOUT = Duration.seconds(10)
const DEFAULT_STREAM_BUFFER = 1024
const DEFAULT_CLOSE_TIMEOUT = Duration.seconds(1)

const SHUTDOWN_FRAME = Frame.encodeUnsafe({
  id: 0,
  flags: Frame.FLAG_SHUTDOWN,
  body: Envelope.encodeBodyUnsafe(Messages.Type.shutdown, null)
})

/** Runs an effect for the Promise API, rejecting with the typed error itself rather than a wrapper. */
const runPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  })

// Opens the socket and wraps it at once: the transport's listeners must be in place before any error can be emitted.
const openSocket = (options: net.NetConnectOpts, address: string): Effect.Effect<Transport.Transport, ConnectError> =>
  Effect.async<Transport.Transport, ConnectError>((resume) => {
    const socket = net.connect(options)
    const onError = (error: unknown) => {
      socket.destroy()
      resume(Effect.fail(new ConnectError({ address, reason: NodeTransport.errorCode(error) })))
    }
    socket.once("error", onError)
    socket.once("connect", () => {
      socket.off("error", onError)
      if ("port" in options) socket.setNoDelay(true)
      resume(Effect.succeed(NodeTransport.fromDuplex(socket)))
    })
    return Effect.sync(() => socket.destroy())
  })

interface Handshaken {
  readonly range: Handshake.IdRange
  readonly readyBody: Uint8Array
  readonly decoder: Frame.Decoder
  /** Frames that arrived right behind `core.ready`. */
  readonly early: ReadonlyArray<RawFrame>
}

const handshake = (
  transport: Transport.Transport,
  address: string
): Effect.Effect<Handshaken, HandshakeError | Refused> =>
  Effect.gen(function*() {
    const fail = (reason: string) => new HandshakeError({ address, reason })
    const read = Effect.flatMap(
      Effect.mapError(transport.read, (error) => fail(error.reason)),
      Option.match({
        onNone: () => Effect.fail(fail("the server closed the connection")),
        onSome: Effect.succeed
      })
    )
    let head: Uint8Array = new Uint8Array(0)
    while (head.length < Handshake.PREAMBLE_SIZE) head = Buffer.concat([head, yield* read])
    const range = yield* Either.mapLeft(Handshake.decodePreamble(head), (error) => fail(error.reason))
    const decoder = Frame.makeDecoder()
    let decoded = decoder.push(head.subarray(Handshake.PREAMBLE_SIZE))
    while (decoded.frames.length === 0 && decoded.error === undefined) decoded = decoder.push(yield* read)
    if (decoded.error !== undefined) return yield* Effect.fail(fail(decoded.error.message))
    const [first, ...early] = decoded.frames
    const body = yield* Either.mapLeft(Envelope.decodeBody(first!.body), (error) => fail(error.message))
    if (first!.id === 0 && body.t === Messages.Type.error) {
      const payload = body.payload
      const field = (name: string): string =>
        typeof payload === "object" && payload !== null && name in payload &&
          typeof (payload as Record<string, unknown>)[name] === "string"
          ? (payload as Record<string, string>)[name]!
          : "unknown"
      return yield* Effect.fail(new Refused({ address, kind: field("kind"), reason: field("message") }))
    }
    if (first!.id !== 0 || body.t !== Handshake.READY_TYPE) {
      return yield* Effect.fail(fail(`expected core.ready on id 0, got ${body.t} on id ${first!.id}`))
    }
    return { range, readyBody: first!.body, decoder, early }
  })

type Entry =
  | {
    readonly _tag: "Request"
    /** The answer, once there is one and nobody waits for it yet. */
    result: Exit.Exit<RawFrame, ClientError> | undefined
    /** The waiting caller. */
    resume: ((exit: Exit.Exit<RawFrame, ClientError>) => void) | undefined
    answered: boolean
  }
  | {
    readonly _tag: "Stream"
    readonly frames: Queue.Queue<RawFrame>
    readonly failure: Deferred.Deferred<never, ClientError>
    /** The consumer has had the TERMINAL frame, or stopped listening. */
    done: boolean
  }

/** What the reader and the callers of one open connection share. */
interface State {
  readonly transport: Transport.Transport
  /** The exchanges whose TERMINAL frame has not arrived, by id. */
  readonly pending: Map<number, Entry>
  readonly closedSignal: Deferred.Deferred<Closed>
  /** The range's first usable id (never 0), and how many ids it has. */
  readonly first: number
  readonly size: number
  readonly endExclusive: number
  readonly streamBuffer: number
  nextId: number
  closedWith: Closed | undefined
  closing: boolean
  /** The last core.error the server sent on id 0: why it is about to hang up. */
  serverError: string | undefined
}

// Plain callbacks rather than a Deferred: a Deferred per request is a measurable share of a pipelined client's CPU.
const answerEntry = (entry: Extract<Entry, { _tag: "Request" }>, exit: Exit.Exit<RawFrame, ClientError>): void => {
  entry.answered = true
  if (entry.resume === undefined) entry.result = exit
  else entry.resume(exit)
}

/** Marks the connection closed for `reason` (once): every pending call fails with the same `Closed`. */
const shutdown = (state: State, reason: string): Closed => {
  if (state.closedWith !== undefined) return state.closedWith
  const error = new Closed({ reason })
  state.closedWith = error
  for (const entry of state.pending.values()) {
    if (entry._tag === "Stream") Deferred.unsafeDone(entry.failure, Exit.fail(error))
    else if (!entry.answered) answerEntry(entry, Exit.fail(error))
  }
  state.pending.clear()
  Deferred.unsafeDone(state.closedSignal, Exit.succeed(error))
  return error
}

// Routes a frame; an effect only when the reader must wait (a stream's buffer is full), so a chunk of
// frames costs the reader fiber one step rather than one per frame.
const dispatch = (state: State, frame: RawFrame): Effect.Effect<void> | undefined => {
  if (frame.id === 0) {
    const body = Envelope.decodeBody(frame.body)
    if (Either.isRight(body) && body.right.t === Messages.Type.error) {
      const payload = body.right.payload as { readonly kind?: unknown; readonly message?: unknown } | null
      state.serverError = `server error (${String(payload?.kind)}): ${String(payload?.message)}`
    }
    return undefined
  }
  const entry = state.pending.get(frame.id)
  if (entry === undefined) return undefined
  if (Frame.hasFlag(frame.flags, Frame.FLAG_TERMINAL)) state.pending.delete(frame.id)
  if (entry._tag === "Request") {
    if (!entry.answered) answerEntry(entry, Exit.succeed(frame))
    return undefined
  }
  // Straight in while there is room; only a full buffer makes the reader wait (backpressure).
  if (entry.done || Queue.unsafeOffer(entry.frames, frame)) return undefined
  return Queue.offer(entry.frames, frame)
}

const dispatchAll = (state: State, frames: ReadonlyArray<RawFrame>) =>
  Effect.suspend(function loop(from = 0): Effect.Effect<void> {
    for (let i = from; i < frames.length; i++) {
      const wait = dispatch(state, frames[i]!)
      if (wait !== undefined) return Effect.andThen(wait, () => loop(i + 1))
    }
    return Effect.void
  })

/** Reads and routes frames until the server hangs up or the stream fails; then closes the connection, saying why. */
const reader = (state: State, decoder: Frame.Decoder, early: ReadonlyArray<RawFrame>): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* dispatchAll(state, early)
    for (;;) {
      const chunk = yield* state.transport.read
      if (Option.isNone(chunk)) return state.serverError ?? "the server closed the connection"
      const decoded = decoder.push(chunk.value)
      yield* dispatchAll(state, decoded.frames)
      if (decoded.error !== undefined) return `framing error: ${decoded.error.message}`
    }
  }).pipe(
    Effect.catchAll((error) => Effect.succeed(state.serverError ?? `transport ${error.reason}`)),
    Effect.flatMap((reason) => Effect.andThen(Effect.sync(() => shutdown(state, reason)), state.transport.destroy))
  )

/** The next id of the range not in use, round the whole range; undefined when every one is. */
const allocate = (state: State): number | undefined => {
  if (state.pending.size >= state.size) return undefined
  for (;;) {
    const id = state.nextId
    state.nextId = state.nextId + 1 >= state.endExclusive ? state.first : state.nextId + 1
    if (!state.pending.has(id)) return id
  }
}

const written = (state: State) => (error: Transport.TransportError) =>
  state.closedWith ?? new Closed({ reason: `transport ${error.reason}` })

/** Reserves an id, registers its entry and sends the opening frame; a send that never happened frees the id. */
const begin = (state: State, flags: number, body: Uint8Array, entry: (id: number) => Entry) =>
  Effect.suspend((): Effect.Effect<number, ClientError> => {
    if (state.closedWith !== undefined) return Effect.fail(state.closedWith)
    const id = allocate(state)
    if (id === undefined) return Effect.fail(new IdRangeExhausted())
    const bytes = Frame.encode({ id, flags, body })
    if (Either.isLeft(bytes)) return Effect.fail(new InvalidFrame({ reason: bytes.left.message }))
    state.pending.set(id, entry(id))
    return state.transport.write(bytes.right).pipe(
      Effect.mapError(written(state)),
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => state.pending.delete(id))),
      Effect.as(id)
    )
  })

const request = (state: State, flags: number, body: Uint8Array): Effect.Effect<RawFrame, ClientError> =>
  Effect.suspend(() => {
    const entry: Extract<Entry, { _tag: "Request" }> = {
      _tag: "Request",
      result: undefined,
      resume: undefined,
      answered: false
    }
    const awaitAnswer = Effect.async<RawFrame, ClientError>((resume) => {
      if (entry.result !== undefined) return resume(entry.result)
      entry.resume = resume
      // An interrupted caller stops waiting; the id stays reserved until the answer arrives.
      return Effect.sync(() => {
        entry.resume = undefined
      })
    })
    return Effect.andThen(begin(state, flags, body, () => entry), awaitAnswer)
  })

const stream = (state: State, flags: number, body: Uint8Array): Effect.Effect<AgentStream, ClientError> =>
  Effect.gen(function*() {
    const entry = {
      _tag: "Stream" as const,
      frames: yield* Queue.bounded<RawFrame>(state.streamBuffer),
      failure: yield* Deferred.make<never, ClientError>(),
      done: false
    }
    const id = yield* begin(state, flags, body, () => entry)
    const pull = Effect.suspend((): Effect.Effect<Option.Option<RawFrame>, ClientError> => {
      if (entry.done) return Effect.succeed(Option.none())
      return Queue.poll(entry.frames).pipe(
        Effect.flatMap(Option.match({
          onSome: (frame) => Effect.succeed(frame),
          onNone: () => Effect.raceFirst(Queue.take(entry.frames), Deferred.await(entry.failure))
        })),
        Effect.map((frame) => {
          if (Frame.hasFlag(frame.flags, Frame.FLAG_TERMINAL)) entry.done = true
          return Option.some(frame)
        })
      )
    })
    const pullChunk = Effect.suspend((): Effect.Effect<Chunk.Chunk<RawFrame>, ClientError> => {
      if (entry.done) return Effect.succeed(Chunk.empty())
      return Queue.takeAll(entry.frames).pipe(
        Effect.flatMap((chunk) =>
          Chunk.isEmpty(chunk)
            ? Effect.map(Effect.raceFirst(Queue.take(entry.frames), Deferred.await(entry.failure)), Chunk.of)
            : Effect.succeed(chunk)
        ),
        Effect.map((chunk) => {
          const end = Chunk.findFirstIndex(chunk, (frame) => Frame.hasFlag(frame.flags, Frame.FLAG_TERMINAL))
          if (Option.isNone(end)) return chunk
          entry.done = true
          return Chunk.take(chunk, end.value + 1)
        })
      )
    })
    const cancel = Effect.suspend(() => {
      entry.done = true
      // Frees a reader waiting for room in this stream's buffer; later frames are dropped.
      return Queue.takeAll(entry.frames)
    })
    return new AgentStream(id, pull, Effect.asVoid(cancel), pullChunk)
  })

const send = (state: State, id: number, flags: number, body: Uint8Array): Effect.Effect<void, ClientError> =>
  Effect.suspend((): Effect.Effect<void, ClientError> => {
    if (state.closedWith !== undefined) return Effect.fail(state.closedWith)
    const bytes = Frame.encode({ id, flags, body })
    if (Either.isLeft(bytes)) return Effect.fail(new InvalidFrame({ reason: bytes.left.message }))
    return Effect.mapError(state.transport.write(bytes.right), written(state))
  })

/** Stops the reader, then says `core.shutdown` (unless the connection is already closed) and closes. Idempotent. */
const close = (state: State, readerFiber: Fiber.RuntimeFiber<void>, closeTimeout: Duration.DurationInput): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (state.closing) return Effect.void
    state.closing = true
    const alreadyClosed = state.closedWith !== undefined
    shutdown(state, "closed by the client")
    return Fiber.interrupt(readerFiber).pipe(
      Effect.andThen(
        alreadyClosed
          ? state.transport.destroy
          : state.transport.write(SHUTDOWN_FRAME).pipe(
            Effect.timeout(closeTimeout),
            Effect.ignore,
            Effect.andThen(state.transport.close(closeTimeout))
          )
      )
    )
  })

/** Connects, completes the handshake, and starts reading, in the current scope. */
const open = (
  connectTransport: Effect.Effect<Transport.Transport, ConnectError>,
  address: string,
  options: ConnectOptions
): Effect.Effect<Connection, ConnectFailure, Scope.Scope> =>
  Effect.gen(function*() {
    // What a connection's streams are made with, loaded before the first one opens.
    yield* LazyStream.load
    const timeout = options.timeout ?? options.timeoutMs ?? DEFAULT_TIMEOUT
    const closeTimeout = options.closeTimeout ?? DEFAULT_CLOSE_TIMEOUT
    const scope = yield* Effect.scope
    const { shaken, transport } = yield* Effect.gen(function*() {
      // Connecting stays interruptible (a TCP connect can hang); the socket is owned by the scope once open.
      const transport = yield* Effect.uninterruptibleMask((restore) =>
        Effect.tap(restore(connectTransport), (transport) => Scope.addFinalizer(scope, transport.destroy))
      )
      return { shaken: yield* handshake(transport, address), transport }
    }).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => new HandshakeError({ address, reason: `no core.ready within ${Duration.format(timeout)}` })
      })
    )
    const { decoder, early, range, readyBody } = shaken
    const first = Math.max(range.start, 1)
    const state: State = {
      transport,
      pending: new Map(),
      closedSignal: yield* Deferred.make<Closed>(),
      first,
      size: range.endExclusive - first,
      endExclusive: range.endExclusive,
      streamBuffer: options.streamBuffer ?? DEFAULT_STREAM_BUFFER,
      nextId: first,
      closedWith: undefined,
      closing: false,
      serverError: undefined
    }
    const readerFiber = yield* Effect.forkIn(reader(state, decoder, early), scope)
    const closeIt = close(state, readerFiber, closeTimeout)
    yield* Scope.addFinalizer(scope, closeIt)

    return {
      address,
      idRange: range,
      readyBytes: () => readyBody,
      request: (flags, body) => request(state, flags, body),
      stream: (flags, body) => stream(state, flags, body),
      send: (id, flags, body) => send(state, id, flags, body),
      close: closeIt,
      closed: Deferred.await(state.closedSignal)
    } satisfies Connection
  })

/** Connects to a unix socket (Effect API): a scoped `Connection`. */
export const make = (path: string, options: ConnectOptions = {}): Effect.Effect<Connection, ConnectFailure, Scope.Scope> =>
  open(openSocket({ path }, `unix:${path}`), `unix:${path}`, options)

/** Connects over TCP (Effect API): a scoped `Connection`. */
export const makeTcp = (
  host: string,
  port: number,
  options: ConnectOptions = {}
): Effect.Effect<Connection, ConnectFailure, Scope.Scope> => {
  const address = `tcp:${host.includes(":") ? `[${host}]` : host}:${port}`
  return open(openSocket({ host, port }, address), address, options)
}

/** Connects to the daemon named `name` (Effect API): see `Naming.socketPath`. */
export const makeNamed = (
  name: string,
  options: ConnectOptions = {}
): Effect.Effect<Connection, ConnectFailure | InvalidName, Scope.Scope> =>
  Naming.socketPath(name).pipe(
    Effect.catchTag("ConfigError", (error) => Effect.fail(new ConnectError({ address: name, reason: error.message }))),
    Effect.flatMap((path) => make(path, options))
  )

/** The Promise API: a connection whose methods return promises. */
export class AgentClient {
  private constructor(
    /** The Effect API of this same connection. */
    readonly connection: Connection,
    private readonly scope: Scope.CloseableScope
  ) {}

  private static open<E>(effect: Effect.Effect<Connection, E, Scope.Scope>): Promise<AgentClient> {
    return runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const connection = yield* Scope.extend(effect, scope).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
      return new AgentClient(connection, scope)
    }))
  }

  /** Connects to a unix socket. */
  static connect(path: string, options: ConnectOptions = {}): Promise<AgentClient> {
    return AgentClient.open(make(path, options))
  }

  /** Connects over TCP. */
  static connectTcp(host: string, port: number, options: ConnectOptions = {}): Promise<AgentClient> {
    return AgentClient.open(makeTcp(host, port, options))
  }

  /** Connects to the daemon named `name`. */
  static connectNamed(name: string, options: ConnectOptions = {}): Promise<AgentClient> {
    return AgentClient.open(makeNamed(name, options))
  }

  /** The socket path of the daemon named `name` (`$TROUPE_HOME` or `~/.troupe`); throws `InvalidName`. */
  static socketPath(name: string): string {
    const path = Effect.runSync(Effect.either(Naming.socketPath(name)))
    if (Either.isLeft(path)) throw path.left
    return path.right
  }

  /** Where it is connected. */
  get address(): string {
    return this.connection.address
  }

  /** Sends one frame and resolves with the first frame on its id. */
  request(flags: number, body: Uint8Array): Promise<RawFrame> {
    return runPromise(this.connection.request(flags, body))
  }

  /** Opens a streaming exchange. */
  stream(flags: number, body: Uint8Array): Promise<AgentStream> {
    return runPromise(this.connection.stream(flags, body))
  }

  /** Sends a frame on an existing id (a follow-up on an open stream). */
  send(id: number, flags: number, body: Uint8Array): Promise<void> {
    return runPromise(this.connection.send(id, flags, body))
  }

  /** The body bytes of the `core.ready` frame received in the handshake. */
  readyBytes(): Uint8Array {
    return this.connection.readyBytes()
  }

  /** Closes the connection; pending calls reject with `Closed`. Idempotent. */
  close(): Promise<void> {
    return runPromise(Scope.close(this.scope, Exit.void))
  }
}

/** Connects to a unix socket (Promise API). */
export const connect = (path: string, options?: ConnectOptions): Promise<AgentClient> => AgentClient.connect(path, options)

/** Connects over TCP (Promise API). */
export const connectTcp = (host: string, port: number, options?: ConnectOptions): Promise<AgentClient> =>
  AgentClient.connectTcp(host, port, options)

/** Connects to the daemon named `name` (Promise API). */
export const connectNamed = (name: string, options?: ConnectOptions): Promise<AgentClient> =>
  AgentClient.connectNamed(name, options)

/** The socket path of the daemon named `name`; throws `InvalidName`. */
export const socketPath = (name: string): string => AgentClient.socketPath(name)
