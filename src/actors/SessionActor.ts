/**
 * One session's actor: it holds the session's lease, applies inbox commands in
 * admission order, runs at most one turn at a time as a child fiber, and is
 * the only writer of the session's log while its lease lasts.
 *
 * A thin loop over two pure parts: acquire the lease (or leave the session to
 * whoever holds it), hand it to the host's `LeaseKeeper`, fold the log into a
 * `SessionState`, resume a turn a crashed owner left active, then read the
 * inbox → `Decisions.decide` → append → run the outcome, until idle for the
 * host's `idleTimeout` (passivation) or the lease is lost (then nothing more
 * is written and the actor stops with `LeaseLost`). Every commit, the actor's
 * or its turn's, goes through one write path that folds what it wrote onto
 * the state.
 *
 * It waits on its `Doorbell` alone: an idle actor is one suspended fiber (two
 * on a store other processes share: one follows their signals), its timers
 * kept by the host for all actors at once.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import type { ModelSettings } from "../schema/Agent.js"
import { Usage } from "../schema/Budget.js"
import { LeaseLost, type StoreUnavailable } from "../schema/Errors.js"
import type { AssistantDelta } from "../schema/Event.js"
import { type CallbackId, type InputId, makeTurnId, type SessionId, type TurnId } from "../schema/Ids.js"
import type { InboxItem } from "../schema/Inbox.js"
import type { CommitReceipt, Lease } from "../schema/Lease.js"
import type { LogPage, RecordBody, TurnEnded } from "../schema/Record.js"
import type { Session } from "../schema/Session.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import { CallbackBroker } from "../services/CallbackBroker.js"
import type { CostMeter } from "../services/CostMeter.js"
import type * as Model from "../services/Model.js"
import { AgentCatalog } from "../services/AgentCatalog.js"
import type { Guardrails } from "../services/Guardrails.js"
import { Decision, type Refusal, type SessionHost } from "../services/SessionHost.js"
import { type ActorStart, SessionStore } from "../services/SessionStore.js"
import type { Signal } from "../services/StoreSignals.js"
import * as Telemetry from "../services/Telemetry.js"
import { Toolkit } from "../services/Toolkit.js"
import { type SessionToolset, Toolsets } from "../services/Toolsets.js"
import * as BusySlot from "./BusySlot.js"
import * as Decisions from "./Decisions.js"
import type * as Doorbell from "../internal/Doorbell.js"
import type * as Idleness from "./Idleness.js"
import * as LeaseDeadline from "./LeaseDeadline.js"
import type * as LeaseKeeper from "./LeaseKeeper.js"
import * as Lock from "../internal/Lock.js"
import * as RunningTurn from "./RunningTurn.js"
import * as SessionState from "./SessionState.js"
import * as SessionWriter from "./SessionWriter.js"
import type * as ToolPolicy from "./ToolPolicy.js"
import * as WorkerPool from "./WorkerPool.js"

/** How an actor is tuned. */
export interface Options {
  /** This host's lease owner name. */
  readonly owner: string
  readonly leaseTtl: Duration.Duration
  /** The host's default model settings, under the agent's and the run's. */
  readonly modelSettings?: ModelSettings | undefined
  /** The host's permission layer: no agent or run lifts its denials. */
  readonly toolPolicy?: ToolPolicy.Rules | undefined
}

/** The services an actor and its turns use. */
export type Services =
  | SessionStore
  | CallbackBroker
  | Model.Model
  | Toolkit
  | Toolsets
  | CostMeter
  | Telemetry.Telemetry
  | AgentCatalog
  | Guardrails

