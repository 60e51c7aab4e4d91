/**
 * The turn an actor runs: its fiber, its meter, whether it waits for the
 * user, and the context it is given (the conversation from the session's
 * state, the actor's write path, callbacks that park it). Starting one builds
 * that context and forks `TurnRunner.run` into the actor's fiber set.
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Agent, ModelSettings, ToolSpec } from "../schema/Agent.js"
import type { Budgets } from "../schema/Budget.js"
import { OpenCallback } from "../schema/Callback.js"
import type { AssistantDelta } from "../schema/Event.js"
import { type CallbackId, makeCallbackId, type OperationId, type SessionId } from "../schema/Ids.js"
import type { CommitReceipt } from "../schema/Lease.js"
import type { RunOptions } from "../schema/Run.js"
import { CallbackOpened, type RecordBody, type TurnStarted } from "../schema/Record.js"
import type { CallbackBroker } from "../services/CallbackBroker.js"
import * as Telemetry from "../services/Telemetry.js"
import type { SessionToolset } from "../services/Toolsets.js"
import type { BusySlot } from "./BusySlot.js"
import type { Session } from "../schema/Session.js"
import * as ApprovalTimeout from "./ApprovalTimeout.js"
import * as AgentTool from "./AgentTool.js"
import * as Handoffs from "./Handoffs.js"
import * as SessionState from "./SessionState.js"
import * as SubagentTools from "./SubagentTools.js"
import * as Transcript from "./Transcript.js"
import * as ToolPolicy from "./ToolPolicy.js"
import * as TurnMeter from "./TurnMeter.js"
import * as TurnPlan from "./TurnPlan.js"
import type * as TurnContext from "./TurnContext.js"
import * as TurnRunner from "./TurnRunner.js"

/** A turn running in an actor. */
export interface RunningTurn {
  readonly started: TurnStarted
  readonly fiber: Fiber.RuntimeFiber<void>
  readonly meter: TurnMeter.TurnMeter
  /** True while the turn waits for the user (`wait_user`): messages then go to it. */
  readonly waitingForUser: () => boolean
  /** Tells the turn a steer or a child result was delivered. */
  readonly steered: Effect.Effect<void>
  /** Interrupts the turn for `reason`, which the agent-tool children it waits on are interrupted with too. */
  readonly interrupt: (reason: string) => Effect.Effect<void>
}

