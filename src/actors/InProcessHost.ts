/**
 * The in-process `SessionHost`: one actor per live session in this process,
 * started on demand when a command arrives, passivated after an idle period,
 * and, at start-up and every poll interval after, started for every runnable
 * session the store holds (crash recovery: work left by a dead owner is
 * picked up once its lease expires).
 *
 * Every fiber belongs to the layer's scope: closing the layer interrupts all
 * actors and turns.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import type { ModelSettings } from "../schema/Agent.js"
import { type InputId, type SessionId, ulid } from "../schema/Ids.js"
import type { Message } from "../schema/Inbox.js"
import { CallbackBroker } from "../services/CallbackBroker.js"
import * as Telemetry from "../services/Telemetry.js"
import { Decision, type Expectation, type Refusal, type Refusals, SessionHost } from "../services/SessionHost.js"
import { SessionStore } from "../services/SessionStore.js"
import { StoreSignals } from "../services/StoreSignals.js"
import * as Doorbell from "../internal/Doorbell.js"
import * as Admissions from "./Admissions.js"
import * as Idleness from "./Idleness.js"
import * as InboxBackstop from "./InboxBackstop.js"
import * as LeaseKeeper from "./LeaseKeeper.js"
import * as LiveEvents from "./LiveEvents.js"
import * as Lock from "../internal/Lock.js"
import * as Permits from "../internal/Permits.js"
import * as SessionActor from "./SessionActor.js"
import type * as ToolPolicy from "./ToolPolicy.js"
import * as Waiters from "../internal/Waiters.js"
import * as WorkerPool from "./WorkerPool.js"

/** Host tuning; every field has a default. */
export interface Options {
  /** Lease time to live; renewed every third of it (default 15 s). */
  readonly leaseTtl?: Duration.DurationInput | undefined
  /** How long an actor with nothing to do stays in memory (default 30 s). */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * How often a live actor reads its inbox again unsignalled: the backstop for a command pushed
   * through another process whose signal (`StoreSignals`) was lost (default: never, for a store no
   * other process shares; `Troupe.layerSqlite` and `Troupe.layerPg` set 1 s).
   */
  readonly inboxPoll?: Duration.DurationInput | undefined
  /**
   * How often the store is asked for runnable sessions to claim (default: the lease TTL;
   * `Troupe.sharedStoreHost` sets `WorkerPool.claimInterval`, at most a second).
   */
  readonly pollInterval?: Duration.DurationInput | undefined
  /**
   * Whether this host is one worker of a pool sharing the store: it takes only its share of a
   * burst of runnable sessions, so the pool splits them (default false: it takes all it can).
   */
  readonly spread?: boolean | undefined
  /**
   * Whether the host claims runnable sessions nobody asked it to drive: crash recovery at
   * start-up and the pool's claims (default true). A one-shot program that drives only the
   * sessions it sends to (`troupe run`) turns it off, so it never takes another process's
   * session, which that process is about to start with its own model and tools.
   */
  readonly claims?: boolean | undefined
  /**
   * Whether this host runs sessions at all (default true). A viewer of a store (`troupe inspect`)
   * turns it off: it claims nothing and starts no actor; a command it admits (a callback answer) is
   * decided here as admitted, as while draining, and left in the store for the worker that drives
   * the session (a daemon on the same store takes it up at its next claim or inbox signal).
   */
  readonly runs?: boolean | undefined
  /** This host's lease owner name (default `host-<ulid>`). */
  readonly owner?: string | undefined
  /** Live-event buffer per session; a subscriber that falls further behind backfills from the store. */
  readonly liveBuffer?: number | undefined
  /** How many actors may be busy at once (default 64); the others wait, their commands safe in the inbox. */
  readonly maxBusyActors?: number | undefined
  /**
   * While more actors than this are live (default 1,024) and others wait for a busy slot, an
   * actor passivates as soon as it is idle instead of after `idleTimeout`: a burst of many
   * sessions gives finished ones back as it goes.
   */
  readonly maxLiveActors?: number | undefined
  /** Default model settings, under each agent's and each run's. */
  readonly modelSettings?: ModelSettings | undefined
  /**
   * The host's permission layer (by name, side effect, capability, cost, terminal): under every
   * agent's and run's, which can deny or ask about more but never lift its denials.
   */
  readonly toolPolicy?: ToolPolicy.Rules | undefined
}