/** What the host gives an actor. */
export interface Wiring {
  /** Wake-ups: a command was admitted or a turn ended (and the host's "idle long enough"). */
  readonly bell: Doorbell.Doorbell
  /** Renews the lease while the actor holds it. */
  readonly keeper: LeaseKeeper.LeaseKeeper
  /** Expires the bell once the actor has been idle for the host's `idleTimeout`. */
  readonly idleness: Idleness.Idleness
  /** Delivers a decision (or refusal) on an input to whoever waits for it, at once: it only resumes them. */
  readonly decide: (inputId: InputId, decision: Exit.Exit<Decision, Refusal>) => void
  /**
   * Announces the records a commit wrote (seqs from `firstSeq`, written at
   * `at`): to whoever awaits their turn's end, and to live subscribers.
   */
  readonly publishRecords: SessionWriter.Deps["publishRecords"]
  /** Broadcasts volatile events to live subscribers. */
  readonly broadcast: (events: ReadonlyArray<AssistantDelta>) => Effect.Effect<void>
  /**
   * Calls its argument with the signals of this session's changes by other processes
   * (`StoreSignals.onSignal`), for the actor's scope; absent for a store no other process shares.
   */
  readonly changes: ((f: (signal: Signal) => void) => Effect.Effect<void, never, Scope.Scope>) | undefined
  /** Wakes another session's actor (a child given a message, a parent given a result). */
  readonly wake: (sessionId: SessionId) => Effect.Effect<void>
  /** Registers interest in the decision on another session's input, before it is pushed. */
  readonly expect: SessionHost["Type"]["expect"]
  /**
   * Called when the actor has been idle for the host's `idleTimeout`: true lets it stop.
   * The host answers under its own lock: when nothing is pending it releases
   * the lease and forgets the actor, so a new command starts a fresh one.
   */
  readonly mayPassivate: (lease: Lease) => Effect.Effect<boolean, StoreUnavailable>
  /** Whether the host holds more live actors than it likes while others wait for a busy slot (`maxLiveActors`). */
  readonly crowded: () => boolean
  /** Whether a busy slot is free now: only then does the actor take a message in memory (`SessionHost.offer`). */
  readonly slotFree: () => boolean
  /** Called once the actor knows whether it holds the lease. */
  readonly onLease: (held: boolean) => Effect.Effect<void>
  /**
   * Permits to be busy, shared by the host's actors: an actor holds one from
   * waking until it is idle with no running turn, so an overloaded host runs
   * a bounded number of actors at once (and their leases keep being renewed)
   * while the rest wait with their commands safe in the inbox. The host takes
   * an actor's first permit before it starts it: `run` begins holding one.
   */
  readonly slots: Effect.Semaphore
  /**
   * The host's request to hand the session over (it is draining): the actor
   * stops, releasing its lease, as soon as no turn of it is busy. Never, when absent.
   */
  readonly handOver?: WorkerPool.Handover | undefined
}

/** Everything a running actor keeps between commands. */
interface Actor extends SessionWriter.Target {
  /** Messages already told "queued", so a rescan does not tell them twice. */
  readonly queued: Set<InputId>
}

/** Folds the whole log of `sessionId`, page by page, from `first` (its first page, when already read). */
export const foldLog = (sessionId: SessionId, first?: LogPage) =>
  Effect.flatMap(SessionStore, (store) => foldWith(store, sessionId, first))

/** `foldLog` through `store`. */
const foldWith = (store: SessionStore["Type"], sessionId: SessionId, first?: LogPage) =>
  first === undefined
    ? Effect.flatMap(store.readLog(sessionId, { limit: 1000 }), (page) => foldOn(store, SessionState.empty(sessionId), page))
    : Effect.suspend(() => foldOn(store, SessionState.empty(sessionId), first))

/** `state` with `page` folded on, then the pages after it while there are more. */
const foldOn = (
  store: SessionStore["Type"],
  state: SessionState.SessionState,
  page: LogPage
): Effect.Effect<SessionState.SessionState, StoreUnavailable> => {
  const folded = SessionState.fold(state, page.records)
  return page.more
    ? Effect.flatMap(store.readLog(folded.sessionId, { after: folded.head, limit: 1000 }), (next) => foldOn(store, folded, next))
    : Effect.succeed(folded)
}

/** The lease an actor holds, and what it does with it. */
interface Held {
  readonly lease: Ref.Ref<Lease>
  /** Asks the host to let the actor stop: when it agrees, it has released the lease already. */
  readonly passivate: Effect.Effect<boolean, StoreUnavailable>
  readonly beforeOperation: RunningTurn.Host["beforeOperation"]
  /** Starts keeping the lease for the actor's scope. */
  readonly keep: Effect.Effect<void>
}

/**
 * Holds the lease for the actor's scope (from `keep`): renewed by the host's keeper (a loss
 * is reported to `lost`), released at the end unless lost or handed back:
 * `passivate` asks the host to let the actor stop, and when it agrees the host
 * has released the lease already. `beforeOperation` leads into an
 * operation as it starts (a model call, a tool body, a callback offered, a spawn):
 * nothing while the lease's local deadline (`LeaseDeadline`, from `askedAt`,
 * when the lease was asked for) is ahead; past it, a renewal first, and when
 * that is refused (the lease expired or was taken over meanwhile) the loss
 * goes to `lost` and the caller is interrupted, having started nothing.
 * Built in place, not in a generator: it runs once per actor, and only `keep` needs the fiber.
 */
