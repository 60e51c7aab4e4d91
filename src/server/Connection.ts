/**
 * Serves one connection over a `Transport` (unix socket, TCP socket or
 * stdio): the handshake, incremental framing, `core.*` and `auth.hello`, and
 * every other message through the `Router`, with the errors and limits of
 * PROTOCOL.md.
 *
 * One connection is one scope. Each exchange runs in a fiber of a `FiberMap`
 * keyed by its correlation id and owned by that scope, so closing the
 * connection (EOF, `core.shutdown`, a fatal framing error, the listener
 * shutting down) interrupts every handler it started. Nothing a peer sends
 * can fail the connection's fiber: malformed input is answered and, when the
 * byte stream cannot be trusted any more, the connection is closed; handler
 * defects are answered with `internal`.
 *
 * Reading is paced by the connection: frames are handled in order as they are
 * decoded, and the next chunk is only read once the previous one's frames were
 * dispatched. A client that does not read its answers therefore stops being
 * read itself once the write buffer is full.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Duration, Effect, Either, Exit, FiberMap, Option, Queue, Schema } from "effect"
import * as Envelope from "../protocol/Envelope.js"
import * as Frame from "../protocol/Frame.js"
import * as Handshake from "../protocol/Handshake.js"
import * as Messages from "../protocol/Messages.js"
import * as ProtocolError from "../protocol/ProtocolError.js"
import type { Transport, TransportError } from "../protocol/Transport.js"
import type { Principal } from "../schema/Principal.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import * as Telemetry from "../services/Telemetry.js"
import { type AuthPeer, Authenticator } from "./Authenticator.js"
import { type Exchange, type Outgoing, type Peer, type Route, Router, WireError } from "./Router.js"

/** The `agent_version` a daemon announces in `core.ready`. */
export const AGENT_VERSION = "troupe 0.1.0"

/** Limits and settings of a connection; every field has a default. */
export interface Options {
  /** The correlation ids the client may use (default: all of `[1, 2^32-1)`). */
  readonly idRange?: Handshake.IdRange | undefined
  /** The largest `len` accepted (default and maximum 4 MiB); a larger frame is `FrameTooLarge` and closes the connection. */
  readonly maxFrameSize?: number | undefined
  /** Open streams per connection (default 64); one more is answered with `busy`. */
  readonly maxStreams?: number | undefined
  /** Requests in flight per connection (default 256); one more is answered with `busy`. */
  readonly maxInFlight?: number | undefined
  /** Follow-up frames buffered per stream before its handler takes them (default 64); one more ends the stream with `busy`. */
  readonly maxFollowUps?: number | undefined
  /** How long closing waits for the peer to read our last frames and hang up (default 2 s). */
  readonly closeTimeout?: Duration.DurationInput | undefined
  /** The `agent_version` announced in `core.ready`. */
  readonly agentVersion?: string | undefined
  /**
   * How long a peer that must authenticate has for `auth.hello` to succeed
   * (default 10 s); then it gets `core.error { kind: "unauthenticated" }` on
   * id 0 and is closed. `Duration.infinity` never closes it.
   */
  readonly authTimeout?: Duration.DurationInput | undefined
  /**
   * How long a connection may stay without an exchange before it is closed
   * with `core.shutdown` on id 0 (default: never). An open stream (an event
   * subscription, a callback provider) or a request in flight is an exchange,
   * so such a connection is never idle.
   */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * Frames a peer that must authenticate may send before an `auth.hello`
   * succeeds (default 32); one more gets `core.error unauthenticated` on id 0
   * and the connection is closed. Bounds what a peer without a token can make
   * the daemon do (and how many tokens it can try) per connection.
   */
  readonly maxUnauthenticatedFrames?: number | undefined
  /** Where warnings about a peer's bad input go, rate-limited (default: one limiter per connection). */
  readonly warnings?: PeerWarnings | undefined
}

/**
 * A rate limit on the warning lines bad peer input causes: at most one per
 * `interval`, telling how many were held back since the last. Shared by the
 * connections of a server, so a flood of bad frames costs one line a second.
 */
export class PeerWarnings {
  private next = 0
  private held = 0
  constructor(private readonly intervalMillis: number = 1000) {}

