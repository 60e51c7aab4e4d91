/**
 * One session's actor: it holds the session's lease, applies inbox commands in
 * admission order, runs at most one turn at a time as a child fiber, and is
 * the only writer of the session's log while its lease lasts.
 *
 * Life: acquire the lease (or leave the session to whoever holds it), start
 * the `LeaseKeeper`, rebuild the transcript from the log, resume a turn a
 * crashed owner left active, then loop over the inbox until idle for
 * `idleTimeout` with nothing to do (passivation), or until the lease is lost
 * (then nothing more is written and the actor stops with `LeaseLost`).
 *
 * @since 0.1.0
 */
import { Chunk, Clock, Deferred, Duration, Effect, Exit, Fiber, FiberSet, Option, Queue, Ref } from "effect"
import type { Agent, ModelSettings } from "../schema/Agent.js"
import { type CallbackRequest, OpenCallback } from "../schema/Callback.js"
import { LeaseLost, SessionBusy, StaleCallback, type StoreUnavailable, TurnMismatch } from "../schema/Errors.js"
import type { AssistantDelta } from "../schema/Event.js"
import {
  type CallbackId,
  type InputId,
  makeCallbackId,
  makeCommitId,
  makeTurnId,
  type OperationId,
  type SessionId,
  type TurnId
} from "../schema/Ids.js"
import type { CallbackAnswer, Command, Control, Interrupt, Message, Steer } from "../schema/Inbox.js"
import type { Commit, CommitReceipt, Lease } from "../schema/Lease.js"
import {
  Archived,
  CallbackOpened,
  CallbackResolved,
  Closed,
  InputApplied,
  type RecordBody,
  Renamed,
  TurnEnded,
  TurnStarted
} from "../schema/Record.js"
import type { RunOptions } from "../schema/Run.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import { CallbackBroker } from "../services/CallbackBroker.js"
import * as Telemetry from "../services/Telemetry.js"
import type * as Model from "../services/Model.js"
import { Decision } from "../services/SessionHost.js"
import { SessionStore } from "../services/SessionStore.js"
import * as LeaseKeeper from "./LeaseKeeper.js"
import * as Lock from "./Lock.js"
import * as TurnMeter from "./TurnMeter.js"
import * as TurnPlan from "./TurnPlan.js"
import * as TurnRunner from "./TurnRunner.js"

/** How an actor is tuned. */
export interface Options {
  /** This host's lease owner name. */
  readonly owner: string
  readonly leaseTtl: Duration.Duration
  readonly idleTimeout: Duration.Duration
  /** The host's default model settings, under the agent's and the run's. */
  readonly modelSettings?: ModelSettings | undefined
}

/** The refusals an actor may decide on an input. */
export type Refusal = SessionBusy | TurnMismatch | StaleCallback

/** What the host gives an actor. */
export interface Wiring {
  /** Wake-ups: a command was admitted or a turn ended. */
  readonly wakes: Queue.Queue<void>
  /** Delivers a decision (or refusal) on an input to whoever waits for it. */
  readonly decide: (inputId: InputId, decision: Exit.Exit<Decision, Refusal>) => Effect.Effect<void>
  /**
   * Announces the records a commit wrote (seqs from `firstSeq`, written at
   * `at`): to whoever awaits their turn's end, and to live subscribers.
   */
  readonly publishRecords: (firstSeq: number, at: number, records: ReadonlyArray<RecordBody>) => Effect.Effect<void>
  /** Broadcasts volatile events to live subscribers. */
  readonly broadcast: (events: ReadonlyArray<AssistantDelta>) => Effect.Effect<void>
  /**
   * Called when the actor has been idle for `idleTimeout`: true lets it stop.
   * The host answers under its own lock: when nothing is pending it releases
   * the lease and forgets the actor, so a new command starts a fresh one.
   */
  readonly mayPassivate: (lease: Lease) => Effect.Effect<boolean, StoreUnavailable>
  /** Called once the actor knows whether it holds the lease. */
  readonly onLease: (held: boolean) => Effect.Effect<void>
  /**
   * Permits to be busy, shared by the host's actors: an actor holds one from
   * waking until it is idle with no running turn, so an overloaded host runs
   * a bounded number of actors at once (and their leases keep being renewed)
   * while the rest wait with their commands safe in the inbox.
   */
  readonly slots: Effect.Semaphore
}