const holdLease = (
  store: SessionStore["Type"],
  scope: Scope.Scope,
  clock: Clock.Clock,
  acquired: Lease,
  askedAt: number,
  ttl: Duration.Duration,
  { keeper, mayPassivate }: Pick<Wiring, "keeper" | "mayPassivate">,
  lost: (loss: LeaseKeeper.Loss) => Effect.Effect<void>
): Held => {
  const lease = Ref.unsafeMake(acquired)
  const ttlMillis = Duration.toMillis(ttl)
  const deadline = LeaseDeadline.make(ttlMillis, askedAt)
  let handedBack = false
  let gone = false
  const lose = (loss: LeaseKeeper.Loss) =>
    Effect.suspend(() => {
      gone = true
      return lost(loss)
    })
  const keep = Effect.zipRight(
    // `Scope.addFinalizerExit`, not `Effect.addFinalizer`: it captures all it uses, so it need not
    // restore the fiber refs of this moment (two diffs of every FiberRef, the context among them).
    Scope.addFinalizerExit(scope, (exit) =>
      // A lost lease is not ours to release, and one handed back on passivating was released already.
      (Exit.isFailure(exit) && exit.cause._tag === "Fail") || handedBack
        ? Effect.void
        : Effect.ignore(Effect.flatMap(Ref.get(lease), store.release))),
    keeper.keepIn(scope, lease, lose, deadline)
  )
  const passivate = Effect.flatMap(Ref.get(lease), mayPassivate).pipe(
    Effect.tap((agreed) => {
      if (agreed) handedBack = true
    })
  )
  const renewNow = Effect.suspend(() => {
    const asked = LeaseDeadline.monotonicMillis(clock)
    return Effect.flatMap(Ref.get(lease), (current) => store.renew(current, ttlMillis)).pipe(
      Effect.flatMap((next) => {
        LeaseDeadline.confirm(deadline, asked)
        return Ref.set(lease, next)
      })
    )
  })
  const renewOrStop = Effect.catchAll(renewNow, (loss) => Effect.zipRight(lose(loss), Effect.interrupt))
  // One clock read while the deadline is ahead (every operation of a turn passes here), and no
  // step of its own: the check leads straight into the operation.
  const beforeOperation = <A, E, R>(operation: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() =>
      gone
        ? Effect.interrupt
        : LeaseDeadline.isLive(deadline, LeaseDeadline.monotonicMillis(clock))
        ? operation
        : Effect.zipRight(renewOrStop, operation)
    )
  return { lease, passivate, beforeOperation, keep }
}

/**
 * Where a parked turn waits for the answer to `callbackId`: registered for the
 * commit that applies it, or, when that commit came first (a resumed turn that
 * reaches its wait after the answer was applied), already had.
 */
const answerOf = (actor: Actor, callbackId: CallbackId): Deferred.Deferred<unknown> => {
  const waiting = actor.answers.get(callbackId)
  if (waiting !== undefined) return waiting
  const answer = Deferred.unsafeMake<unknown>(FiberId.none)
  const known = HashMap.get(actor.state.callbacks, callbackId)
  if (Option.isSome(known) && known.value.status !== "open" && known.value.result !== undefined) {
    Deferred.unsafeDone(answer, Exit.succeed(known.value.result))
  } else actor.answers.set(callbackId, answer)
  return answer
}

/** Inbox items read at a time. */
const inboxPage = 256

/**
 * The inbox items an actor's drain looks at: first those `start` read (`first`,
 * read when the bell had rung `rungAt` times), then the inbox read again only
 * when it may hold something new: the bell was rung since the last read (its
 * own turn's end only nudges it), messages are queued behind a turn, or the
 * last read was a full page. Otherwise nothing, without a read.
 */
const inboxReader = (
  read: () => Effect.Effect<ReadonlyArray<InboxItem>, StoreUnavailable>,
  bell: Doorbell.Doorbell,
  actor: Actor,
  first: ReadonlyArray<InboxItem>,
  rungAt: number
) => {
  let unread: ReadonlyArray<InboxItem> | undefined = first
  let readAt = rungAt
  let pageFull = false
  /** Whether the inbox holds nothing the actor has not decided: no read is due, and no message waits queued. */
  const caughtUp = () => unread === undefined && bell.rings() === readAt && actor.queued.size === 0 && !pageFull
  // Called as the drain runs it: what is already in memory comes as an `Exit`, which `yield*` takes in no step.
  const next = (): Effect.Effect<ReadonlyArray<InboxItem>, StoreUnavailable> => {
    if (unread !== undefined) {
      const items = unread
      unread = undefined
      pageFull = items.length === inboxPage
      return Exit.succeed(items)
    }
    if (caughtUp()) return Exit.succeed([])
    readAt = bell.rings()
    return Effect.map(read(), (items) => {
      pageFull = items.length === inboxPage
      return items
    })
  }
  return { next, caughtUp }
}

// Stands for the id of a turn a command cannot start.
const noTurn = "" as TurnId

