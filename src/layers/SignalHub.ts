/**
 * The watchers of a `StoreSignals` layer, by session: each watch is a sliding
 * queue for its scope, and a signal for a session goes to every queue watching
 * it; and the watchers of the pool's "sessions became claimable" hint. The
 * PostgreSQL and SQLite layers share it; what they differ in is how they learn
 * of a change.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import type { SessionId } from "../schema/Ids.js"
import { Signal, type WatchOptions } from "../services/StoreSignals.js"

/** Hints a watcher may hold unread before the oldest slide out. */
const depth = 64

/** The watchers of one layer. */
export interface SignalHub {
  /** A watch of `sessionId` for the scope (`deltas`: its watcher wants volatile deltas too). */
  readonly watch: (sessionId: SessionId, options?: WatchOptions) => Effect.Effect<Queue.Dequeue<Signal>, never, Scope.Scope>
  /** Calls `f` with the signals of `sessionId` for the scope. */
  readonly onSignal: (sessionId: SessionId, f: (signal: Signal) => void) => Effect.Effect<void, never, Scope.Scope>
  /** Hands a signal to the watchers of its session (none: dropped). */
  readonly emit: (signal: Signal) => void
  /** Tells every watcher it may have missed signals. */
  readonly missedAll: () => void
  /** The sessions watched now. */
  readonly sessions: () => ReadonlyArray<SessionId>
  /** The sessions watched now by someone who wants their volatile deltas. */
  readonly followed: () => ReadonlyArray<SessionId>
  /** Whether `sessionId` is watched now. */
  readonly has: (sessionId: SessionId) => boolean
  /** A watch of the pool's hint for the scope (a sliding queue of one). */
  readonly watchClaimable: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
  /** Hands the pool's hint to its watchers. */
  readonly claimable: () => void
  /** Whether anyone watches the pool's hint. */
  readonly claimWatched: () => boolean
}

/** A hub; `onWatch` is told of every session that becomes watched. */
export const make = (onWatch: (sessionId: SessionId) => void = () => {}): SignalHub => {
  // Every watch is a sink: a queue's offer, or the caller's function.
  const watchers = new Map<SessionId, Set<(signal: Signal) => void>>()
  const pool = new Set<Queue.Queue<void>>()
  // How many watches of each session want its deltas.
  const deltaWatches = new Map<SessionId, number>()
  const countDeltas = (sessionId: SessionId, by: 1 | -1) => {
    const count = (deltaWatches.get(sessionId) ?? 0) + by
    if (count > 0) deltaWatches.set(sessionId, count)
    else deltaWatches.delete(sessionId)
  }
  /** Adds `sink` for the scope (`Scope.addFinalizer`: removing it restores nothing of the fiber). */
  const subscribe = (sessionId: SessionId, sink: (signal: Signal) => void, closed: Effect.Effect<void> = Effect.void) =>
    Effect.uninterruptible(Effect.flatMap(Effect.scope, (scope) => {
      let set = watchers.get(sessionId)
      const fresh = set === undefined
      if (set === undefined) watchers.set(sessionId, set = new Set())
      set.add(sink)
      if (fresh) onWatch(sessionId)
      return Scope.addFinalizer(
        scope,
        Effect.zipRight(
          Effect.sync(() => {
            const current = watchers.get(sessionId)
            if (current === undefined) return
            current.delete(sink)
            if (current.size === 0) watchers.delete(sessionId)
          }),
          closed
        )
      )
    }))
  return {
    watch: (sessionId, options) =>
      Effect.flatMap(Queue.sliding<Signal>(depth), (queue) => {
        const deltas = options?.deltas === true
        const closed = deltas
          ? Effect.zipRight(Effect.sync(() => countDeltas(sessionId, -1)), Queue.shutdown(queue))
          : Queue.shutdown(queue)
        const watched = subscribe(sessionId, (signal) => void Queue.unsafeOffer(queue, signal), closed)
        // Counted and subscribed together, or neither: the count is undone by the subscription's finalizer.
        return Effect.as(deltas ? Effect.uninterruptible(Effect.zipRight(Effect.sync(() => countDeltas(sessionId, 1)), watched)) : watched, queue)
      }),
    onSignal: (sessionId, f) => subscribe(sessionId, f),
    emit: (signal) => {
      const set = watchers.get(signal.sessionId)
      if (set === undefined) return
      for (const sink of set) sink(signal)
    },
    missedAll: () => {
      for (const [sessionId, set] of watchers) {
        const signal = Signal.Missed({ sessionId })
        for (const sink of set) sink(signal)
      }
    },
    sessions: () => [...watchers.keys()],
    followed: () => [...deltaWatches.keys()],
    has: (sessionId) => watchers.has(sessionId),
    watchClaimable: Effect.acquireRelease(
      Effect.tap(Queue.sliding<void>(1), (queue) => Effect.sync(() => pool.add(queue))),
      (queue) => Effect.zipRight(Effect.sync(() => pool.delete(queue)), Queue.shutdown(queue))
    ),
    claimable: () => {
      for (const queue of pool) Queue.unsafeOffer(queue, undefined)
    },
    claimWatched: () => pool.size > 0
  }
}