  /** The line to log for `what` now, or undefined while the limit holds it back. */
  admit(nowMillis: number, what: string): string | undefined {
    if (nowMillis < this.next) {
      this.held++
      return undefined
    }
    this.next = nowMillis + this.intervalMillis
    const held = this.held
    this.held = 0
    return held === 0 ? what : `${what} (and ${held} more since the last warning)`
  }
}

/** The defaults of `Options`. */
export const defaults = {
  idRange: Handshake.IdRange.whole,
  maxFrameSize: Frame.MAX_FRAME_LEN,
  maxStreams: 64,
  maxInFlight: 256,
  maxFollowUps: 64,
  closeTimeout: Duration.seconds(2),
  agentVersion: AGENT_VERSION,
  authTimeout: Duration.seconds(10),
  maxUnauthenticatedFrames: 32
} as const

/** Clock readings announced in `core.ready`, as nanoseconds since the Unix epoch. */
export interface ReadyTimes {
  /** When the daemon process started. */
  readonly bootTimeNs: bigint
  /** When the server began to set up. */
  readonly initTimeNs: bigint
  /** When the listener that accepted the connection was bound. */
  readonly readyTimeNs: bigint
}

/**
 * A listener's hold on a connection that has not authenticated yet: the
 * connection reports when it has, and gives way (`core.error busy` on id 0,
 * then close) when the listener needs its place for a newer one.
 */
export interface Admission {
  /** Called once the peer is authenticated: it no longer counts as unauthenticated. */
  readonly authenticated: () => void
  /** Completes when the listener wants this unauthenticated connection gone. */
  readonly evicted: Effect.Effect<void>
}

/** What the listener knows about an accepted connection. */
export interface Accepted extends AuthPeer {
  /** Readings for `core.ready`; the connection's accept time for all three when absent. */
  readonly times?: ReadyTimes | undefined
  /** The listener's limit on unauthenticated connections, if it has one. */
  readonly admission?: Admission | undefined
}

interface Resolved {
  readonly idRange: Handshake.IdRange
  readonly maxFrameSize: number
  readonly maxStreams: number
  readonly maxInFlight: number
  readonly maxFollowUps: number
  readonly closeTimeout: Duration.DurationInput
  readonly agentVersion: string
  readonly authTimeout: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly maxUnauthenticatedFrames: number
  readonly warnings: PeerWarnings | undefined
}

/** `options` with the defaults filled in. */
export const resolve = (options: Options = {}): Resolved => ({
  idRange: options.idRange ?? defaults.idRange,
  maxFrameSize: Math.min(options.maxFrameSize ?? defaults.maxFrameSize, Frame.MAX_FRAME_LEN),
  maxStreams: options.maxStreams ?? defaults.maxStreams,
  maxInFlight: options.maxInFlight ?? defaults.maxInFlight,
  maxFollowUps: options.maxFollowUps ?? defaults.maxFollowUps,
  closeTimeout: options.closeTimeout ?? defaults.closeTimeout,
  agentVersion: options.agentVersion ?? defaults.agentVersion,
  authTimeout: Duration.decode(options.authTimeout ?? defaults.authTimeout),
  idleTimeout: options.idleTimeout === undefined ? Duration.infinity : Duration.decode(options.idleTimeout),
  maxUnauthenticatedFrames: options.maxUnauthenticatedFrames ?? defaults.maxUnauthenticatedFrames,
  warnings: options.warnings
})

type Verdict = "continue" | "close"

const CONTINUE: Effect.Effect<Verdict> = Effect.succeed("continue")
const CLOSE: Effect.Effect<Verdict> = Effect.succeed("close")

// Bodies that never change, encoded once.
const PONG_BODY = Envelope.encodeBodyUnsafe(Messages.Type.pong, {})
const SHUTDOWN_FRAME = Frame.encodeUnsafe({
  id: 0,
  flags: Frame.FLAG_SHUTDOWN,
  body: Envelope.encodeBodyUnsafe(Messages.Type.shutdown, null)
})

const encodeWelcome = Schema.encodeSync(Messages.AuthWelcome)
const decodeHello = Schema.decodeUnknownEither(Messages.AuthHello)

/** The frame bytes of a message, or why it cannot be sent. */
const encodeMessage = (id: number, flags: number, type: string, payload: unknown): Either.Either<Uint8Array, string> => {
  const body = Envelope.encodeBody(type, payload)
  if (Either.isLeft(body)) return Either.left(body.left.reason)
  return Either.mapLeft(Frame.encode({ id, flags, body: body.right }), (error) => error.message)
}