/**
 * How the actor of `sessionId` publishes its commits: to followers here and, where the store does not
 * signal commits itself and other processes may listen, to them.
 */
const publisherOf = (
  signals: StoreSignals["Type"],
  events: LiveEvents.LiveEvents,
  sessionId: SessionId
): SessionActor.Wiring["publishRecords"] =>
  signals.shared && signals.announcesCommits
    ? (firstSeq, at, records) => {
      const published = events.publishRecords(sessionId)(firstSeq, at, records)
      const announced = signals.announce(sessionId, firstSeq + records.length - 1)
      return published === undefined ? announced : Effect.zipRight(published, announced)
    }
    : events.publishRecords(sessionId)

/** How the actor of `sessionId` sends volatile deltas: to followers here and, best effort, in other processes. */
const broadcasterOf = (
  signals: StoreSignals["Type"],
  events: LiveEvents.LiveEvents,
  sessionId: SessionId
): SessionActor.Wiring["broadcast"] =>
  signals.shared
    ? (deltas) => Effect.zipRight(events.broadcast(sessionId)(deltas), signals.forward(sessionId, deltas))
    : events.broadcast(sessionId)

/** The timers of a host's actors, one fiber each in the host's scope: lease renewals, idle timeouts, and the inbox backstop. */
const timers = (
  actors: ReadonlyMap<SessionId, Doorbell.Doorbell>,
  leaseTtl: Duration.Duration,
  idleTimeout: Duration.Duration,
  inboxPoll: Duration.DurationInput | undefined
) =>
  Effect.gen(function*() {
    const keeper = yield* LeaseKeeper.make(leaseTtl)
    yield* Effect.forkScoped(keeper.run)
    const idleness = yield* Idleness.make(idleTimeout)
    yield* Effect.forkScoped(idleness.run)
    if (inboxPoll !== undefined) {
      yield* Effect.forkScoped(InboxBackstop.run(yield* SessionStore, Duration.decode(inboxPoll), actors))
    }
    return { keeper, idleness }
  })

/** Claims runnable sessions for the host in a fiber of the scope, at its ticks and at the pool's hints (`WorkerPool.claimLoop`). */
const claimRunnable = (
  signals: StoreSignals["Type"],
  interval: Duration.Duration,
  member: Omit<WorkerPool.Member, "claimable" | "forgetHints">
) =>
  Effect.flatMap(signals.watchClaimable, (claimable) =>
    Effect.forkScoped(
      WorkerPool.claimLoop({ ...member, claimable: Queue.take(claimable), forgetHints: Effect.asVoid(Queue.takeAll(claimable)) }, interval)
    ))

/** Who waits for a decision on an input, by session, then by input. */
const decisionWaiters = () => {
  const waiters = Waiters.grouped<SessionId, InputId, Decision, Refusal>()
  return {
    /** Registers interest in the decision on an input of kind K. */
    expect: <K extends keyof Refusals>(sessionId: SessionId, inputId: InputId, _kind: K) =>
      // The actor decides a command of kind K through Decisions.decide, whose refusals are Refusals[K].
      Effect.sync(() => waiters.register(sessionId, inputId) as Expectation<K>),
    settle: (sessionId: SessionId, inputId: InputId, exit: Exit.Exit<Decision, Refusal>) => waiters.settle(sessionId, inputId, exit),
    /** Tells everyone still waiting on this session that no actor here will decide. */
    settleAll: (sessionId: SessionId) => Effect.sync(() => waiters.settleAll(sessionId, Exit.succeed(Decision.Admitted())))
  }
}

