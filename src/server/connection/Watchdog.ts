/**
 * The ends of a connection the server decides: no successful `auth.hello`
 * by the deadline, no exchange for the idle timeout, or the listener wanting
 * an unauthenticated connection's place.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { TransportError } from "../../protocol/Transport.js"
import { errorFrame, SHUTDOWN_FRAME } from "./Frames.js"
import type { State } from "./State.js"

/**
 * Completes, after telling the peer why, once the connection must end on the
 * server's initiative: no successful auth.hello by the deadline, or no
 * exchange for the idle timeout.
 */
export const watchdog = (state: State): Effect.Effect<void, TransportError> =>
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
export const evicted = (state: State): Effect.Effect<void, TransportError> =>
  state.accepted.admission === undefined
    ? Effect.never
    : Effect.andThen(state.accepted.admission.evicted, () =>
      state.transport.write(errorFrame(0, {
        kind: "busy",
        message: "too many connections are waiting to authenticate; this one waited longest",
        retryable: true
      })))
