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
 * The parts live in `connection/`, one module per concern: settings
 * (`Options`), the frames it writes itself (`Frames`), the state of a
 * connection (`State`), reading and dispatching frames (`Dispatch`), the
 * exchanges (`Exchanges`) and the server's own deadlines (`Watchdog`).
 * This module is their public face: `serve` and `refuse`.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Frame from "../protocol/Frame.js"
import * as Handshake from "../protocol/Handshake.js"
import type * as ProtocolError from "../protocol/ProtocolError.js"
import type { Transport, TransportError } from "../protocol/Transport.js"
import * as Telemetry from "../services/Telemetry.js"
import { Authenticator } from "./Authenticator.js"
import { readLoop } from "./connection/Dispatch.js"
import { errorFrame, handshakeBytes } from "./connection/Frames.js"
import { type Accepted, type Options, PeerWarnings, resolve } from "./connection/Options.js"
import { authenticated, type State } from "./connection/State.js"
import { evicted, watchdog } from "./connection/Watchdog.js"
import { type Outgoing, Router } from "./Router.js"

// Re-exported from the parts, each documented where it is declared.
export { errorFrame } from "./connection/Frames.js"
export {
  type Accepted,
  type Admission,
  AGENT_VERSION,
  defaults,
  type Options,
  PeerWarnings,
  type ReadyTimes,
  resolve
} from "./connection/Options.js"

/** The clock's reading in nanoseconds since the Unix epoch, for `core.ready`. */
const nowNs = Clock.currentTimeNanos

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