/** Builds the host; its actors and poller live as long as the enclosing scope. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    // The services actors run on, taken once: an actor outlives whichever caller woke it.
    const context = yield* Effect.context<SessionActor.Services>()
    const broker = yield* CallbackBroker
    const signals = yield* StoreSignals
    const leaseTtl = Duration.decode(options.leaseTtl ?? "15 seconds")
    const idleTimeout = Duration.decode(options.idleTimeout ?? "30 seconds")
    const actorOptions: SessionActor.Options = {
      owner: options.owner ?? `host-${yield* ulid}`,
      leaseTtl,
      modelSettings: options.modelSettings,
      toolPolicy: options.toolPolicy
    }
    const liveBuffer = options.liveBuffer ?? 256
    const actors = yield* FiberSet.make<void>()
    const maxBusy = options.maxBusyActors ?? 64
    const maxLive = options.maxLiveActors ?? 1024
    // First come, first served: a release wakes one waiter, not every actor waiting for a slot.
    const slots = Permits.make(maxBusy)
    // The live actors' doorbells; one keeper, one idleness and one backstop serve them all.
    const entries = new Map<SessionId, Doorbell.Doorbell>()
    const { idleness, keeper } = yield* timers(entries, leaseTtl, idleTimeout, signals.shared ? options.inboxPoll : undefined)
    const lock = Lock.make()
    // Draining: actors hand their sessions over, and no new one starts here.
    const draining = yield* WorkerPool.makeDraining(lock, entries, signals.announceClaimable)
    const handOver = draining.handOver

    const { expect, settle, settleAll } = decisionWaiters()
    const events = yield* LiveEvents.make(liveBuffer)

    /**
     * What the actor of `sessionId` behind `bell` is given; `finish` settles after it (told whether
     * its waiters learn no decision comes from here).
     */
    const wiringOf = (sessionId: SessionId, bell: Doorbell.Doorbell, finish: (settle: boolean) => Effect.Effect<void>): SessionActor.Wiring => ({
      bell,
      keeper,
      idleness,
      slots,
      // `entries` counts the sessions waiting for admission: they are live as soon as a slot frees.
      crowded: () => entries.size > maxLive && load() > maxBusy,
      slotFree: () => load() < maxBusy,
      decide: (inputId, exit) => settle(sessionId, inputId, exit),
      publishRecords: publisherOf(signals, events, sessionId),
      broadcast: broadcasterOf(signals, events, sessionId),
      changes: signals.shared ? (f) => signals.onSignal(sessionId, f) : undefined,
      wake: (other) => wake(other),
      expect,
      onLease: (held) => (held ? Effect.void : finish(true)),
      handOver,
      mayPassivate: (lease) =>
        lock(Effect.gen(function*() {
          // A push here rang the bell; one through another process keeps the lease in the store.
          if (bell.pending() || !(yield* store.releaseIdle(lease))) return false
          if (entries.get(sessionId) === bell) entries.delete(sessionId)
          return true
        }))
    })

    /**
     * When the actor of `sessionId` behind `bell` stops without deciding (its lease is held elsewhere,
     * or lost), waiters learn no decision is coming from here, unless a successor actor already runs
     * and will decide for them. A passivated actor settles nothing: it stopped with an empty inbox, so
     * whatever arrives after it is woken into a new actor.
     */
    const finisher = (sessionId: SessionId, bell: Doorbell.Doorbell) => (settle: boolean) =>
      lock(Effect.suspend(() => {
        const current = entries.get(sessionId)
        if (current === bell) entries.delete(sessionId)
        // Whoever awaits a turn of it here follows the log from now on.
        events.left(sessionId)
        idleness.busy(bell)
        draining.left()
        return settle && (current === undefined || current === bell) ? settleAll(sessionId) : Effect.void
      }))

    /**
     * Runs the actor of `sessionId`, ringing `bell`, in a busy slot the caller took for it, in its own
     * scope. A chain, not a generator: it runs once per actor, and its wiring is built by `wiringOf`.
     */
    const launch = (sessionId: SessionId, bell: Doorbell.Doorbell): Effect.Effect<void> =>
      Effect.flatMap(Scope.make(), (scope) => {
        const finish = finisher(sessionId, bell)
        const actor = SessionActor.run(sessionId, actorOptions, wiringOf(sessionId, bell, finish))
        // The actor's fiber takes the host's services and, since an actor outlives whichever caller
        // woke it, not that caller's analytics preference: set once as the fiber starts, for its
        // whole life, rather than by `provide` and `locally`, whose undoing (~20 Effect steps) would
        // only precede the fiber's end. Interruptible whoever launches it (the admitting fiber takes
        // permits uninterruptibly).
        return FiberSet.run(
          actors,
          Effect.interruptible(Effect.zipRight(
            FiberRef.update(FiberRef.currentContext, (outer) => Context.add(Context.merge(outer, context), Scope.Scope, scope)),
            // What the context now holds is what `actor` requires.
            Effect.zipRight(
              FiberRef.set(Telemetry.excluded, false),
              // A session handed over is decided elsewhere: its waiters here learn so.
              ended(actor as Effect.Effect<void, unknown>, scope, sessionId, (failed) => finish(failed || handOver.requested()))
            )
          ))
        )
      })

    // Sessions woken while every busy slot is taken wait as ids, their bells already in `entries`:
    // an actor starts with a permit, so a burst of thousands costs an entry each until a slot frees.
    const admissions = yield* Admissions.make(slots, launch, settleAll)
    const load = () => slots.busy() + admissions.waiting()

    /** Starts an actor, or queues it for a busy slot; the caller holds `lock`. */
    const start = (sessionId: SessionId): Effect.Effect<void> =>
      Effect.suspend(() => {
        const bell = Doorbell.make()
        entries.set(sessionId, bell)
        return admissions.admit(sessionId, bell)
      })

    const wake = (sessionId: SessionId): Effect.Effect<void> =>
      lock(Effect.suspend(() => {
        const bell = entries.get(sessionId)
        if (bell !== undefined) return Effect.sync(() => bell.ring())
        // Draining, or a host that runs nothing: the command is safe in the store, for the pool's next claim.
        return handOver.requested() || options.runs === false ? settleAll(sessionId) : start(sessionId)
      }))

    // Crash recovery and the pool's claims: drive what the store says needs driving.
    if (options.claims !== false && options.runs !== false) {
      yield* claimRunnable(signals, Duration.decode(options.pollInterval ?? leaseTtl), {
        store, capacity: maxBusy, busy: load, start: wake, paused: handOver.requested,
        isLocal: (sessionId) => entries.has(sessionId), spread: options.spread ?? false, announce: signals.announceClaimable
      })
    }

    // A provider answered a callback through the inbox: its session's actor takes it from there.
    yield* Queue.take(broker.answered).pipe(Effect.flatMap(wake), Effect.forever, Effect.forkScoped)

    return SessionHost.of({
      expect,
      wake,
      offer: (sessionId, message) => offerTo(entries.get(sessionId), message),
      live: events.live,
      turnEnded: events.turnEnded,
      endedHere: events.endedHere,
      drain: draining.drain,
      running: Effect.sync(() => [...entries.keys()]),
      drives: (sessionId) => Effect.sync(() => entries.has(sessionId))
    })
  })