/** What the sender of a command is told, once its commit is written. */
const replyExit = (
  reply: Decisions.Reply,
  firstSeq: number,
  records: ReadonlyArray<RecordBody>
): Exit.Exit<Decision, Refusal> => {
  switch (reply._tag) {
    case "Started": {
      const at = records.findIndex((record) => record._tag === "turn_started")
      return Exit.succeed(Decision.Started({ turnId: reply.turnId, cursor: firstSeq + at }))
    }
    case "Queued":
      return Exit.succeed(Decision.Queued())
    case "Steered":
      return Exit.succeed(Decision.Steered({ turnId: reply.turnId }))
    case "Interrupted":
      return Exit.succeed(Decision.Interrupted({ turnId: reply.turnId, outcome: reply.outcome }))
    case "Applied":
      return Exit.succeed(Decision.Applied())
    case "Refused":
      return Exit.fail(reply.error)
  }
}

/**
 * The session's own protocol sessions with its toolsets' servers, in the actor's scope: `undefined`,
 * with nothing to run, when its agent declares none.
 */
const openToolsets = (context: Context.Context<Services | Scope.Scope>, session: Session) => {
  const declared = session.agent.toolsets ?? []
  return declared.length === 0
    ? undefined
    : Context.get(context, Toolsets).open({ sessionId: session.id, principal: session.principal }, declared)
}

/**
 * Runs the actor of `sessionId` until it passivates; fails with `LeaseLost` when the lease goes. It
 * runs in its own `Scope`, which the host makes for it and closes with its exit (`Effect.scoped`'s
 * acquire and release in fewer Effect steps); its services are read once from the context (one
 * Effect step, against two per `yield*` of a tag).
 */
export const run = (sessionId: SessionId, options: Options, wiring: Wiring) =>
  Effect.flatMap(
    Effect.context<Services | Scope.Scope>(),
    (context) => actorIn(Context.get(context, Scope.Scope), context, sessionId, options, wiring)
  )

/** What an actor starts from. */
interface Ground {
  /** Owns the actor's turns and child-result deliveries (`Effect.forkIn`): its end interrupts them. */
  readonly scope: Scope.Scope
  readonly context: Context.Context<Services | Scope.Scope>
  readonly store: SessionStore["Type"]
  /** The actor's clock (its fiber's). */
  readonly clock: Clock.Clock
  readonly sessionId: SessionId
  readonly options: Options
  readonly wiring: Wiring
  readonly slot: BusySlot.BusySlot
}

/**
 * What ends the actor early: its lease is lost, the store is gone, or a turn died (`fatal`, with
 * `ended` set); or a busy turn stopped at a step boundary for a handover. The loop looks at them
 * whenever it wakes (the bell is rung), instead of racing a fiber against them.
 */
interface Fate {
  readonly fatal: Deferred.Deferred<never, LeaseLost | StoreUnavailable>
  ended: boolean
  stoppedForHandover: boolean
}

/** An actor holding its session's lease, with its state. */
interface Life extends Ground {
  readonly fate: Fate
  readonly held: Held
  readonly actor: Actor
  readonly handOver: WorkerPool.Handover
  /** The write lock: the actor's commits and its turns' wait for each other. */
  readonly exclusive: Lock.Lock
}

/**
 * The actor's body on the services of `context`. Its one-off setup (the lease, the state, the writer,
 * its turns' host) is a chain of plain functions, each run once, and only then comes the generator
 * of its wake loop (`wakeLoop`): a generator holding both is compiled whole, setup and all, once the
 * loop is hot.
 */
const actorIn = (
  scope: Scope.Scope,
  context: Context.Context<Services | Scope.Scope>,
  sessionId: SessionId,
  options: Options,
  wiring: Wiring
) =>
  // The host took this actor's first permit before starting it.
  Effect.flatMap(BusySlot.make(wiring.slots, scope, true), (slot) => {
    // Started just before its host began to drain: the session is left to the pool.
    if (wiring.handOver?.requested()) return wiring.onLease(false)
    const ask = askLease(scope, context, sessionId, options, wiring, slot)
    // Watched from before the inbox is read, so a push from another process in between is signalled.
    return wiring.changes === undefined
      ? ask
      : Effect.zipRight(wiring.changes((signal) => ringOnInbox(signal, wiring.bell)), ask)
  })

/**
 * Asks for the lease, with the session, its log's first page and its inbox (one store call), and
 * tells the host whether it holds it: only then does the actor go on.
 */