interface ActiveTurn {
  readonly turnId: TurnId
  readonly fiber: Fiber.RuntimeFiber<TurnRunner.TurnSummary | undefined>
  readonly steers: Queue.Queue<string>
  readonly meter: TurnMeter.TurnMeter
  /** Its product events are excluded from analytics. */
  readonly excluded: boolean
  /** True while the turn waits for the user (`wait_user`): messages then go to it. */
  waitingForUser: boolean
}

/** A callback of this session as the log tells it, and, while open, how its turn waits for the answer. */
interface KnownCallback {
  /** Its `callback_opened` record, with the seq and time the commit gave it. */
  opened: OpenCallback
  readonly toolName: string
  status: TurnRunner.KnownCallback["status"]
  result?: unknown
  /** Set while a running turn waits on it: answers are taken only then. */
  answer?: Deferred.Deferred<unknown> | undefined
}

const isSessionApproval = (result: unknown) =>
  (result as { decision?: unknown } | undefined)?.decision === "approve_session"

/** Runs the actor of `sessionId` until it passivates; fails with `LeaseLost` when the lease goes. */
export const run = (sessionId: SessionId, options: Options, wiring: Wiring) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* SessionStore
    const broker = yield* CallbackBroker
    const telemetry = Option.getOrElse(yield* Effect.serviceOption(Telemetry.Telemetry), () => Telemetry.noop)
    const ttlMillis = Duration.toMillis(options.leaseTtl)
    let holdsSlot = false
    const takeSlot = Effect.zipRight(wiring.slots.take(1), Effect.sync(() => (holdsSlot = true)))
    const giveSlot = Effect.suspend(() => {
      if (!holdsSlot) return Effect.void
      holdsSlot = false
      return wiring.slots.release(1)
    })
    yield* Effect.addFinalizer(() => giveSlot)
    yield* takeSlot
    const acquired = yield* store.acquire(sessionId, options.owner, ttlMillis)
    yield* wiring.onLease(Option.isSome(acquired))
    if (Option.isNone(acquired)) return
    const lease = yield* Ref.make(acquired.value)
    // Set once the host released the lease on passivating: releasing it again would be a write for nothing.
    let passivated = false
    yield* Effect.addFinalizer((exit) =>
      // A lost lease is not ours to release; a closing actor gives it back.
      (Exit.isFailure(exit) && exit.cause._tag === "Fail") || passivated
        ? Effect.void
        : Effect.ignore(Effect.flatMap(Ref.get(lease), store.release))
    )
    const fatal = yield* Deferred.make<never, LeaseLost | StoreUnavailable>()
    const turns = yield* FiberSet.make<TurnRunner.TurnSummary | undefined>()
    yield* LeaseKeeper.run(lease, options.leaseTtl).pipe(
      Effect.catchAll((error) => Deferred.fail(fatal, error)),
      Effect.forkScoped
    )

    const session = yield* store.get(sessionId)
    const agent: Agent = session.agent
    const busyPolicy = session.busyPolicy
    let head = session.headSeq
    let closed = session.status === "closed"
    let active: ActiveTurn | undefined
    const ended = new Set<TurnId>()
    const history: Array<Model.Message> = []
    // Queued messages already told "queued", so a rescan does not tell them twice.
    const queued = new Set<InputId>()
    const writer = Lock.make()
    /** The open callback a `callback_opened` record at `seq` stands for. */
    const openCallbackOf = (body: CallbackOpened, seq: number, at: number) =>
      new OpenCallback({
        callbackId: body.callbackId,
        sessionId,
        turnId: body.turnId,
        operationId: body.operationId,
        kind: body.kind,
        request: body.request,
        openedSeq: seq,
        openedAt: at
      }, true)
    // Every callback of the session, open or closed: a stale answer is told how its callback closed.
    const callbacks = new Map<CallbackId, KnownCallback>()
    // Tools approved "for the session" by an approval answer.
    const approvals = new Set<string>()

    /**
     * The single write path: append, advance the head, publish. Losing the
     * lease is fatal. `persisted` runs between the append and the publishing,
     * so whoever sees a record published (an `awaitTurn`, a live subscriber)
     * also sees what it caused, such as a turn's product event.
     */
    const append = (
      records: ReadonlyArray<RecordBody>,
      consumes: ReadonlyArray<InputId>,
      persisted: Effect.Effect<void> = Effect.void
    ): Effect.Effect<CommitReceipt, LeaseLost | StoreUnavailable> =>
      Effect.flatMap(Ref.get(lease), (current) =>
        Effect.flatMap(makeCommitId, (commitId) => {
          // A plain value: it goes to the store and no further.
          const commit: Commit = {
            commitId,
            sessionId,
            owner: current.owner,
            epoch: current.epoch,
            expectedHeadSeq: head,
            records,
            consumes
          }
          return Effect.matchEffect(store.append(commit), {
            onFailure: (error) => {
              switch (error._tag) {
                case "Conflict":
                case "SessionNotFound":
                  return Effect.die(error)
                case "SequenceConflict":
                  return lose(new LeaseLost({ sessionId, epoch: current.epoch, owner: current.owner }))
                default:
                  return lose(error)
              }
            },
            onSuccess: (receipt) => {
              const from = head
              head = receipt.headSeq
              return Effect.zipRight(persisted, Effect.as(wiring.publishRecords(from + 1, receipt.at, records), receipt))
            }
          })
        }))
    const lose = (error: LeaseLost | StoreUnavailable) => Effect.zipRight(Deferred.fail(fatal, error), Effect.fail(error))

    // ---- rebuild what the log knows: the conversation, which turns ended, the callbacks ----
    let after = 0
    let resume: TurnStarted | undefined
    // Where the resumed turn's message sits in the transcript; what follows it are its steers.
    let resumeAt = 0
    for (;;) {
      const page = yield* store.readLog(sessionId, { after, limit: 1000 })
      for (const { at, body, seq } of page.records) {
        if (body._tag === "callback_opened") {
          callbacks.set(body.callbackId, {
            opened: openCallbackOf(body, seq, at),
            toolName: String((body.request as { toolName?: unknown } | undefined)?.toolName ?? ""),
            status: "open"
          })
        } else if (body._tag === "callback_resolved") {
          const known = callbacks.get(body.callbackId)
          if (known !== undefined) {
            known.status = body.resolution
            known.result = body.result
            if (known.opened.kind === "approval" && isSessionApproval(body.result)) approvals.add(known.toolName)
          }
        } else if (body._tag === "turn_started") {
          history.push({ role: "user", content: body.text })
          if (body.turnId === session.activeTurnId) {
            resume = body
            resumeAt = history.length - 1
          }
        } else if (body._tag === "input_applied" && body.kind === "steer" && body.turnId !== undefined) {
          const text = (body.detail as { text?: unknown } | undefined)?.text
          if (typeof text === "string") history.push({ role: "user", content: text })
        } else if (body._tag === "turn_ended") {
          ended.add(body.turnId)
          if (body.outcome === "completed" && body.output) history.push({ role: "assistant", content: body.output })
        }
      }
      after = page.cursor
      if (!page.more) break
    }

    /** Reports a turn's end to product telemetry (bounded dimensions only). */
    const announceEnd = (end: TurnEnded, excluded: boolean) =>
      Telemetry.withExcluded(
        telemetry.emit(ProductEvent.turnEnded({
          kind: session.parentId === null ? "root" : "child",
          status: end.outcome,
          failureCode: end.failureCode,
          usage: end.usage
        })),
        excluded
      )

    /** Parks the calling turn on `effect`: its busy slot goes to other actors meanwhile. */
    const park = <A>(effect: Effect.Effect<A>) =>
      Effect.gen(function*() {
        yield* giveSlot
        const result = yield* effect
        yield* takeSlot
        return result
      })

    const startTurn = (
      turnId: TurnId,
      inputId: InputId,
      text: string,
      run: RunOptions | undefined,
      excluded: boolean,
      resumed: boolean
    ) =>
      Effect.gen(function*() {
        const priorHistory = resumed ? history.slice(0, resumeAt) : history.slice()
        if (!resumed) history.push({ role: "user", content: text })
        const steers = yield* Queue.unbounded<string>()
        if (resumed) for (const m of history.slice(resumeAt + 1)) steers.unsafeOffer(m.content)
        const receipts = resumed ? yield* store.operations(sessionId, turnId) : []
        // A resumed turn's open callbacks wait for answers again, and are offered to providers again.
        const known: Array<TurnRunner.KnownCallback> = []
        if (resumed) {
          for (const [callbackId, entry] of callbacks) {
            if (entry.opened.turnId !== turnId) continue
            known.push({
              callbackId,
              operationId: entry.opened.operationId,
              kind: entry.opened.kind,
              status: entry.status,
              result: entry.result
            })
            if (entry.status !== "open") continue
            entry.answer = yield* Deferred.make<unknown>()
            yield* broker.dispatch(entry.opened)
          }
        }
        const meter = TurnMeter.make(yield* Clock.currentTimeMillis)
        const turn = { waitingForUser: false }
        const commit = (records: ReadonlyArray<RecordBody>) =>
          writer(
            Effect.gen(function*() {
              const end = records.find((record): record is TurnEnded => record._tag === "turn_ended")
              return yield* append(
                records,
                [],
                end === undefined ? Effect.void : Effect.suspend(() => {
                  ended.add(turnId)
                  active = undefined
                  return announceEnd(end, excluded)
                })
              )
            })
          ).pipe(Effect.catchAll(() => Effect.interrupt))
        const openCallback = (operationId: OperationId, request: CallbackRequest, records: ReadonlyArray<RecordBody>) =>
          Effect.gen(function*() {
            const callbackId = yield* makeCallbackId
            const answer = yield* Deferred.make<unknown>()
            const opened = new CallbackOpened({ callbackId, turnId, operationId, kind: request._tag, request }, true)
            const entry: KnownCallback = {
              // Placed before the commit, so an answer applied right after it finds the callback.
              opened: openCallbackOf(opened, 0, 0),
              toolName: request.toolName,
              status: "open",
              answer
            }
            callbacks.set(callbackId, entry)
            const receipt = yield* commit([...records, opened])
            entry.opened = openCallbackOf(opened, receipt.headSeq, receipt.at)
            yield* broker.dispatch(entry.opened)
            return yield* park(Deferred.await(answer))
          })
        // A lease keeps its epoch for as long as this actor renews it.
        const epoch = (yield* Ref.get(lease)).epoch
        const body = TurnRunner.run({
          sessionId,
          turnId,
          epoch,
          inputId,
          agent,
          plan: TurnPlan.resolve({ agent, run, sessionBudgets: session.budgets, hostSettings: options.modelSettings }),
          history: priorHistory,
          text,
          receipts,
          callbacks: known,
          meter,
          approvals,
          commit: (records) => Effect.asVoid(commit(records)),
          publish: wiring.broadcast,
          takeSteers: Effect.map(Queue.takeAll(steers), Chunk.toReadonlyArray),
          awaitSteers: park(Effect.gen(function*() {
            turn.waitingForUser = true
            // Messages queued behind the turn are now its answer: the inbox is read again.
            yield* Queue.offer(wiring.wakes, undefined)
            const first = yield* Queue.take(steers)
            turn.waitingForUser = false
            return [first, ...Chunk.toReadonlyArray(yield* Queue.takeAll(steers))]
          })).pipe(Effect.ensuring(Effect.sync(() => (turn.waitingForUser = false)))),
          openCallback,
          awaitCallback: (callbackId) => {
            const answer = callbacks.get(callbackId)?.answer
            return answer === undefined ? Effect.never : park(Deferred.await(answer))
          }
        }).pipe(
          Telemetry.withTurnSpan({ sessionId, turnId, epoch }, { "troupe.resumed": resumed }),
          Effect.tap((summary) =>
            Effect.sync(() => {
              if (summary.outcome === "completed" && summary.output) {
                history.push({ role: "assistant", content: summary.output })
              }
            })
          ),
          Effect.ensuring(Queue.offer(wiring.wakes, undefined)),
          Effect.catchAllDefect((defect) => Deferred.die(fatal, defect).pipe(Effect.as(undefined)))
        )
        const fiber = yield* FiberSet.run(turns, body)
        active = {
          excluded,
          turnId,
          fiber,
          steers,
          meter,
          get waitingForUser() {
            return turn.waitingForUser
          }
        }
      })

    /** Closes a turn's open callbacks as cancelled: the records to append. */
    const cancelCallbacks = (turnId: TurnId) =>
      Effect.gen(function*() {
        const records: Array<RecordBody> = []
        for (const [callbackId, entry] of callbacks) {
          if (entry.opened.turnId !== turnId || entry.status !== "open") continue
          records.push(new CallbackResolved({ callbackId, turnId, resolution: "cancelled" }, true))
          entry.status = "cancelled"
          entry.answer = undefined
          yield* broker.withdraw(callbackId)
        }
        return records
      })

    /** Interrupts the active turn and records it; the caller holds the writer. */
    const interruptActive = (reason: string, consumes: ReadonlyArray<InputId>, extra: ReadonlyArray<RecordBody>) =>
      Effect.gen(function*() {
        const turn = active!
        yield* Fiber.interrupt(turn.fiber)
        const now = yield* Clock.currentTimeMillis
        const end = new TurnEnded({ turnId: turn.turnId, outcome: "interrupted", reason, usage: turn.meter.usage(now) }, true)
        yield* append([...(yield* cancelCallbacks(turn.turnId)), end, ...extra], consumes, Effect.suspend(() => {
          ended.add(turn.turnId)
          active = undefined
          return announceEnd(end, turn.excluded)
        }))
      })

    const begin = (command: Message | Steer) =>
      Effect.gen(function*() {
        const turnId = yield* makeTurnId
        const run = command._tag === "message" ? command.run : undefined
        const excludeFromAnalytics = command._tag === "message" ? command.excludeFromAnalytics : undefined
        yield* append([
          new TurnStarted({ turnId, inputId: command.inputId, text: command.text, run, excludeFromAnalytics }, true)
        ], [command.inputId])
        yield* startTurn(turnId, command.inputId, command.text, run, excludeFromAnalytics === true, false)
        return Decision.Started({ turnId, cursor: head })
      })

    const onMessage = (command: Message) =>
      Effect.gen(function*() {
        if (active === undefined) {
          const started = yield* begin(command)
          queued.delete(command.inputId)
          return yield* wiring.decide(command.inputId, Exit.succeed(started))
        }
        // The running turn asked the user for more (`wait_user`): this is the answer.
        if (active.waitingForUser) return yield* onSteer(command)
        switch (busyPolicy) {
          case "queue": {
            if (!queued.has(command.inputId)) {
              queued.add(command.inputId)
              yield* wiring.decide(command.inputId, Exit.succeed(Decision.Queued()))
            }
            return
          }
          case "steer":
            return yield* onSteer(command)
          case "reject": {
            const activeTurnId = active.turnId
            yield* append([
              new InputApplied({
                inputId: command.inputId,
                kind: "message",
                turnId: activeTurnId,
                detail: { rejected: "busy" }
              }, true)
            ], [command.inputId])
            return yield* wiring.decide(command.inputId, Exit.fail(new SessionBusy({ sessionId, activeTurnId })))
          }
          case "interrupt": {
            yield* interruptActive("superseded by a new message", [], [])
            return yield* wiring.decide(command.inputId, Exit.succeed(yield* begin(command)))
          }
        }
      })

    const onSteer = (command: Message | Steer) =>
      Effect.gen(function*() {
        if (active === undefined) return yield* wiring.decide(command.inputId, Exit.succeed(yield* begin(command)))
        const turnId = active.turnId
        yield* append([
          new InputApplied({ inputId: command.inputId, kind: "steer", turnId, detail: { text: command.text } }, true)
        ], [command.inputId])
        active.steers.unsafeOffer(command.text)
        // In the transcript a steer follows its turn's message, as in the log.
        history.push({ role: "user", content: command.text })
        yield* wiring.decide(command.inputId, Exit.succeed(Decision.Steered({ turnId })))
      })

    const onInterrupt = (command: Interrupt) =>
      Effect.gen(function*() {
        if (active !== undefined && active.turnId === command.expectedTurnId) {
          const turnId = active.turnId
          yield* interruptActive(command.reason ?? "interrupted", [command.inputId], [
            new InputApplied({ inputId: command.inputId, kind: "interrupt", turnId, detail: { outcome: "interrupted" } }, true)
          ])
          return yield* wiring.decide(command.inputId, Exit.succeed(Decision.Interrupted({ turnId, outcome: "interrupted" })))
        }
        const raced = ended.has(command.expectedTurnId)
        yield* append([
          new InputApplied({
            inputId: command.inputId,
            kind: "interrupt",
            turnId: command.expectedTurnId,
            detail: { outcome: raced ? "already_ended" : "turn_mismatch" }
          }, true)
        ], [command.inputId])
        yield* wiring.decide(
          command.inputId,
          raced
            ? Exit.succeed(Decision.Interrupted({ turnId: command.expectedTurnId, outcome: "already_ended" }))
            : Exit.fail(
              new TurnMismatch({
                sessionId,
                expectedTurnId: command.expectedTurnId,
                activeTurnId: active?.turnId ?? null
              })
            )
        )
      })

    /** The first answer admitted wins: it closes the callback and wakes its turn; any other is stale. */
    const onAnswer = (command: CallbackAnswer) =>
      Effect.gen(function*() {
        const entry = callbacks.get(command.callbackId)
        const answer = entry?.answer
        if (
          entry === undefined || answer === undefined ||
          entry.opened.turnId !== command.turnId || entry.opened.operationId !== command.operationId
        ) {
          const reason = entry === undefined
            ? "not_open"
            : entry.status === "answered"
            ? "answered"
            : entry.status === "open"
            ? (answer === undefined ? "not_open" : "mismatch")
            : "cancelled"
          yield* append([
            new InputApplied({
              inputId: command.inputId,
              kind: "callback_answer",
              turnId: command.turnId,
              detail: { callbackId: command.callbackId, stale: reason }
            }, true)
          ], [command.inputId])
          return yield* wiring.decide(
            command.inputId,
            Exit.fail(new StaleCallback({ sessionId, callbackId: command.callbackId, reason }))
          )
        }
        yield* append([
          new CallbackResolved({
            callbackId: command.callbackId,
            turnId: entry.opened.turnId,
            resolution: "answered",
            result: command.result
          }, true),
          new InputApplied({ inputId: command.inputId, kind: "callback_answer", turnId: entry.opened.turnId }, true)
        ], [command.inputId])
        entry.status = "answered"
        entry.result = command.result
        entry.answer = undefined
        if (entry.opened.kind === "approval" && isSessionApproval(command.result)) approvals.add(entry.toolName)
        yield* broker.withdraw(command.callbackId)
        yield* Deferred.succeed(answer, command.result)
        yield* wiring.decide(command.inputId, Exit.succeed(Decision.Applied()))
      })

    const onControl = (command: Control) =>
      Effect.gen(function*() {
        const action = command.action
        const applied = new InputApplied({ inputId: command.inputId, kind: "control" }, true)
        switch (action._tag) {
          case "rename":
            yield* append([new Renamed({ title: action.title }, true), applied], [command.inputId])
            break
          case "archive":
            yield* append([new Archived({ archived: action.archived }, true), applied], [command.inputId])
            break
          case "close":
            if (active !== undefined) {
              yield* interruptActive("session closed", [command.inputId], [new Closed({}, true), applied])
            } else {
              yield* append([new Closed({}, true), applied], [command.inputId])
            }
            closed = true
            break
        }
        yield* wiring.decide(command.inputId, Exit.succeed(Decision.Applied()))
      })

    const apply = (command: Command) => {
      switch (command._tag) {
        case "message":
          return onMessage(command)
        case "steer":
          return onSteer(command)
        case "interrupt":
          return onInterrupt(command)
        case "control":
          return onControl(command)
        case "callback_answer":
          return onAnswer(command)
        default:
          // Child results are applied by the subagent work; until then they are recorded and consumed.
          return Effect.zipRight(
            append([new InputApplied({ inputId: command.inputId, kind: command._tag }, true)], [command.inputId]),
            wiring.decide(command.inputId, Exit.succeed(Decision.Applied()))
          )
      }
    }

    /** Applies every ready command it can; true when something changed. */
    const drain = writer(Effect.gen(function*() {
      const items = yield* store.readInbox(sessionId, { limit: 256 })
      let changed = false
      for (const item of items) {
        const before = head
        if (closed) {
          // A command admitted just before the close: recorded and consumed, never acted on.
          yield* append([new InputApplied({ inputId: item.command.inputId, kind: item.command._tag, detail: { ignored: "session closed" } }, true)], [item.command.inputId])
          yield* wiring.decide(item.command.inputId, Exit.succeed(Decision.Applied()))
        } else {
          yield* apply(item.command)
        }
        if (head !== before) changed = true
      }
      return changed && items.length === 256
    }))

    if (resume !== undefined && !closed) {
      yield* writer(
        startTurn(resume.turnId, resume.inputId, resume.text, resume.run, resume.excludeFromAnalytics === true, true)
      )
    }

    const loop = Effect.gen(function*() {
      for (;;) {
        if (yield* drain) continue
        if (active !== undefined) {
          yield* Queue.take(wiring.wakes)
          continue
        }
        // Idle: let another actor work while this one waits.
        yield* giveSlot
        const woke = yield* Queue.take(wiring.wakes).pipe(Effect.timeout(options.idleTimeout), Effect.option)
        if (Option.isNone(woke) && active === undefined && (yield* wiring.mayPassivate(yield* Ref.get(lease)))) {
          // The host released the lease as it agreed.
          passivated = true
          return
        }
        yield* takeSlot
      }
    })
    yield* Effect.raceFirst(loop, Deferred.await(fatal))
  }))
