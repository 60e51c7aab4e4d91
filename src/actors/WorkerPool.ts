/**
 * A host as one worker of a pool sharing a store (several `troupe serve`
 * processes on one PostgreSQL database, or on one SQLite file): how it claims
 * the runnable sessions nobody drives, spreads them over the pool, and hands
 * its own over when it stops. Decision 0013 gives the reasons.
 *
 * - **Claiming.** Every `claimInterval` (jittered, so the pool's members do
 *   not tick in step) a worker with free busy slots asks the store for
 *   runnable sessions (pending inbox items or a turn to resume, lease free or
 *   expired) and starts actors for some of them; each actor acquires the
 *   lease, so of two workers claiming one session exactly one gets it. A full
 *   worker claims nothing: it does not even start actors that would wait.
 * - **Spreading.** A worker takes half of the new candidates it sees (at
 *   least one), tells the pool it left the rest (the others look at once),
 *   and looks again within 250 ms, taking all it left that nobody took: a
 *   burst (a dead worker's sessions) is split over the pool, and claimed
 *   within one look and that follow-up, never in waves of ticks (decision 0031).
 * - **Handing over.** A draining worker stops claiming, starts no actor for
 *   a wake, and asks its actors to hand their sessions over: an actor with no
 *   busy turn (idle, or its turn parked on a callback or on the user)
 *   releases its lease at once, a busy one as soon as its turn ends, parks,
 *   or reaches a step boundary.
 *   A busy turn stops itself at its next step boundary (`isStepBoundary`:
 *   a tool's outcome committed, nothing in flight), so the next owner goes
 *   on from there without calling a tool or the model again. The store's
 *   release is epoch-checked, and each time actors leave the draining host
 *   tells the pool that sessions became claimable
 *   (`StoreSignals.announceClaimable`): every claim loop looks at once
 *   (within 50 ms of jitter), its tick staying the backstop. No one waits for
 *   a TTL, nor for a tick. Decision 0020.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Random from "effect/Random"
import type { SessionId } from "../schema/Ids.js"
import type { RecordBody } from "../schema/Record.js"
import type * as Doorbell from "../internal/Doorbell.js"
import type * as Lock from "../internal/Lock.js"
import type { SessionStore } from "../services/SessionStore.js"

/** How often a worker on a shared store looks for sessions to claim: a second, or half the lease TTL when that is shorter. */
export const claimInterval = (leaseTtl: Duration.DurationInput | undefined): Duration.Duration =>
  Duration.min(Duration.seconds(1), Duration.times(Duration.decode(leaseTtl ?? "15 seconds"), 0.5))

/** What one claim tick saw, kept for the next. */
export interface Seen {
  /** Candidates this worker saw and left to others. */
  readonly left: ReadonlySet<SessionId>
}

/** A worker that has not ticked yet has seen nothing. */
export const nothingSeen: Seen = { left: new Set() }

/**
 * How many of `candidates` (runnable, not driven here) to claim with `free`
 * slots: with `spread`, every one this worker left at its last look (the pool
 * had its chance at them: they are taken now, never left for another round)
 * and half of the new ones (at least one), else all; never more than `free`.
 * `claimOnce` puts the ones left last time first.
 */
export const share = (
  candidates: ReadonlyArray<SessionId>,
  free: number,
  seen: Seen,
  spread: boolean
): number => {
  if (free <= 0 || candidates.length === 0) return 0
  if (!spread) return Math.min(free, candidates.length)
  let again = 0
  for (const id of candidates) if (seen.left.has(id)) again++
  return Math.min(free, again + Math.ceil((candidates.length - again) / 2))
}

/** What the claimer needs of its host. */
export interface Member {
  readonly store: SessionStore["Type"]
  /** The host's `maxBusyActors`. */
  readonly capacity: number
  /** Busy slots held or waited for. */
  readonly busy: () => number
  /** Whether an actor for the session runs here already. */
  readonly isLocal: (sessionId: SessionId) => boolean
  /** Starts an actor for the session (it acquires the lease, or stops when another worker has it). */
  readonly start: (sessionId: SessionId) => Effect.Effect<void>
  /** Whether to take only a share of a burst (`share`). */
  readonly spread: boolean
  /**
   * Tells the pool sessions are claimable (`StoreSignals.announceClaimable`): sent when a look
   * left new candidates to the others, so they look now rather than at their ticks.
   */
  readonly announce: Effect.Effect<void>
  /** While true (the host is draining), nothing is claimed. */
  readonly paused: () => boolean
  /**
   * Waits for the pool's next hint that sessions became claimable
   * (`StoreSignals.watchClaimable`: a draining worker released some); the
   * claim loop then looks at once instead of at its next tick.
   */
  readonly claimable: Effect.Effect<void>
  /** Drops the hints heard so far: the look about to run reads whatever they told. */
  readonly forgetHints: Effect.Effect<void>
}