const askLease = (
  scope: Scope.Scope,
  context: Context.Context<Services | Scope.Scope>,
  sessionId: SessionId,
  options: Options,
  wiring: Wiring,
  slot: BusySlot.BusySlot
) =>
  Effect.clockWith((clock) => {
    const ground: Ground = { scope, context, store: Context.get(context, SessionStore), clock, sessionId, options, wiring, slot }
    const rungAt = wiring.bell.rings()
    // The lease's local deadline counts from before it was asked for.
    const askedAt = LeaseDeadline.monotonicMillis(clock)
    return Effect.flatMap(
      ground.store.start(sessionId, options.owner, Duration.toMillis(options.leaseTtl), { inbox: inboxPage }),
      (started) =>
        Option.isNone(started)
          ? wiring.onLease(false)
          : Effect.flatMap(wiring.onLease(true), () => settle(ground, started.value, askedAt, rungAt))
    )
  })

/** The lease won: kept from now on, the log folded into the actor's state and the session's toolsets opened; then the actor lives. */
const settle = (ground: Ground, started: ActorStart, askedAt: number, rungAt: number) => {
  const { options, store, wiring } = ground
  const fate: Fate = { fatal: Deferred.unsafeMake(FiberId.none), ended: false, stoppedForHandover: false }
  const lost = (loss: LeaseKeeper.Loss) => endWith(fate, wiring.bell, Deferred.fail(fate.fatal, loss))
  const held = holdLease(store, ground.scope, ground.clock, started.lease, askedAt, options.leaseTtl, wiring, lost)
  return Effect.zipRight(
    held.keep,
    Effect.flatMap(foldWith(store, ground.sessionId, started.log), (state) => {
      const life: Life = {
        ...ground,
        fate,
        held,
        actor: { session: started.session, state, running: undefined, queued: new Set(), answers: new Map() },
        handOver: wiring.handOver ?? WorkerPool.neverHandsOver,
        exclusive: Lock.make()
      }
      const toolsets = openToolsets(ground.context, started.session)
      return toolsets === undefined
        ? live(life, undefined, started, rungAt)
        : Effect.flatMap(toolsets, (opened) => live(life, opened, started, rungAt))
    })
  )
}

/** Ends the actor's life by `complete` (which fails or kills `fatal`), ringing the bell for the loop to see. */
const endWith = (fate: Fate, bell: Doorbell.Doorbell, complete: Effect.Effect<boolean>) =>
  Effect.map(complete, () => {
    fate.ended = true
    bell.ring()
  })

/** The actor's single write path (`SessionWriter`); losing the lease, or the store, ends its life. */
const writerOf = (life: Life) => {
  const { actor, context, fate, wiring } = life
  const telemetry = Context.get(context, Telemetry.Telemetry)
  return SessionWriter.make(actor, {
    store: life.store,
    broker: Context.get(context, CallbackBroker),
    lease: life.held.lease,
    lose: (error) => Effect.zipRight(endWith(fate, wiring.bell, Deferred.fail(fate.fatal, error)), Effect.fail(error)),
    announceEnd: (end, excluded) => announceEnd(telemetry, actor.session, end, excluded),
    publishRecords: wiring.publishRecords,
    wake: wiring.wake,
    scope: life.scope
  })
}

/** What the actor's turns run on (`RunningTurn.Host`): its state, its write path under its lock, its lease's checks, its slot. */
const turnHost = (
  life: Life,
  writer: SessionWriter.SessionWriter,
  toolsets: SessionToolset | undefined,
  epoch: number
): RunningTurn.Host => {
  const { actor, context, exclusive, fate, handOver, held, options, store, wiring } = life
  const bell = wiring.bell
  const broker = Context.get(context, CallbackBroker)
  // Handing over, a busy turn stops itself at its next step boundary: the next owner goes on from there.
  const stopForHandover = Effect.suspend(() => {
    fate.stoppedForHandover = true
    return Effect.interrupt
  })
  return {
    sessionId: life.sessionId,
    toolsets,
    session: actor.session,
    agent: actor.session.agent,
    sessionBudgets: actor.session.budgets,
    hostSettings: options.modelSettings,
    toolPolicy: options.toolPolicy,
    epoch,
    clock: life.clock,
    state: () => actor.state,
    commit: (records) =>
      // Whole once begun: the lock is waited for interruptibly, the commit then runs to its end (a lost lease interrupts the turn).
      exclusive.atomic(writer.appendForTurn(records, (receipt) =>
        handOver.requested() && WorkerPool.isStepBoundary(records) ? Effect.as(stopForHandover, receipt) : Effect.succeed(receipt))),
    beforeOperation: held.beforeOperation,
    broadcast: wiring.broadcast,
    answers: (callbackId) => answerOf(actor, callbackId),
    wake: Effect.sync(() => bell.ring()),
    ended: Effect.sync(() => bell.nudge()),
    broker,
    slot: life.slot,
    scope: life.scope,
    die: (defect) => Effect.asVoid(endWith(fate, bell, Deferred.die(fate.fatal, defect))),
    subagents: {
      store,
      catalog: Context.get(context, AgentCatalog),
      telemetry: Context.get(context, Telemetry.Telemetry),
      wake: wiring.wake,
      expect: wiring.expect,
      commitSpawn: (spawn, records) =>
        held.beforeOperation(exclusive(writer.spawn(spawn, records))).pipe(
          Effect.catchTags({ LeaseLost: () => Effect.interrupt, StoreUnavailable: () => Effect.interrupt })
        )
    }
  }
}

