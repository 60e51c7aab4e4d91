/**
 * How a host's actors get their first busy slot. A woken session whose actor
 * is not live starts at once when one of the host's `maxBusyActors` permits is
 * free and nobody waits before it; otherwise it waits here as its id and
 * doorbell, first come, first served, until a permit frees. An actor is a
 * fiber with a scope and its session's state; a session waiting here is
 * neither, so a burst of thousands of sessions over a host's slots costs a
 * queue entry each until its turn (decision 0025).
 *
 * One fiber in the host's scope takes the queue in order and starts each
 * actor once it holds the permit for it. When the scope closes, the sessions
 * still waiting are given up (`giveUp`): no decision comes from this host,
 * and their commands are safe in the inbox.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type * as Doorbell from "../internal/Doorbell.js"
import type * as Permits from "../internal/Permits.js"
import type { SessionId } from "../schema/Ids.js"

/** The host's admissions. */
export interface Admissions {
  /** Starts the actor of `sessionId` now if a permit is free and nobody waits, else queues it. */
  readonly admit: (sessionId: SessionId, bell: Doorbell.Doorbell) => Effect.Effect<void>
  /** Sessions waiting for their first permit, right now. */
  readonly waiting: () => number
}

/** A session waiting for its first permit. */
type Waiting = readonly [SessionId, Doorbell.Doorbell]

/**
 * Admissions over `permits`: `launch` starts an actor holding the permit taken
 * for it; `giveUp` tells a session's waiters the host will not start it.
 */
export const make = (
  permits: Permits.Permits,
  launch: (sessionId: SessionId, bell: Doorbell.Doorbell) => Effect.Effect<void>,
  giveUp: (sessionId: SessionId) => Effect.Effect<void>
): Effect.Effect<Admissions, never, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Waiting>()
    let waiting = 0
    // The one the admitting fiber took from the queue and waits a permit for.
    let next: Waiting | undefined
    // A chain, not a generator: it runs once per session admitted, and the admitting fiber runs nothing else.
    const admitNext = Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(Queue.take(queue)), (taken) => {
        next = taken
        return Effect.flatMap(restore(permits.take(1)), () => {
          next = undefined
          waiting--
          return launch(taken[0], taken[1])
        })
      })
    )
    // Added before the admitting fiber is forked, so it runs once that fiber is interrupted.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (rest) =>
        Effect.forEach(next === undefined ? rest : [next, ...rest], ([sessionId]) => giveUp(sessionId), {
          discard: true
        }))
    )
    yield* Effect.forkScoped(Effect.forever(admitNext))
    return {
      admit: (sessionId, bell) =>
        Effect.suspend(() => {
          if (waiting === 0 && permits.tryTake(1)) return launch(sessionId, bell)
          waiting++
          return Queue.offer(queue, [sessionId, bell])
        }),
      waiting: () => waiting
    }
  })