/** Fisher–Yates on a copy, so that the pool's members try different sessions first. */
const shuffled = <A>(items: ReadonlyArray<A>) =>
  Effect.gen(function*() {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = yield* Random.nextIntBetween(0, i + 1)
      const t = out[i]!
      out[i] = out[j]!
      out[j] = t
    }
    return out
  })

/** What one claim tick saw, whether free slots ran out before the candidates did, and whether it left some with slots free. */
export interface Tick {
  readonly seen: Seen
  readonly full: boolean
  /** Candidates were left to the pool while slots were free: this worker looks again soon and takes them. */
  readonly left: boolean
}

/** One claim tick: starts actors for this worker's share of the runnable sessions. */
export const claimOnce = (member: Member, seen: Seen): Effect.Effect<Tick> =>
  Effect.gen(function*() {
    const free = member.capacity - member.busy()
    if (member.paused()) return { seen, full: false, left: false }
    // A full worker takes nothing, and asks the store nothing.
    if (free <= 0) return { seen, full: true, left: false }
    const runnable = yield* member.store.runnable({ limit: Math.min(1000, 2 * member.capacity) })
    const mixed = yield* shuffled(runnable.filter((id) => !member.isLocal(id)))
    // Those left last time first: `share` takes them all.
    const candidates = [...mixed.filter((id) => seen.left.has(id)), ...mixed.filter((id) => !seen.left.has(id))]
    const take = share(candidates, free, seen, member.spread)
    for (const sessionId of candidates.slice(0, take)) yield* member.start(sessionId)
    const left = candidates.slice(take)
    const full = take === free && left.length > 0
    // New candidates left to the pool: the others look now, not at their ticks.
    if (!full && left.some((id) => !seen.left.has(id))) yield* member.announce
    return { seen: { left: new Set(left) }, full, left: !full && left.length > 0 }
  }).pipe(
    Effect.catchAll((error) =>
      Effect.as(Effect.logWarning("claiming runnable sessions failed", error), { seen, full: false, left: false })
    )
  )

/** The most a worker waits after the pool's hint before it looks, with `spread`: the pool hears a hint at once, and drifts apart. */
const hintJitterMillis = 50

/**
 * How soon a worker that left part of a burst to the pool looks again, given its claim interval:
 * 250 ms, or a quarter of the interval when shorter, but never under four hint jitters (the others
 * hear the hint, wait their jitter, look, and ask for their leases first) unless the interval
 * itself is shorter. Then it takes what is still there: a burst is claimed within one look and
 * this, not in waves of ticks.
 */
export const followUpMillis = (intervalMillis: number): number =>
  Math.min(250, intervalMillis, Math.max(intervalMillis / 4, 4 * hintJitterMillis))

/**
 * Claims forever, every `interval` (±25 % with `spread`, so the pool's
 * members drift apart), and as soon as the pool hints that sessions became
 * claimable (with `spread`, after up to 50 ms more); while slots are the
 * limit, every 50 ms, so a slot given back is used soon (a full worker's tick
 * reads nothing from the store); after leaving part of a burst to the pool,
 * at its follow-up (`followUpMillis`, hints notwithstanding: decision 0056),
 * to take what the others did not. The tick stays the backstop for a lost
 * hint.
 */
export const claimLoop = (member: Member, interval: Duration.Duration): Effect.Effect<never> =>
  Effect.gen(function*() {
    let seen = nothingSeen
    const millis = Duration.toMillis(interval)
    for (;;) {
      const tick = yield* claimOnce(member, seen)
      seen = tick.seen
      if (tick.left) {
        // The follow-up comes whatever is hinted meanwhile: its own hint (every process hears it,
        // the sender's too) must not cut short the others' time to take their share, and what a
        // hint meanwhile told, the follow-up reads anyway.
        yield* Effect.sleep(Duration.millis(followUpMillis(millis)))
        yield* member.forgetHints
        continue
      }
      const pause = tick.full
        ? Math.min(50, millis)
        : member.spread
        ? millis * (0.75 + 0.5 * (yield* Random.next))
        : millis
      const hinted = yield* Effect.raceFirst(
        Effect.as(Effect.sleep(Duration.millis(pause)), false),
        Effect.as(member.claimable, true)
      )
      if (hinted && member.spread) yield* Effect.sleep(Duration.millis(hintJitterMillis * (yield* Random.next)))
    }
  })