/**
 * The actor lives: its writer and its turns' host are built, it takes offers, it resumes a turn a
 * crashed owner left active and redelivers its last result, then it runs its wake loop.
 */
const live = (life: Life, toolsets: SessionToolset | undefined, started: ActorStart, rungAt: number) => {
  const { actor, exclusive, handOver, scope, slot, store, wiring } = life
  const bell = wiring.bell
  const writer = writerOf(life)
  const host = turnHost(life, writer, toolsets, started.lease.epoch)
  const startTurn = (turn: Parameters<typeof RunningTurn.start>[1], resumed: boolean) =>
    Effect.map(RunningTurn.start(host, turn, resumed), (running) => {
      actor.running = running
    })
  const inbox = inboxReader(() => store.readInbox(life.sessionId, { limit: inboxPage }), bell, actor, started.inbox, rungAt)
  // Under load a message waits in the inbox, durably, for a slot, as any other: it is not held here.
  const takes = () =>
    !life.fate.ended && !handOver.requested() && actor.running === undefined && inbox.caughtUp() &&
    (slot.held() || wiring.slotFree())
  const drain = exclusive(drainWith(
    inbox,
    (item) => runOutcome(actor, item, writer.append, startTurn, wiring),
    decideOffered(bell, takes, (offer) => admitHere(actor, offer, writer.admit, startTurn))
  ))
  let body: Effect.Effect<void, LeaseLost | StoreUnavailable, Services> = wakeLoop(life, drain)
  // A result the last owner may not have delivered before it stopped (a redelivery is a no-op).
  const lastEnd = actor.state.lastEnd
  if (lastEnd !== undefined && actor.session.parentId !== null) {
    body = Effect.zipRight(Effect.forkIn(SessionWriter.deliverResult({ store, wake: wiring.wake }, actor.session, lastEnd), scope), body)
  }
  const active = actor.state.active
  if (active !== undefined && !actor.state.closed) body = Effect.zipRight(exclusive(startTurn(active.started, true)), body)
  return Effect.zipRight(acceptOffers(bell, scope, takes), body)
}

/**
 * One look at the inbox (`inbox.next`): its items decided and carried out in admission order by
 * `execute`, then the offer handed over meanwhile; true when a full page changed the session (more
 * may wait behind it).
 */
const drainWith = <E, R>(
  inbox: ReturnType<typeof inboxReader>,
  execute: (item: InboxItem) => Effect.Effect<boolean, E, R>,
  decideOffered: () => Effect.Effect<void, E, R>
) =>
  Effect.gen(function*() {
    const items = yield* inbox.next()
    let changed = false
    for (let i = 0; i < items.length; i++) if (yield* execute(items[i]!)) changed = true
    yield* decideOffered()
    return changed && items.length === inboxPage
  })

/**
 * The actor's wake loop: it drains its inbox while it may hold something new, waits while a turn runs,
 * and when idle gives its slot back and sleeps until rung; until it passivates, hands its session over,
 * or its life ends (`Fate`).
 */
const wakeLoop = <E, R>(life: Life, drain: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function*() {
    const nextWake = busyWake(life.wiring.bell, life.handOver)
    for (;;) {
      if (life.fate.ended) return yield* Deferred.await(life.fate.fatal)
      // Handing over: the pending inbox stays for the next owner; the scope's end releases the lease.
      if (life.fate.stoppedForHandover || (life.handOver.requested() && (life.actor.running === undefined || !life.slot.held()))) return
      if (yield* drain) continue
      if (life.actor.running !== undefined) {
        yield* nextWake
        continue
      }
      if (yield* idle(life)) return
    }
  })

/**
 * The idle actor lets another actor work while it waits, and sleeps until rung; the host's idleness
 * expires its bell in time. True when it stops: it passivated, or hands its session over. A plain
 * generator the wake loop delegates to (`yield*`), not an Effect of its own: the same steps as were
 * it written in the loop, and compiled apart from it.
 */
