/**
 * How a connection reads: frames decoded in order, each checked against
 * the limits and its id, then taken as a follow-up of an open stream, a
 * `core.*` or `auth.hello` answered here, or a new exchange.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Envelope from "../../protocol/Envelope.js"
import * as Frame from "../../protocol/Frame.js"
import * as Messages from "../../protocol/Messages.js"
import * as ProtocolError from "../../protocol/ProtocolError.js"
import type { TransportError } from "../../protocol/Transport.js"
import * as ProductEvent from "../../schema/ProductEvent.js"
import { followUp, start } from "./Exchanges.js"
import { encodeMessage, internalPayload, PONG_BODY, wirePayload } from "./Frames.js"
import {
  abort,
  authenticated,
  CLOSE,
  fatal,
  invalidFlags,
  report,
  sendError,
  type State,
  unsupported,
  type Verdict,
  warn
} from "./State.js"

const encodeWelcome = Schema.encodeSync(Messages.AuthWelcome)
const decodeHello = Schema.decodeUnknownEither(Messages.AuthHello)

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
export const readLoop = (state: State): Effect.Effect<void, TransportError> =>
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