/**
 * The bytes of a `core.error` frame (always TERMINAL). Its `message` and
 * `offending_type` are cut to `ProtocolError.MAX_ECHO_BYTES`, so whatever a
 * peer sent, the frame is small; `details` that cannot be encoded are left out.
 */
export const errorFrame = (id: number, unbounded: ProtocolError.ErrorPayload): Uint8Array => {
  const payload = ProtocolError.bounded(unbounded)
  const bytes = encodeMessage(id, Frame.FLAG_TERMINAL, Messages.Type.error, payload)
  if (Either.isRight(bytes)) return bytes.right
  const { details: _details, ...rest } = payload
  return Frame.encodeUnsafe({
    id,
    flags: Frame.FLAG_TERMINAL,
    body: Envelope.encodeBodyUnsafe(Messages.Type.error, rest)
  })
}

const wirePayload = (error: WireError, type: string): ProtocolError.ErrorPayload => ({
  kind: error.kind,
  message: error.message,
  ...(error.kind === "invalid_payload" || error.kind === "unsupported_message_type" ? { offending_type: type } : {}),
  ...(error.retryable === undefined ? {} : { retryable: error.retryable }),
  ...(error.details === undefined ? {} : { details: error.details })
})

const internalPayload: ProtocolError.ErrorPayload = { kind: "internal", message: "internal error" }

const nowNs = Clock.currentTimeNanos

const handshakeBytes = (range: Handshake.IdRange, ready: Handshake.Ready): Uint8Array =>
  Buffer.concat([Handshake.encodePreamble(range), Frame.encodeUnsafe(Handshake.readyFrame(ready))])

interface Active {
  readonly kind: Route["kind"]
  readonly followUps: Queue.Queue<Outgoing> | undefined
  released: boolean
}

/**
 * Refuses a connection after the id-range preamble: `core.error` on id 0
 * (instead of `core.ready`), then close. Used when the daemon is at its
 * connection limit (`busy`).
 */
export const refuse = (
  transport: Transport,
  error: ProtocolError.ErrorPayload,
  options: Options = {}
): Effect.Effect<void> => {
  const limits = resolve(options)
  return transport.write(Buffer.concat([Handshake.encodePreamble(limits.idRange), errorFrame(0, error)])).pipe(
    Effect.ignore,
    Effect.ensuring(transport.close(limits.closeTimeout))
  )
}

/** What one connection holds while it is served: its parts, its peer, and its open exchanges. */
interface State {
  readonly transport: Transport
  readonly accepted: Accepted
  readonly limits: Resolved
  readonly router: Router["Type"]
  readonly authenticator: Authenticator["Type"]
  /** Optional: a server without telemetry reports nothing. */
  readonly telemetry: Option.Option<Telemetry.Telemetry["Type"]>
  readonly fibers: FiberMap.FiberMap<number>
  /** What a request's exchange sees as its follow-ups: nothing ever arrives there. */
  readonly requestFollowUps: Queue.Queue<Outgoing>
  readonly authPeer: AuthPeer
  readonly decoder: Frame.Decoder
  readonly exchanges: Map<number, Active>
  readonly clock: Clock.Clock
  readonly warnings: PeerWarnings
  requests: number
  streams: number
  unauthenticatedFrames: number
  principal: Option.Option<Principal>
  excludeFromAnalytics: boolean
  /** When the peer last sent something, or an exchange was last seen open: what the idle timeout counts from. */
  lastActivity: number
}

const report = (state: State, event: ProductEvent.ProductEvent, excluded: boolean): Effect.Effect<void> =>
  Option.isSome(state.telemetry) ? Telemetry.withExcluded(state.telemetry.value.emit(event), excluded) : Effect.void

const authenticated = (state: State, who: Principal): void => {
  state.principal = Option.some(who)
  state.accepted.admission?.authenticated()
}

