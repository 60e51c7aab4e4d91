/**
 * The exchanges of a connection: each started in a fiber of the
 * connection's `FiberMap`, fed its follow-ups when it is a stream, and
 * answered with one TERMINAL frame.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Envelope from "../../protocol/Envelope.js"
import * as Frame from "../../protocol/Frame.js"
import * as Messages from "../../protocol/Messages.js"
import * as ProtocolError from "../../protocol/ProtocolError.js"
import type { TransportError } from "../../protocol/Transport.js"
import * as Telemetry from "../../services/Telemetry.js"
import type { Exchange, Outgoing, Route, WireError } from "../Router.js"
import { encodeMessage, errorFrame, internalPayload, wirePayload } from "./Frames.js"
import {
  abort,
  type Active,
  CONTINUE,
  invalidFlags,
  peerView,
  release,
  sendError,
  type State,
  type Verdict,
  warn
} from "./State.js"

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
export const start = (state: State, id: number, type: string, payload: unknown, route: Route) =>
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
export const followUp = (state: State, id: number, active: Active, frame: Frame.RawFrame): Effect.Effect<Verdict, TransportError> => {
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
