/**
 * The idle timeouts of a host's actors, kept by one fiber instead of a timer
 * race per actor. An actor going idle says so (`idle`), and becoming busy
 * again (`busy`); once it has been idle for the host's `idleTimeout`, its
 * doorbell is expired, and the actor decides whether to passivate.
 *
 * Every actor waits the same timeout, so deadlines come in the order actors
 * went idle: the entries are kept in insertion order and the fiber sleeps
 * until the first one's deadline only. Nobody idle: it waits for someone.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Doorbell from "../internal/Doorbell.js"

/** The host's idleness keeper. */
export interface Idleness {
  /** The actor behind `bell` is idle from now on. */
  readonly idle: (bell: Doorbell.Doorbell) => Effect.Effect<void>
  /** The actor behind `bell` is busy (or gone): no expiry for it. */
  readonly busy: (bell: Doorbell.Doorbell) => void
  /** Expires the doorbells whose deadline passed, forever; the host forks it in its scope. */
  readonly run: Effect.Effect<never>
}

/** Keeps idle deadlines `timeout` after each actor went idle. */
export const make = (timeout: Duration.Duration): Effect.Effect<Idleness> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const millis = Duration.toMillis(timeout)
    const deadlines = new Map<Doorbell.Doorbell, number>()
    // Rung when an actor goes idle while nobody was.
    const someone = Doorbell.make()
    const run = Effect.gen(function*() {
      for (;;) {
        const first = deadlines.entries().next()
        if (first.done === true) {
          yield* someone.wait
          continue
        }
        const [bell, deadline] = first.value
        const left = deadline - clock.unsafeCurrentTimeMillis()
        if (left > 0) {
          yield* Effect.sleep(Duration.millis(left))
          continue
        }
        deadlines.delete(bell)
        bell.expire()
      }
    })
    return {
      idle: (bell) =>
        Effect.sync(() => {
          deadlines.delete(bell)
          deadlines.set(bell, clock.unsafeCurrentTimeMillis() + millis)
          if (deadlines.size === 1) someone.ring()
        }),
      busy: (bell) => {
        deadlines.delete(bell)
        bell.clearExpiry()
      },
      run
    }
  })