/** The handshake: a trusted-local peer is authenticated before its first frame; then the id range and `core.ready`. */
const greet = (state: State): Effect.Effect<void, TransportError> =>
  Effect.gen(function*() {
    const { accepted, limits } = state
    if (accepted.trustedLocal) {
      const local = yield* Effect.either(state.authenticator.authenticate(undefined, state.authPeer))
      if (Either.isRight(local)) authenticated(state, local.right)
    }
    const acceptedAt = yield* nowNs
    const times = accepted.times ?? { bootTimeNs: acceptedAt, initTimeNs: acceptedAt, readyTimeNs: acceptedAt }
    const ready = new Handshake.Ready({
      boot_time_ns: times.bootTimeNs,
      init_time_ns: times.initTimeNs,
      ready_time_ns: times.readyTimeNs,
      agent_version: limits.agentVersion,
      protocol: Handshake.PROTOCOL,
      auth: Option.isSome(state.principal) ? [] : ["token"]
    })
    yield* state.transport.write(handshakeBytes(limits.idRange, ready))
  })

const sendError = (state: State, id: number, payload: ProtocolError.ErrorPayload): Effect.Effect<Verdict, TransportError> =>
  Effect.as(state.transport.write(errorFrame(id, payload)), "continue" as const)

// One line, no cause, rate-limited: bad input is the peer's problem, and a flood of it must not flood the log.
const warn = (state: State, payload: ProtocolError.ErrorPayload): Effect.Effect<void> => {
  const line = state.warnings.admit(
    state.clock.unsafeCurrentTimeMillis(),
    `bad input from a ${state.accepted.listener} peer (${payload.kind}): ${ProtocolError.truncateUtf8(payload.message)}`
  )
  return line === undefined ? Effect.void : Effect.logWarning(line)
}

const fatal = (state: State, payload: ProtocolError.ErrorPayload): Effect.Effect<Verdict, TransportError> =>
  Effect.andThen(warn(state, payload), () => Effect.as(state.transport.write(errorFrame(0, payload)), "close" as const))

const invalidFlags = (state: State, id: number, type: string, role: Messages.Role) =>
  sendError(state, id, {
    kind: "invalid_flags",
    message: `${type} is a ${role.replace("_", "-")} frame: its flags are 0x${Messages.roleFlags[role].toString(16)}`,
    offending_type: type
  })

const unsupported = (state: State, id: number, type: string) =>
  sendError(state, id, { kind: "unsupported_message_type", message: `unsupported message type ${type}`, offending_type: type })

const release = (state: State, id: number, active: Active): void => {
  if (active.released) return
  active.released = true
  if (active.kind === "stream") state.streams--
  else state.requests--
  if (state.exchanges.get(id) === active) state.exchanges.delete(id)
}

// Ends an exchange before its handler did: its fiber is interrupted (not awaited) and its id freed.
const abort = (state: State, id: number, active: Active): void => {
  release(state, id, active)
  const fiber = FiberMap.unsafeGet(state.fibers, id)
  if (Option.isSome(fiber)) fiber.value.unsafeInterruptAsFork(fiber.value.id())
}

const peerView = (state: State): Peer => ({
  principal: state.principal,
  excludeFromAnalytics: state.excludeFromAnalytics,
  listener: state.accepted.listener
})

/** The TERMINAL frame of an exchange: its handler's answer, or `core.error`. The id is freed as the frame leaves. */
const answer = (state: State, id: number, active: Active, type: string, exit: Exit.Exit<Outgoing, WireError>) => {
  if (active.released) return Effect.void
  const { transport } = state
  const done = () => release(state, id, active)
  if (Exit.isSuccess(exit)) {
    const bytes = encodeMessage(id, Frame.FLAG_TERMINAL, exit.value.type, exit.value.payload)
    if (Either.isRight(bytes)) return transport.write(bytes.right, done)
    return Effect.logError(`answer to ${type} cannot be encoded: ${bytes.left}`).pipe(
      Effect.andThen(() => transport.write(errorFrame(id, internalPayload), done))
    )
  }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return transport.write(errorFrame(id, wirePayload(failure.value, type)), done)
  const payload: ProtocolError.ErrorPayload = Cause.isInterruptedOnly(exit.cause)
    ? { kind: "internal", message: "the exchange was interrupted" }
    : internalPayload
  return Effect.logError(`handler of ${type} failed`, exit.cause).pipe(
    Effect.andThen(() => transport.write(errorFrame(id, payload), done))
  )
}

