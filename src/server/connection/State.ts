/**
 * What one connection holds while it is served (`State`, its open
 * exchanges as `Active`), and the small steps every part of it takes:
 * answering with `core.error`, warning about bad input, freeing and
 * aborting exchanges.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import type * as Clock from "effect/Clock"
import type * as Queue from "effect/Queue"
import type * as Frame from "../../protocol/Frame.js"
import * as Messages from "../../protocol/Messages.js"
import * as ProtocolError from "../../protocol/ProtocolError.js"
import type { Transport, TransportError } from "../../protocol/Transport.js"
import type { Principal } from "../../schema/Principal.js"
import type * as ProductEvent from "../../schema/ProductEvent.js"
import * as Telemetry from "../../services/Telemetry.js"
import type { AuthPeer, Authenticator } from "../Authenticator.js"
import type { Outgoing, Peer, Route, Router } from "../Router.js"
import { errorFrame } from "./Frames.js"
import type { Accepted, PeerWarnings, Resolved } from "./Options.js"

/** What handling a frame leaves the connection to do: read on, or close. */
export type Verdict = "continue" | "close"

/** Read on. */
export const CONTINUE: Effect.Effect<Verdict> = Effect.succeed("continue")
/** Close the connection. */
export const CLOSE: Effect.Effect<Verdict> = Effect.succeed("close")

/** An open exchange: a request or a stream (with its queue of follow-ups), until its id is freed. */
export interface Active {
  readonly kind: Route["kind"]
  readonly followUps: Queue.Queue<Outgoing> | undefined
  released: boolean
}

/** What one connection holds while it is served: its parts, its peer, and its open exchanges. */
export interface State {
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

/** Emits a product event when the server has telemetry, excluded from analytics when `excluded`. */
export const report = (state: State, event: ProductEvent.ProductEvent, excluded: boolean): Effect.Effect<void> =>
  Option.isSome(state.telemetry) ? Telemetry.withExcluded(state.telemetry.value.emit(event), excluded) : Effect.void

/** The peer is `who` from now on; the listener no longer counts it as unauthenticated. */
export const authenticated = (state: State, who: Principal): void => {
  state.principal = Option.some(who)
  state.accepted.admission?.authenticated()
}

/** Answers `id` with `core.error` (TERMINAL); the connection reads on. */
export const sendError = (state: State, id: number, payload: ProtocolError.ErrorPayload): Effect.Effect<Verdict, TransportError> =>
  Effect.as(state.transport.write(errorFrame(id, payload)), "continue" as const)

/**
 * Logs a peer's bad input: one line, no cause, rate-limited, since bad input
 * is the peer's problem and a flood of it must not flood the log.
 */
export const warn = (state: State, payload: ProtocolError.ErrorPayload): Effect.Effect<void> => {
  const line = state.warnings.admit(
    state.clock.unsafeCurrentTimeMillis(),
    `bad input from a ${state.accepted.listener} peer (${payload.kind}): ${ProtocolError.truncateUtf8(payload.message)}`
  )
  return line === undefined ? Effect.void : Effect.logWarning(line)
}

/** Warns, sends `core.error` on id 0, and closes the connection: its byte stream cannot be trusted any more. */
export const fatal = (state: State, payload: ProtocolError.ErrorPayload): Effect.Effect<Verdict, TransportError> =>
  Effect.andThen(warn(state, payload), () => Effect.as(state.transport.write(errorFrame(0, payload)), "close" as const))

/** `core.error invalid_flags`: `type` is a `role` frame and came with other flags. */
export const invalidFlags = (state: State, id: number, type: string, role: Messages.Role) =>
  sendError(state, id, {
    kind: "invalid_flags",
    message: `${type} is a ${role.replace("_", "-")} frame: its flags are 0x${Messages.roleFlags[role].toString(16)}`,
    offending_type: type
  })

/** `core.error unsupported_message_type` for `type`. */
export const unsupported = (state: State, id: number, type: string) =>
  sendError(state, id, { kind: "unsupported_message_type", message: `unsupported message type ${type}`, offending_type: type })

/** Frees an exchange's id and its place in the limits, once. */
export const release = (state: State, id: number, active: Active): void => {
  if (active.released) return
  active.released = true
  if (active.kind === "stream") state.streams--
  else state.requests--
  if (state.exchanges.get(id) === active) state.exchanges.delete(id)
}

/** Ends an exchange before its handler did: its fiber is interrupted (not awaited) and its id freed. */
export const abort = (state: State, id: number, active: Active): void => {
  release(state, id, active)
  const fiber = FiberMap.unsafeGet(state.fibers, id)
  if (Option.isSome(fiber)) fiber.value.unsafeInterruptAsFork(fiber.value.id())
}

/** The peer as an exchange's handler sees it now. */
export const peerView = (state: State): Peer => ({
  principal: state.principal,
  excludeFromAnalytics: state.excludeFromAnalytics,
  listener: state.accepted.listener
})