/**
 * `actor` in its `scope`, which closes with the actor's own exit (a lost lease, a failure, is not
 * released); a failure other than an interruption is logged; then `finish`, told whether it failed.
 */
const ended = (
  actor: Effect.Effect<void, unknown>,
  scope: Scope.CloseableScope,
  sessionId: SessionId,
  finish: (failed: boolean) => Effect.Effect<void>
) =>
  actor.pipe(
    Effect.onExit((exit) => Scope.close(scope, exit)),
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.logWarning("session actor stopped", cause).pipe(Effect.annotateLogs({ sessionId }))
    ),
    Effect.onExit((exit) => finish(Exit.isFailure(exit)))
  )

/**
 * Hands `message` to the actor behind `bell` (see `SessionHost.offer`) and waits for its
 * decision: `None` at once when there is no such actor or it takes no offer now.
 */
const offerTo = (bell: Doorbell.Doorbell | undefined, message: Message): Effect.Effect<Option.Option<Decision>> =>
  bell === undefined
    ? Effect.succeedNone
    : Effect.async<Option.Option<Decision>>((resume) => {
      let answered = false
      const decided = (decision: Decision | undefined) => {
        if (answered) return
        answered = true
        resume(Effect.succeed(Option.fromNullable(decision)))
      }
      if (!bell.offer({ message, decided })) decided(undefined)
    })

/** The in-process host as a layer; needs the services actors run on (a store, a model, a callback broker, tools, prices, telemetry). */
export const layer = (
  options: Options = {}
): Layer.Layer<SessionHost, never, SessionActor.Services | StoreSignals> =>
  Layer.scoped(SessionHost, make(options))