/** Opens an exchange: its handler runs in a fiber of the connection's `FiberMap`, keyed by its id. */
const start = (state: State, id: number, type: string, payload: unknown, route: Route) =>
  Effect.gen(function*() {
    const followUps = route.kind === "stream" ? yield* Queue.bounded<Outgoing>(state.limits.maxFollowUps) : undefined
    const active: Active = { kind: route.kind, followUps, released: false }
    state.exchanges.set(id, active)
    if (route.kind === "stream") state.streams++
    else state.requests++
    const emit = route.kind === "stream"
      ? (message: Outgoing): Effect.Effect<void> => {
        if (active.released) return Effect.interrupt
        const bytes = encodeMessage(id, 0, message.type, message.payload)
        if (Either.isLeft(bytes)) return Effect.dieMessage(`${message.type} cannot be encoded: ${bytes.left}`)
        return Effect.catchAll(state.transport.write(bytes.right), () => Effect.interrupt)
      }
      : (): Effect.Effect<void> => Effect.dieMessage(`${type} is a request: it cannot emit`)
    const exchange: Exchange = {
      id,
      type,
      payload,
      peer: peerView(state),
      emit,
      followUps: followUps ?? state.requestFollowUps
    }
    const run = route.handler(exchange).pipe(
      // Product events this exchange causes (and the commands it submits) carry the peer's preference.
      Telemetry.withExcluded(exchange.peer.excludeFromAnalytics),
      Effect.exit,
      Effect.flatMap((exit) => answer(state, id, active, type, exit)),
      // A write that fails means the connection is going away; the scope interrupts the rest.
      Effect.ignore,
      Effect.ensuring(Effect.sync(() => release(state, id, active)))
    )
    yield* FiberMap.run(state.fibers, id, run)
    return "continue" as const
  })

/** A frame on the id of an open stream: queued for its handler, or the stream is ended with `core.error`. */
const followUp = (state: State, id: number, active: Active, frame: Frame.RawFrame): Effect.Effect<Verdict, TransportError> => {
  const decoded = Envelope.decodeBody(frame.body)
  if (Either.isLeft(decoded)) {
    abort(state, id, active)
    const payload = ProtocolError.toErrorPayload(decoded.left)
    return Effect.andThen(warn(state, payload), () => sendError(state, id, payload))
  }
  const role = Messages.usageOf(decoded.right.t)?.client
  if (role === "follow_up" && frame.flags !== Messages.roleFlags.follow_up) {
    abort(state, id, active)
    return invalidFlags(state, id, decoded.right.t, role)
  }
  if (!Queue.unsafeOffer(active.followUps!, { type: decoded.right.t, payload: decoded.right.payload })) {
    abort(state, id, active)
    return sendError(state, id, { kind: "busy", message: `more than ${state.limits.maxFollowUps} unread follow-up frames` })
  }
  return CONTINUE
}

/** `auth.hello`: authenticates the connection, or answers why not (and reports `auth.failed`). */
const hello = (state: State, id: number, payload: unknown): Effect.Effect<Verdict, TransportError> => {
  const decoded = decodeHello(payload)
  if (Either.isLeft(decoded)) {
    return report(state, ProductEvent.failure("auth.failed", "invalid_input"), state.excludeFromAnalytics).pipe(
      Effect.andThen(sendError(state, id, {
        kind: "invalid_payload",
        message: `invalid auth.hello payload: ${decoded.left.message}`,
        offending_type: Messages.Type.hello
      }))
    )
  }
  return Effect.either(state.authenticator.authenticate(decoded.right.token, state.authPeer)).pipe(
    Effect.flatMap((result) => {
      if (Either.isLeft(result)) {
        // A refused hello changes nothing; its report is excluded if it asks, or if the connection already is.
        const excluded = (decoded.right.excludeFromAnalytics ?? false) || state.excludeFromAnalytics
        return report(state, ProductEvent.failure("auth.failed", ProductEvent.categoryOf(result.left)), excluded).pipe(
          Effect.andThen(() => sendError(state, id, wirePayload(result.left, Messages.Type.hello)))
        )
      }
      authenticated(state, result.right)
      state.excludeFromAnalytics = decoded.right.excludeFromAnalytics ?? false
      const bytes = encodeMessage(id, Frame.FLAG_TERMINAL, Messages.Type.welcome, encodeWelcome({ principal: result.right }))
      return Either.isRight(bytes)
        ? Effect.as(state.transport.write(bytes.right), "continue" as const)
        : sendError(state, id, internalPayload)
    })
  )
}