/** What the actor gives the turns it starts. */
export interface Host {
  readonly sessionId: SessionId
  readonly session: Session
  readonly agent: Agent
  readonly sessionBudgets: Budgets | null
  readonly hostSettings: ModelSettings | undefined
  /** The host's permission layer, under every other. */
  readonly toolPolicy?: ToolPolicy.Rules | undefined
  /** The session's toolsets, opened for it (absent: its agent declares none). */
  readonly toolsets?: SessionToolset | undefined
  readonly epoch: number
  /** The actor's clock (its fiber's), read in place. */
  readonly clock: Clock.Clock
  /** The actor's newest state. */
  readonly state: () => SessionState.SessionState
  /** The actor's write path, under its writer lock; a lost lease interrupts the turn. */
  readonly commit: (records: ReadonlyArray<RecordBody>) => Effect.Effect<CommitReceipt>
  /**
   * Run right before each operation starts: it returns at once while the lease's local deadline is
   * ahead, renews the lease first when it is past, and interrupts the turn (the actor stopping with
   * `LeaseLost`) when the lease may be someone else's.
   */
  readonly beforeOperation: <A, E, R>(operation: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly broadcast: (events: ReadonlyArray<AssistantDelta>) => Effect.Effect<void>
  /** Where parked turns wait for answers, by callback. */
  readonly answers: (callbackId: CallbackId) => Deferred.Deferred<unknown>
  /** Asks the actor to read its inbox again (queued messages become a waiting turn's answer). */
  readonly wake: Effect.Effect<void>
  /** Tells the actor its turn ended (it reads its inbox again only if something may have come). */
  readonly ended: Effect.Effect<void>
  readonly broker: CallbackBroker["Type"]
  readonly slot: BusySlot
  /** The actor's scope: a turn's fiber is forked in it, so the actor's end interrupts the turn. */
  readonly scope: Scope.Scope
  /** Ends the actor on a defect of a turn. */
  readonly die: (defect: unknown) => Effect.Effect<void>
  /** What the `agents.*` tools run on, beside the state and the slot. */
  readonly subagents: Omit<SubagentTools.Env, "session" | "turnId" | "state" | "awaitResult" | "interruptReason" | "commit">
}

/** The conversation a model call made now gets: the transcript with `pending` folded on, then the waiting steers and child results. */
const promptOf = (state: SessionState.SessionState, pending: ReadonlyArray<RecordBody>): TurnContext.Prompt => {
  const view = viewOf(state, pending)
  return {
    // The transcript itself: the request makes its array, and notes the history it shares (Model.withHistory).
    messages: Transcript.history(view.transcript, SessionState.waitingMessages(view)),
    steers: view.active?.steers.length ?? 0,
    results: view.active?.results.length ?? 0,
    archived: HashMap.size(view.artifacts)
  }
}

/** `state` with `pending` (records not committed yet) folded on. */
const viewOf = (state: SessionState.SessionState, pending: ReadonlyArray<RecordBody>): SessionState.SessionState =>
  pending.length === 0 ? state : SessionState.applyCommit(state, state.head + 1, 0, pending)

/** The plan of `started` under an agent: the session's, or one the turn was handed to (`offered`: the built-in and toolset tools). */
const planner = (host: Host, started: TurnStarted, offered: ReadonlyArray<ToolSpec>) => (agent: Agent) =>
  TurnPlan.resolve({
    agent,
    run: started.run,
    sessionBudgets: host.sessionBudgets,
    hostSettings: host.hostSettings,
    builtins: agent.handoffs.length === 0 ? offered : [...offered, ...Handoffs.specsFor(agent)],
    hostPolicy: host.toolPolicy
  })

/**
 * A turn's doorbell for steers and child results: `signal` rings it, `next` waits for a ring
 * (one pending ring is kept, as a sliding queue of one). Its queue is made when the turn first
 * waits (most turns never do); a ring before that is kept until then.
 */
const inputSignal = () => {
  let queue: Queue.Queue<void> | undefined
  let signalled = false
  const next: Effect.Effect<void> = Effect.suspend(() =>
    queue !== undefined ? Queue.take(queue) : Effect.flatMap(Queue.sliding<void>(1), (made) => {
      queue = made
      if (!signalled) return Queue.take(made)
      signalled = false
      return Effect.void
    })
  )
  const signal: Effect.Effect<void> = Effect.suspend(() => {
    if (queue !== undefined) return Effect.asVoid(Queue.offer(queue, undefined))
    signalled = true
    return Effect.void
  })
  return { next, signal }
}

/**
 * What a running turn's parts share and change: whether it waits for the user, why the actor
 * interrupted it, and the agent in charge's layers (children inherit them; a handoff changes them).
 */
interface Running {
  readonly host: Host
  readonly started: TurnStarted
  /** Signalled when a steer or a child result for the turn is committed. */
  readonly inputs: ReturnType<typeof inputSignal>
  /** True while the turn waits for the user (`wait_user`). */
  waitingForUser: boolean
  /** Set only when the actor decided to end the turn: a host that stops interrupts it with none (it resumes elsewhere). */
  interruptedFor: string | undefined
  /** The permission layers of the agent in charge. */
  layers: TurnPlan.TurnPlan["layers"]
  /** The run options children get, made from `layers` when first asked for (most turns spawn none). */
  childRun: RunOptions | undefined
}

/** What a turn's body needs from the actor's context. */
type Services = Effect.Effect.Context<ReturnType<typeof TurnRunner.run>>

/** Starts `started` as a turn of the actor (`resumed`: a turn a previous owner left active). */
export const start = (host: Host, started: TurnStarted, resumed: boolean): Effect.Effect<RunningTurn, never, Services> =>
  Effect.suspend(() => {
    const state = host.state()
    const callbacks = resumed ? SessionState.callbacksOf(state, started.turnId) : []
    // Most turns: no callback to offer again, no toolsets to list.
    if (host.toolsets === undefined && !callbacks.some((entry) => entry.status === "open")) {
      return launch(host, started, resumed, state, callbacks, meterOf(host), [])
    }
    return Effect.gen(function*() {
      // A resumed turn's open callbacks wait for answers again, and are offered to providers again.
      for (const entry of callbacks) {
        if (entry.status !== "open") continue
        host.answers(entry.opened.callbackId)
        yield* host.broker.dispatch(entry.opened)
      }
      const meter = meterOf(host)
      // The toolsets' tools as listed now: a list that changes is read again at the next turn.
      const listed = host.toolsets === undefined ? [] : yield* host.toolsets.specs
      return yield* launch(host, started, resumed, state, callbacks, meter, listed)
    })
  })

const meterOf = (host: Host) => TurnMeter.make(host.clock.unsafeCurrentTimeMillis())

/** Forks the turn's body in the actor's scope; `listed`: the toolsets' tools. */
const launch = (
  host: Host,
  started: TurnStarted,
  resumed: boolean,
  state: SessionState.SessionState,
  callbacks: ReadonlyArray<SessionState.CallbackEntry>,
  meter: TurnMeter.TurnMeter,
  listed: ReadonlyArray<ToolSpec>
): Effect.Effect<RunningTurn, never, Services> => {
  const builtins = SubagentTools.specsFor(host.session)
  const planFor = planner(host, started, listed.length === 0 ? builtins : [...builtins, ...listed])
  const plan = planFor(host.agent)
  const running: Running = {
    host,
    started,
    inputs: inputSignal(),
    waitingForUser: false,
    interruptedFor: undefined,
    layers: plan.layers,
    childRun: undefined
  }
  // The subagent tools' environment, made when first needed: a turn without them or an agent tool never does.
  let env: SubagentTools.Env | undefined
  const envOf = () => (env ??= subagentEnv(running))
  const ctx = turnContext(running, resumed, state, callbacks, meter, plan, planFor, envOf, builtins.length === 0 ? undefined : SubagentTools.make(envOf()))
  // `succeed` in a flatMap rather than a `map`: one Effect step less (a map's function runs in a step of its own).
  return Effect.flatMap(Effect.forkIn(turnBody(running, resumed, ctx), host.scope), (fiber) =>
    Effect.succeed({
      started,
      fiber,
      meter,
      waitingForUser: () => running.waitingForUser,
      steered: running.inputs.signal,
      interrupt: (reason: string) =>
        Effect.suspend(() => {
          running.interruptedFor = reason
          return Fiber.interrupt(fiber)
        })
    }))
}

/** What the `agents.*` tools and the agent tools of the turn run on. */
const subagentEnv = (running: Running): SubagentTools.Env => {
  const { host, started } = running
  return {
    ...host.subagents,
    session: host.session,
    turnId: started.turnId,
    state: host.state,
    awaitResult: host.slot.park(running.inputs.next),
    interruptReason: () => running.interruptedFor,
    commit: (records) => Effect.asVoid(host.commit(records)),
    childRun: () => (running.childRun ??= ToolPolicy.childRun(running.layers, started.run))
  }
}

/** The turn's body as the actor runs it: in its span, ending the actor on a defect. */
const turnBody = (running: Running, resumed: boolean, ctx: TurnContext.TurnContext) => {
  const { host, started } = running
  return TurnRunner.run(ctx).pipe(
    Telemetry.withTurnSpan({ sessionId: host.sessionId, turnId: started.turnId, epoch: host.epoch }, { "troupe.resumed": resumed }),
    // The events a turn emits (compaction, refused spawns) are excluded when its sender asked so.
    Telemetry.withExcluded(started.excludeFromAnalytics === true),
    Effect.ensuring(host.ended),
    Effect.catchAllDefect(host.die)
  )
}

/** What the turn is given: the conversation from the session's state, the actor's write path, callbacks that park it. */
const turnContext = (
  running: Running,
  resumed: boolean,
  state: SessionState.SessionState,
  callbacks: ReadonlyArray<SessionState.CallbackEntry>,
  meter: TurnMeter.TurnMeter,
  plan: TurnPlan.TurnPlan,
  planFor: (agent: Agent) => TurnPlan.TurnPlan,
  env: () => SubagentTools.Env,
  subagents: SubagentTools.SubagentTools | undefined
): TurnContext.TurnContext => {
  const { host, started } = running
  return {
    sessionId: host.sessionId,
    turnId: started.turnId,
    principal: host.session.principal,
    agentPath: host.session.agentPath,
    rootId: host.session.rootId,
    epoch: host.epoch,
    clock: host.clock,
    agent: host.agent,
    plan,
    planFor: (agent) => {
      const handedTo = planFor(agent)
      running.layers = handedTo.layers
      running.childRun = undefined
      return handedTo
    },
    message: started.text,
    agentTools: AgentTool.make(env),
    prompt: (pending) => promptOf(host.state(), pending),
    view: (pending) => viewOf(host.state(), pending),
    waitingSteers: (pending) => SessionState.waitingInputs(host.state(), pending),
    receipts: resumed ? SessionState.receiptsOf(state) : [],
    callbacks: callbacks.length === 0 ? [] : callbacks.map(knownCallback),
    meter,
    approved: (toolName) => HashSet.has(host.state().approvals, toolName),
    // The receipt is the turn's to ignore: no `asVoid` step per commit.
    commit: host.commit,
    beforeOperation: host.beforeOperation,
    publish: host.broadcast,
    awaitSteers: awaitSteers(running),
    openCallback: callbackOpener(running),
    awaitCallback: (callbackId) => {
      const opened = callbacks.find((entry) => entry.opened.callbackId === callbackId)
      const answer = Deferred.await(host.answers(callbackId))
      return host.slot.park(ApprovalTimeout.awaitAnswer(
        answer,
        opened === undefined ? undefined : expiry(running, callbackId, opened.opened.operationId, opened.expiresAt)
      ))
    },
    subagents,
    toolsets: host.toolsets
  }
}

const knownCallback = (entry: SessionState.CallbackEntry): TurnContext.KnownCallback => ({
  callbackId: entry.opened.callbackId,
  operationId: entry.opened.operationId,
  kind: entry.opened.kind,
  status: entry.status,
  result: entry.result,
  expiresAt: entry.expiresAt
})

/** Parks the turn until the user says something: messages queued behind it are its answer. */
const awaitSteers = (running: Running): Effect.Effect<void> => {
  const { host } = running
  return host.slot.park(Effect.gen(function*() {
    running.waitingForUser = true
    // Messages queued behind the turn are now its answer: the inbox is read again.
    yield* host.wake
    while (SessionState.waitingInputs(host.state(), []) === 0) yield* running.inputs.next
  })).pipe(Effect.ensuring(Effect.sync(() => (running.waitingForUser = false))))
}

/** The expiry of an approval opened with a deadline. */
const expiry = (running: Running, callbackId: CallbackId, operationId: OperationId, expiresAt: number | undefined) =>
  expiresAt === undefined ? undefined : ApprovalTimeout.expireAt(
    { sessionId: running.host.sessionId, callbackId, turnId: running.started.turnId, operationId, expiresAt },
    running.host.subagents.store,
    running.host.wake
  )

/** The turn's `openCallback`: commits a new callback with `records`, offers it to providers, and parks until its answer. */
const callbackOpener = (running: Running): TurnContext.TurnContext["openCallback"] => (operationId, request, records, expiresAt) =>
  Effect.gen(function*() {
    const { host } = running
    const { sessionId } = host
    const turnId = running.started.turnId
    const callbackId = yield* makeCallbackId
    // Waited on before the commit, so an answer applied right after it finds the turn parked.
    const answer = host.answers(callbackId)
    const opened = new CallbackOpened({ callbackId, turnId, operationId, kind: request._tag, request, expiresAt }, true)
    const receipt = yield* host.commit([...records, opened])
    yield* host.beforeOperation(host.broker.dispatch(
      new OpenCallback({
        callbackId,
        sessionId,
        turnId,
        operationId,
        kind: request._tag,
        request,
        openedSeq: receipt.headSeq,
        openedAt: receipt.at
      }, true)
    ))
    return yield* host.slot.park(ApprovalTimeout.awaitAnswer(Deferred.await(answer), expiry(running, callbackId, operationId, expiresAt)))
  })
