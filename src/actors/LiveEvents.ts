/**
 * What a host's actors announce as they commit, for whoever follows here: a
 * hub per followed session carrying its durable records (as events) and its
 * volatile deltas, and the waiters for turn ends. A session nobody follows has
 * no hub, and its records are never turned into events.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import type * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import { Durable, type SessionEvent } from "../schema/Event.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { RecordBody, TurnEnded } from "../schema/Record.js"
import type { TurnInterest } from "../services/SessionHost.js"
import * as Waiters from "../internal/Waiters.js"

/** A host's live events. */
export interface LiveEvents {
  /** Subscribes to a session's live events for the scope. */
  readonly live: (sessionId: SessionId) => Effect.Effect<Queue.Dequeue<SessionEvent>, never, Scope.Scope>
  /**
   * Completes the waiters of the turns a commit ended, in place as it is called (once the commit is
   * written), then hands its records to the session's followers: the effect that does, or
   * `undefined` when nobody follows (no Effect step for a session nobody follows).
   */
  readonly publishRecords: (
    sessionId: SessionId
  ) => (firstSeq: number, at: number, records: ReadonlyArray<RecordBody>) => Effect.Effect<void> | undefined
  /** Hands volatile events to the session's followers. */
  readonly broadcast: (sessionId: SessionId) => (events: ReadonlyArray<SessionEvent>) => Effect.Effect<void>
  /**
   * Registers interest in the end of a turn of `sessionId`: its `turn_ended`
   * record as an actor here commits it, or `None` once the session's actor here
   * stops before that (`left`): whoever goes on with the turn commits its end elsewhere.
   * The last turn the session's actor here ended is answered at once, while that actor lives.
   */
  readonly turnEnded: (sessionId: SessionId, turnId: TurnId) => Effect.Effect<TurnInterest>
  /** The end of `turnId` if it is the last turn the session's actor here ended, while that actor lives. */
  readonly endedHere: (sessionId: SessionId, turnId: TurnId) => TurnEnded | undefined
  /** The session's actor here stopped: its turns' waiters learn no end will be announced by it. */
  readonly left: (sessionId: SessionId) => void
}

/** Interest in a turn an actor here already ended: its end, at once. */
const endedHere = (ended: TurnEnded): TurnInterest => ({
  await: Effect.succeed(Option.some(ended)),
  withdraw: () => {},
  runningHere: true
})

/** Live events with a buffer of `liveBuffer` events per follower (one that falls further behind backfills from the store). */
export const make = (liveBuffer: number): Effect.Effect<LiveEvents> =>
  Effect.sync(() => {
    const hubs = new Map<SessionId, { readonly pubsub: PubSub.PubSub<SessionEvent>; refs: number }>()
    // By session, so an actor's end reaches the waiters of its session's turns.
    const turnWaiters = Waiters.grouped<SessionId, TurnId, Option.Option<TurnEnded>, never>()
    // The turn each session's actor here started and has not ended, as its commits were published.
    // A turn resumed after a restart publishes no start: it is not here, and its waiters read the log.
    const running = new Map<SessionId, TurnId>()
    // The last turn each session's actor here ended, as its commit was published: a caller that
    // awaits it once it ended (a fast turn ends before its sender asks) has it without reading the log.
    const lastEnded = new Map<SessionId, TurnEnded>()
    /** A commit of the session's actor here ended a turn: its waiters have its end. */
    const ended = (sessionId: SessionId, record: TurnEnded) => {
      if (running.get(sessionId) === record.turnId) running.delete(sessionId)
      lastEnded.set(sessionId, record)
      turnWaiters.settle(sessionId, record.turnId, Exit.succeed(Option.some(record)))
    }
    return {
      live: (sessionId) =>
        Effect.gen(function*() {
          const hub = yield* Effect.acquireRelease(
            Effect.gen(function*() {
              const existing = hubs.get(sessionId)
              if (existing) {
                existing.refs++
                return existing
              }
              const created = { pubsub: yield* PubSub.sliding<SessionEvent>(liveBuffer), refs: 1 }
              hubs.set(sessionId, created)
              return created
            }),
            (hub) =>
              Effect.suspend(() => {
                hub.refs--
                if (hub.refs > 0) return Effect.void
                // Forgotten, not shut down: an actor may be publishing to it right now, and
                // publishing to a shut-down hub would interrupt the actor's turn.
                if (hubs.get(sessionId) === hub) hubs.delete(sessionId)
                return Effect.void
              })
          )
          return yield* PubSub.subscribe(hub.pubsub)
        }),
      publishRecords: (sessionId) => (firstSeq, at, records) => {
        // Indexed: a `for…of` compiles to the iterator protocol inside a try/finally.
        for (let i = 0; i < records.length; i++) {
          const record = records[i]!
          if (record._tag === "turn_started") running.set(sessionId, record.turnId)
          else if (record._tag === "turn_ended") ended(sessionId, record)
        }
        // Events are built only for a session someone follows.
        const hub = hubs.get(sessionId)
        if (hub === undefined) return undefined
        return Effect.asVoid(PubSub.publishAll(
          hub.pubsub,
          records.map((record, i) => new Durable({ sessionId, cursor: firstSeq + i, at, record }, true))
        ))
      },
      broadcast: (sessionId) => (events) =>
        Effect.suspend(() => {
          const hub = hubs.get(sessionId)
          return hub === undefined ? Effect.void : Effect.asVoid(PubSub.publishAll(hub.pubsub, events))
        }),
      turnEnded: (sessionId, turnId) =>
        Effect.sync(() => {
          const ended = lastEnded.get(sessionId)
          if (ended !== undefined && ended.turnId === turnId) return endedHere(ended)
          const interest = turnWaiters.register(sessionId, turnId)
          return { await: interest.await, withdraw: () => interest.withdraw(), runningHere: running.get(sessionId) === turnId }
        }),
      endedHere: (sessionId, turnId) => {
        const ended = lastEnded.get(sessionId)
        return ended !== undefined && ended.turnId === turnId ? ended : undefined
      },
      left: (sessionId) => {
        running.delete(sessionId)
        lastEnded.delete(sessionId)
        turnWaiters.settleAll(sessionId, Exit.succeed(Option.none()))
      }
    }
  })