/** A frame on a free id: `core.*` and `auth.hello` answered here, any other type started through the router. */
const dispatch = (state: State, id: number, flags: number, body: Uint8Array): Effect.Effect<Verdict, TransportError> => {
  if (Frame.hasFlag(flags, Frame.FLAG_SHUTDOWN)) {
    return sendError(state, id, { kind: "invalid_flags", message: "SHUTDOWN is only valid on id 0" })
  }
  const decoded = Envelope.decodeBody(body)
  if (Either.isLeft(decoded)) {
    const payload = ProtocolError.toErrorPayload(decoded.left)
    return Effect.andThen(warn(state, payload), () => sendError(state, id, payload))
  }
  const { payload, t: type } = decoded.right
  // The table's role for what a client sends, when the type is one of the protocol's.
  const role = Messages.usageOf(type)?.client
  if (type.startsWith("core.") || type === Messages.Type.hello) {
    if (role === undefined) return unsupported(state, id, type)
    // core.shutdown belongs on id 0 (see `handle`): anywhere else its flags are wrong.
    if (role === "shutdown" || flags !== Messages.roleFlags[role]) return invalidFlags(state, id, type, role)
    return type === Messages.Type.hello
      ? hello(state, id, payload)
      : Effect.as(state.transport.write(Frame.encodeUnsafe({ id, flags: Frame.FLAG_TERMINAL, body: PONG_BODY })), "continue")
  }
  if (Option.isNone(state.principal)) {
    return sendError(state, id, { kind: "unauthenticated", message: "authenticate with auth.hello first" })
  }
  const route = state.router.route(type)
  // A follow-up type is only taken on the id of an open stream (see `handle`).
  if (route === undefined || role === "follow_up") return unsupported(state, id, type)
  const expected: Messages.Role = role ?? route.kind
  if (flags !== Messages.roleFlags[expected]) return invalidFlags(state, id, type, expected)
  const { limits } = state
  if (route.kind === "stream" && state.streams >= limits.maxStreams) {
    return sendError(state, id, { kind: "busy", message: `more than ${limits.maxStreams} open streams`, retryable: true })
  }
  if (route.kind === "request" && state.requests >= limits.maxInFlight) {
    return sendError(state, id, { kind: "busy", message: `more than ${limits.maxInFlight} requests in flight`, retryable: true })
  }
  return start(state, id, type, payload, route)
}

/** One decoded frame: the limits and id checks, then a follow-up of an open stream or a new exchange. */
const handle = (state: State, frame: Frame.RawFrame): Effect.Effect<Verdict, TransportError> => {
  const { flags, id } = frame
  const { limits } = state
  if (Option.isNone(state.principal) && ++state.unauthenticatedFrames > limits.maxUnauthenticatedFrames) {
    return fatal(state, {
      kind: "unauthenticated",
      message: `more than ${limits.maxUnauthenticatedFrames} frames without a successful auth.hello`
    })
  }
  if (id === 0) {
    if (Frame.hasFlag(flags, Frame.FLAG_SHUTDOWN)) return CLOSE
    return fatal(state, { kind: "invalid_id", message: "id 0 is reserved for core.shutdown" })
  }
  const range = limits.idRange
  if (!range.contains(id)) {
    return fatal(state, { kind: "invalid_id", message: `id ${id} is outside [${range.start}, ${range.endExclusive})` })
  }
  if (Frame.ID_FLAGS_SIZE + frame.body.length > limits.maxFrameSize) {
    return fatal(state, ProtocolError.toErrorPayload(
      new ProtocolError.FrameTooLarge({ length: Frame.ID_FLAGS_SIZE + frame.body.length, max: limits.maxFrameSize })
    ))
  }
  const active = state.exchanges.get(id)
  if ((flags & ~Frame.KNOWN_FLAGS) !== 0) {
    if (active !== undefined) abort(state, id, active)
    return sendError(state, id, ProtocolError.toErrorPayload(new ProtocolError.InvalidFlags({ flags })))
  }
  if (active !== undefined) {
    // Frames on an open stream are its follow-ups; anything else on a busy id ends what runs there.
    if (active.kind === "stream" && (flags & (Frame.FLAG_SESSION_START | Frame.FLAG_SHUTDOWN)) === 0) {
      return followUp(state, id, active, frame)
    }
    abort(state, id, active)
    return sendError(state, id, { kind: "invalid_id", message: `id ${id} is already in use` })
  }
  return dispatch(state, id, flags, frame.body)
}