function* idle(life: Life) {
  // Others wait for a slot (asked before this one gives its own): passivate now, not after `idleTimeout`.
  const crowded = life.wiring.crowded()
  yield* life.slot.give
  if (crowded && (yield* life.held.passivate)) return true
  yield* life.wiring.idleness.idle(life.wiring.bell)
  const woke = yield* life.wiring.bell.wait
  life.wiring.idleness.busy(life.wiring.bell)
  if (life.fate.ended) return yield* Deferred.await(life.fate.fatal)
  if (life.handOver.requested()) return true
  if (woke === "expired" && life.actor.running === undefined && (yield* life.held.passivate)) return true
  yield* life.slot.take
  return false
}

/** What a busy actor waits for: its bell; while handing over, a busy turn is looked at often (parking it wakes nobody). */
const busyWake = (bell: Doorbell.Doorbell, handOver: WorkerPool.Handover) =>
  Effect.suspend(() => handOver.requested() ? Effect.ignore(Effect.timeout(bell.wait, "50 millis")) : bell.wait)

/**
 * Rings the actor's bell when a command was pushed through another process (the
 * store signals it, `StoreSignals`), or signals may have been missed. Called as
 * the signal arrives: no fiber follows them; the host's `InboxBackstop` covers a lost one.
 */
const ringOnInbox = (signal: Signal, bell: Doorbell.Doorbell) => {
  if (signal._tag === "Inbox" || signal._tag === "Missed") bell.ring()
}

/** Tells telemetry a turn of `session` ended (kept out of analytics when its message asked so). */
const announceEnd = (telemetry: Telemetry.Telemetry["Type"], session: Session, end: TurnEnded, excluded: boolean) =>
  Telemetry.withExcluded(
    telemetry.emit(ProductEvent.turnEnded({
      kind: session.parentId === null ? "root" : "child",
      status: end.outcome,
      failureCode: end.failureCode,
      usage: end.usage
    })),
    excluded
  )

/**
 * Takes the messages handed to the actor in memory (`Doorbell.Offer`) while `takes` says it is
 * between turns and caught up with its inbox, until `scope` closes. Each is decided at the end of a
 * drain (`decideOffered`: after the inbox, since they come after whatever was pushed before them),
 * and declined, back to its sender who pushes it, when it may no longer be taken, when deciding
 * fails, or when the actor stops first.
 */
const acceptOffers = (bell: Doorbell.Doorbell, scope: Scope.Scope, takes: () => boolean) =>
  Effect.map(
    Scope.addFinalizer(scope, Effect.sync(() => {
      bell.acceptOffersWhile(undefined)
      bell.takeOffer()?.decided(undefined)
    })),
    () => bell.acceptOffersWhile(takes)
  )

/**
 * The offer handed over since the last look, decided by `admit` if it may still be taken, else
 * declined. Called as the drain runs it: with no offer, `Effect.void`, which `yield*` takes in no step.
 */
const decideOffered = <E, R>(
  bell: Doorbell.Doorbell,
  takes: () => boolean,
  admit: (offer: Doorbell.Offer) => Effect.Effect<void, E, R>
) =>
(): Effect.Effect<void, E, R> => {
  const offer = bell.takeOffer()
  if (offer === undefined) return Effect.void
  if (!takes()) return Effect.sync(() => offer.decided(undefined))
  // However it ends, its sender hears back: a lost lease or a gone store declines it.
  return Effect.onError(admit(offer), () => Effect.sync(() => offer.decided(undefined)))
}

/**
 * Decides a message handed to the idle actor (`Doorbell.Offer`): when it starts a turn, the
 * commit that records the start also admits the message into the inbox, consumed (one commit
 * instead of a push and a commit). Anything else it would do, or a store that refuses the
 * admission (something was pushed meanwhile), declines it: nothing is written, and its sender
 * pushes it as any other command.
 */
const admitHere = (
  actor: Actor,
  offer: Doorbell.Offer,
  admit: SessionWriter.SessionWriter["admit"],
  startTurn: (started: Parameters<typeof RunningTurn.start>[1], resumed: boolean) => Effect.Effect<void, never, Services>
) =>
  Effect.gen(function*() {
    const message = offer.message
    const outcome = Decisions.decide(actor.state, message, {
      busyPolicy: actor.session.busyPolicy,
      waitingForUser: false,
      nextTurnId: yield* makeTurnId
    })
    const consumesOthers = outcome.consumes.some((inputId) => inputId !== message.inputId)
    if (outcome.reply._tag !== "Started" || outcome.start === undefined || outcome.interrupt !== undefined || consumesOthers) {
      return offer.decided(undefined)
    }
    const receipt = yield* admit(outcome.records, [message])
    if (Option.isNone(receipt)) return offer.decided(undefined)
    yield* startTurn(outcome.start, false)
    const decision = replyExit(outcome.reply, receipt.value.headSeq - outcome.records.length + 1, outcome.records)
    offer.decided(Exit.isSuccess(decision) ? decision.value : undefined)
  })