/**
 * A host's request that its actors hand their sessions over (it is draining).
 * The host wakes every actor when it asks, so an actor looks at it after each wake.
 */
export interface Handover {
  /** Whether it was asked for. */
  readonly requested: () => boolean
}

/**
 * Whether a turn's commit of `records` ends a step: it records a tool's
 * outcome and opens nothing after it, so no call is in flight. A turn stopped
 * right after it loses nothing (the next owner reuses every receipt and goes
 * on with the next call); one stopped elsewhere would leave a tool's outcome
 * unknown or a model call to be made again.
 */
export const isStepBoundary = (records: ReadonlyArray<RecordBody>): boolean =>
  records.length > 0 && records[records.length - 1]!._tag === "operation_completed"

/** The handover of a host that never drains. */
export const neverHandsOver: Handover = { requested: () => false }

/** A host's draining: its handover request while a drain runs, and the drain itself. */
export interface Draining {
  readonly handOver: Handover
  /** The host calls it, under its lock, when an actor has gone from `actors` (its lease released, or never held). */
  readonly left: () => void
  /**
   * `SessionHost.drain`: asks for the handover, wakes every actor to look at
   * it, and waits at most `grace` until none is left; true if none is. Each
   * time actors leave meanwhile, the pool is told sessions became claimable.
   */
  readonly drain: (grace: Duration.DurationInput) => Effect.Effect<boolean>
}

/**
 * The draining of a host whose live actors are `actors` (their doorbells),
 * guarded by `lock`; `announce` tells the pool that sessions became
 * claimable (`StoreSignals.announceClaimable`).
 */
export const makeDraining = (
  lock: Lock.Exclusive,
  actors: ReadonlyMap<SessionId, Doorbell.Doorbell>,
  announce: Effect.Effect<void>
): Effect.Effect<Draining> =>
  Effect.map(Queue.sliding<void>(1), (departures) => {
    let drains = 0
    let emptied: Deferred.Deferred<void> | undefined
    const begin = lock(Effect.suspend(() => {
      drains++
      if (actors.size === 0) return Effect.succeed(Effect.void)
      const done = emptied ?? (emptied = Deferred.unsafeMake<void>(FiberId.none))
      for (const bell of actors.values()) bell.ring()
      return Effect.succeed(Deferred.await(done))
    }))
    const end = Effect.sync(() => {
      drains--
      if (drains === 0) emptied = undefined
    })
    // Hands each burst of departures to the pool as one hint, until the drain ends; then whatever left last.
    // The wait is interruptible even in a finalizer (the daemon drains in one, and a fiber forked there
    // inherits its uninterruptibility: hence `interruptible` around the loop, or the drain's end would wait
    // on it forever). A hint being sent is not: the drain's end waits for it, since the process may exit
    // right after. A departure taken is announced whatever comes: the last one wakes the drain, which
    // interrupts this fiber, maybe before it announced.
    const hintDepartures = Effect.interruptible(Effect.forever(
      Effect.uninterruptibleMask((restore) => Effect.zipRight(restore(Queue.take(departures)), announce))
    ))
    const lastOnes = Effect.flatMap(Queue.poll(departures), (left) => (Option.isSome(left) ? announce : Effect.void))
    return {
      handOver: { requested: () => drains > 0 },
      left: () => {
        if (drains > 0) Queue.unsafeOffer(departures, undefined)
        if (actors.size === 0 && emptied !== undefined) Deferred.unsafeDone(emptied, Effect.void)
      },
      drain: (grace) =>
        Effect.acquireUseRelease(
          begin,
          (allGone) =>
            Effect.scoped(Effect.gen(function*() {
              const hinting = yield* Effect.forkScoped(hintDepartures)
              const gone = yield* Effect.map(Effect.timeoutOption(allGone, grace), Option.isSome)
              yield* Fiber.interrupt(hinting)
              yield* lastOnes
              return gone
            })),
          () => end
        )
    }
  })