/** Reads, decodes and handles frames in order until EOF, `core.shutdown` or a fatal error. */
const readLoop = (state: State): Effect.Effect<void, TransportError> =>
  Effect.gen(function*() {
    for (;;) {
      const chunk = yield* state.transport.read
      if (Option.isNone(chunk)) return
      state.lastActivity = state.clock.unsafeCurrentTimeMillis()
      const decoded = state.decoder.push(chunk.value)
      for (const frame of decoded.frames) {
        if ((yield* handle(state, frame)) === "close") return
      }
      if (decoded.error !== undefined) {
        yield* fatal(state, ProtocolError.toErrorPayload(decoded.error))
        return
      }
    }
  })

// Completes, after telling the peer why, once the connection must end on the server's initiative:
// no successful auth.hello by the deadline, or no exchange for the idle timeout.
const watchdog = (state: State): Effect.Effect<void, TransportError> =>
  Effect.gen(function*() {
    const { clock, limits, transport } = state
    const authMillis = Duration.toMillis(limits.authTimeout)
    if (Option.isNone(state.principal) && Number.isFinite(authMillis)) {
      const deadline = clock.unsafeCurrentTimeMillis() + authMillis
      while (Option.isNone(state.principal)) {
        const left = deadline - clock.unsafeCurrentTimeMillis()
        if (left <= 0) {
          yield* transport.write(errorFrame(0, {
            kind: "unauthenticated",
            message: `no successful auth.hello within ${Duration.format(limits.authTimeout)}`
          }))
          return
        }
        yield* Effect.sleep(left)
      }
    }
    const idleMillis = Duration.toMillis(limits.idleTimeout)
    if (!Number.isFinite(idleMillis)) return yield* Effect.never
    for (;;) {
      const now = clock.unsafeCurrentTimeMillis()
      if (state.exchanges.size > 0) state.lastActivity = now
      const left = state.lastActivity + idleMillis - now
      if (left <= 0) {
        yield* transport.write(SHUTDOWN_FRAME)
        return
      }
      yield* Effect.sleep(left)
    }
  })

/** Completes, after telling the peer, when the listener wants this unauthenticated connection's place. */
const evicted = (state: State): Effect.Effect<void, TransportError> =>
  state.accepted.admission === undefined
    ? Effect.never
    : Effect.andThen(state.accepted.admission.evicted, () =>
      state.transport.write(errorFrame(0, {
        kind: "busy",
        message: "too many connections are waiting to authenticate; this one waited longest",
        retryable: true
      })))

/**
 * Serves one connection until the peer leaves (EOF or `core.shutdown`), a
 * fatal framing error, or interruption; then interrupts its exchanges and
 * closes the transport. Never fails.
 */
export const serve = (
  transport: Transport,
  accepted: Accepted,
  options: Options = {}
): Effect.Effect<void, never, Router | Authenticator> => {
  const limits = resolve(options)
  return Effect.gen(function*() {
    const clock = yield* Effect.clock
    const state: State = {
      transport,
      accepted,
      limits,
      router: yield* Router,
      authenticator: yield* Authenticator,
      telemetry: yield* Effect.serviceOption(Telemetry.Telemetry),
      fibers: yield* FiberMap.make<number>(),
      requestFollowUps: yield* Queue.bounded<Outgoing>(1),
      authPeer: { listener: accepted.listener, trustedLocal: accepted.trustedLocal },
      decoder: Frame.makeDecoder(),
      exchanges: new Map(),
      clock,
      warnings: limits.warnings ?? new PeerWarnings(),
      requests: 0,
      streams: 0,
      unauthenticatedFrames: 0,
      principal: Option.none(),
      excludeFromAnalytics: false,
      lastActivity: clock.unsafeCurrentTimeMillis()
    }
    yield* greet(state)
    const needsWatch = accepted.admission !== undefined ||
      (Option.isNone(state.principal) && Duration.isFinite(limits.authTimeout)) || Duration.isFinite(limits.idleTimeout)
    yield* needsWatch
      ? Effect.raceFirst(readLoop(state), Effect.raceFirst(watchdog(state), evicted(state)))
      : readLoop(state)
  }).pipe(
    Effect.scoped,
    // A transport failure is the peer going away; anything else is a bug, logged, and only this connection ends.
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) || Option.isSome(Cause.failureOption(cause))
        ? Effect.void
        : Effect.logError("connection failed", cause)
    ),
    Effect.ensuring(transport.close(limits.closeTimeout))
  )
}