/**
 * Decides one inbox item and carries the outcome out: interrupt the running
 * turn first when asked (its end records lead the commit), append, then start
 * a turn or resume a parked callback, and tell the sender. True when the
 * session changed. What only some commands do is built by plain functions
 * (`interruptFirst`, `consequences`), one `yield*` each: this runs for every
 * command, and each `yield*` in it adds to its compiled code.
 */
const runOutcome = (
  actor: Actor,
  item: InboxItem,
  append: (records: ReadonlyArray<RecordBody>, consumes: ReadonlyArray<InputId>) => Effect.Effect<CommitReceipt, LeaseLost | StoreUnavailable>,
  startTurn: StartTurn,
  wiring: Wiring
) =>
  Effect.gen(function*() {
    const command = item.command
    const outcome = Decisions.decide(actor.state, command, {
      busyPolicy: actor.session.busyPolicy,
      waitingForUser: actor.running?.waitingForUser() ?? false,
      // Only a message or a steer can start a turn: other commands mint no id.
      nextTurnId: yield* (command._tag === "message" || command._tag === "steer" ? makeTurnId : mintsNoTurn)
    })
    if (outcome.reply._tag === "Queued") return queuedOnce(actor, command.inputId, wiring)
    const records = outcome.interrupt === undefined ? outcome.records : yield* interruptFirst(actor, outcome.interrupt, outcome.records)
    // Taken before the commit, which forgets the callbacks it closes.
    const answer = outcome.resume === undefined ? undefined : actor.answers.get(outcome.resume.callbackId)
    const receipt = yield* append(records, outcome.consumes)
    yield* consequences(actor, records, outcome, answer, startTurn)
    actor.queued.delete(command.inputId)
    wiring.decide(command.inputId, replyExit(outcome.reply, receipt.headSeq - records.length + 1, records))
    return true
  })

/** Starts a turn of the actor (`resumed`: one a crashed owner left active). */
type StartTurn = (started: Parameters<typeof RunningTurn.start>[1], resumed: boolean) => Effect.Effect<void, never, Services>

// The id of a turn a command cannot start, as `yield*` takes it (an `Exit`: no step).
const mintsNoTurn: Effect.Effect<TurnId> = Exit.succeed(noTurn)

/** A message queued behind the running turn: its sender is told so once (false: nothing changed). */
const queuedOnce = (actor: Actor, inputId: InputId, wiring: Wiring) => {
  if (actor.queued.has(inputId)) return false
  actor.queued.add(inputId)
  wiring.decide(inputId, Exit.succeed(Decision.Queued()))
  return false
}

/** The running turn interrupted for `interrupt`, and `records` behind the records of its end. */
const interruptFirst = (
  actor: Actor,
  interrupt: NonNullable<Decisions.Outcome["interrupt"]>,
  records: ReadonlyArray<RecordBody>
) => {
  const turn = actor.running
  const ended = (usage: Usage) => [...Decisions.interruptRecords(actor.state, interrupt.turnId, interrupt.reason, usage), ...records]
  return turn === undefined
    ? Effect.sync(() => ended(Usage.zero))
    : Effect.zipRight(turn.interrupt(interrupt.reason), Effect.map(Clock.currentTimeMillis, (now) => ended(turn.meter.usage(now))))
}

/**
 * What a command's commit leads to: the session's tools told it closed (what they own, its processes,
 * ends with it), the turn it started, the answer handed to the turn parked on it.
 */
const consequences = (
  actor: Actor,
  records: ReadonlyArray<RecordBody>,
  outcome: Decisions.Outcome,
  answer: Deferred.Deferred<unknown> | undefined,
  startTurn: StartTurn
): Effect.Effect<unknown, never, Services> => {
  // Each only when due: most commands start a turn and nothing else, which then runs with no step around it.
  let next: Effect.Effect<unknown, never, Services> | undefined = answer === undefined
    ? undefined
    : Deferred.succeed(answer, outcome.resume!.result)
  if (outcome.start !== undefined) next = before(startTurn(outcome.start, false), next)
  if (records.some((record) => record._tag === "closed")) {
    next = before(Effect.flatMap(Toolkit, ({ sessionClosed }) => sessionClosed === undefined ? Effect.void : sessionClosed(actor.session.id)), next)
  }
  return next ?? Effect.void
}

/** `first`, then `rest` if any. */
const before = <R>(first: Effect.Effect<unknown, never, R>, rest: Effect.Effect<unknown, never, R> | undefined) =>
  rest === undefined ? first : Effect.zipRight(first, rest)
