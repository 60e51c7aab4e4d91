/**
 * The tool calls of a turn: each one an operation recorded before its body
 * runs and completed right after, under the cumulative permission layers
 * (`ToolPolicy`: a denial is `tool_not_allowed`; `ask`, or a tool's own
 * `needsApproval`, parks the turn on an approval callback, which may expire),
 * on the client through a `client_tool` callback or here through the toolkit
 * (the handler given its `ToolContext`), and, on resume, picked up from its
 * receipt or callbacks (a call started without a receipt runs again only when
 * its tool declares idempotency `supported`). Consecutive calls of one reply
 * whose tools are marked `parallel` run at once, bounded, and are recorded in
 * the model's order.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ToolSpec } from "../schema/Agent.js"
import { ApprovalAnswer, ApprovalRequest, ClientToolAnswer, ClientToolRequest } from "../schema/Callback.js"
import { makeOperationId, type OperationId } from "../schema/Ids.js"
import { isToolCallInput, type OperationReceipt } from "../schema/Operation.js"
import { OperationCompleted, OperationStarted, OperationUnknown, type RecordBody } from "../schema/Record.js"
import * as Trusted from "../schema/Trusted.js"
import type * as Model from "../services/Model.js"
import * as Telemetry from "../services/Telemetry.js"
import { errorOutcome, type ToolContext, type ToolOutcome } from "../services/Tool.js"
import type { Runnable, Toolkit } from "../services/Toolkit.js"
import * as ApprovalTimeout from "./ApprovalTimeout.js"
import { unknownOutcome } from "./SessionState.js"
import * as SubagentTools from "./SubagentTools.js"
import * as ToolPolicy from "./ToolPolicy.js"
import type { Pending, TurnContext } from "./TurnContext.js"

/** What the tool calls share with the rest of their turn. */
export interface Deps {
  readonly toolkit: Toolkit["Type"]
  readonly pending: Pending
  /** Runs an effect as parked time (not active). */
  readonly parked: <A>(effect: Effect.Effect<A>) => Effect.Effect<A>
  readonly spanIds: { readonly sessionId: string; readonly turnId: string; readonly epoch: number }
}

// Answers were checked against these schemas when admitted; a stored one that no longer decodes is refused, not a crash.
const decodeApproval = (answer: unknown): ApprovalAnswer =>
  Either.getOrElse(
    Schema.decodeUnknownEither(ApprovalAnswer)(answer),
    () => new ApprovalAnswer({ decision: "deny", reason: "the approval answer was unreadable" })
  )
const decodeClientTool = Schema.decodeUnknownEither(ClientToolAnswer)

/** What the steps of the turn's tool calls share: the turn, its dependencies, and the helpers that record outcomes. */
interface Core {
  readonly ctx: TurnContext
  readonly deps: Deps
  /** Receipts of this turn by `<requestedBy>/<callId>`: model call ids are only unique within one reply. */
  readonly toolReceipts: ReadonlyMap<string, OperationReceipt>
  readonly completed: (operationId: OperationId, outcome: ToolOutcome) => OperationCompleted
  /** Records a tool call's outcome now: once a body ran, its receipt must be durable before anything else. */
  readonly completeOperation: (operationId: OperationId, outcome: ToolOutcome) => Effect.Effect<ToolOutcome>
  /** Refuses a call without running anything: the records wait for the next commit. */
  readonly refuse: (operationId: OperationId, outcome: ToolOutcome, before: ReadonlyArray<RecordBody>) => Effect.Effect<ToolOutcome>
  readonly contextOf: (call: Model.ToolCall, operationId: OperationId) => ToolContext
  /** Runs a server tool's handler (its start already durable); a defect is the model's tool error. */
  readonly execute: (call: Model.ToolCall, runnable: Runnable, operationId: OperationId) => Effect.Effect<ToolOutcome>
}

const makeCore = (ctx: TurnContext, deps: Deps): Core => {
  const { pending, spanIds } = deps
  const turnId = ctx.turnId
  const toolReceipts = new Map<string, OperationReceipt>()
  for (const receipt of ctx.receipts) {
    const input = receipt.input
    if (receipt.kind === "tool" && isToolCallInput(input)) toolReceipts.set(`${input.requestedBy}/${input.callId}`, receipt)
  }
  const completed = (operationId: OperationId, outcome: ToolOutcome) =>
    Trusted.make(OperationCompleted, { operationId, turnId, output: outcome.output, isError: outcome.isError })
  const contextOf = (call: Model.ToolCall, operationId: OperationId): ToolContext => ({
    sessionId: ctx.sessionId,
    turnId,
    operationId,
    callId: call.id,
    principal: ctx.principal,
    agentPath: ctx.agentPath,
    rootId: ctx.rootId
  })
  return {
    ctx,
    deps,
    toolReceipts,
    completed,
    completeOperation: (operationId, outcome) =>
      Effect.as(ctx.commit([...pending.take(), completed(operationId, outcome)]), outcome),
    refuse: (operationId, outcome, before) =>
      Effect.sync(() => {
        pending.add(...before, completed(operationId, outcome))
        return outcome
      }),
    contextOf,
    execute: (call, runnable, operationId) =>
      ctx.beforeOperation(runnable.run(call.arguments, contextOf(call, operationId))).pipe(
        Effect.catchAllDefect(() => Effect.succeed(errorOutcome(`the tool ${call.name} crashed`))),
        Telemetry.withOperationSpan("tool", { ...spanIds, operationId }, { "troupe.tool": call.name })
      )
  }
}

const clientOutcome = (answer: unknown): ToolOutcome =>
  Either.match(decodeClientTool(answer), {
    onLeft: () => errorOutcome("the client's result was unreadable"),
    onRight: (decoded) => ({ output: decoded.output, isError: decoded.isError })
  })

/**
 * The body of an allowed call: on the client through a callback, or here through the toolkit.
 * No generator: it is only called where its effect runs at once (its `pending.take()` happens then).
 */
const body = (
  c: Core,
  call: Model.ToolCall,
  spec: ToolSpec,
  operationId: OperationId,
  before: ReadonlyArray<RecordBody>
): Effect.Effect<ToolOutcome> => {
  const { ctx, deps: { parked, pending, toolkit } } = c
  if (spec.client) {
    const request = new ClientToolRequest({ toolName: call.name, callId: call.id, arguments: call.arguments }, true)
    return Effect.flatMap(
      parked(ctx.openCallback(operationId, request, [...pending.take(), ...before])),
      (answer) => c.completeOperation(operationId, clientOutcome(answer))
    )
  }
  if (call.name === SubagentTools.SPAWN && ctx.subagents !== undefined) {
    // The spawn and the call's receipt commit together, or neither does.
    const prior = [...pending.take(), ...before]
    return Effect.map(ctx.subagents.spawn(call, operationId, (outcome) => [...prior, c.completed(operationId, outcome)]), (spawned) => {
      if (!spawned.written) pending.add(...prior, c.completed(operationId, spawned.outcome))
      return spawned.outcome
    })
  }
  // A toolset's tool only when it is the one the plan offered: an agent's own tool of the same name comes first.
  const listed = ctx.toolsets?.get(call.name)
  const runnable = ctx.agentTools?.get(spec, call, operationId) ?? ctx.subagents?.get(call.name, call, operationId) ??
    (listed?.spec === spec ? listed : undefined) ?? toolkit.get(call.name)
  if (runnable === undefined) {
    return c.refuse(operationId, errorOutcome(`no handler for the tool ${call.name} on this host`), before)
  }
  // Started is durable before the body runs: a crash from here on leaves the call's outcome unknown.
  const records = [...pending.take(), ...before]
  const run = Effect.flatMap(c.execute(call, runnable, operationId), (outcome) => c.completeOperation(operationId, outcome))
  return records.length > 0 ? Effect.zipRight(ctx.commit(records), run) : run
}

/** After an approval answer (or its expiry): run the body, or refuse it. */
const approved = (c: Core, call: Model.ToolCall, spec: ToolSpec, operationId: OperationId, answer: unknown) => {
  if (ApprovalTimeout.isExpired(answer)) return c.refuse(operationId, ApprovalTimeout.expiredOutcome, [])
  const decision = decodeApproval(answer)
  if (decision.decision === "deny") {
    return c.refuse(operationId, errorOutcome(`denied by the user${decision.reason ? `: ${decision.reason}` : ""}`), [])
  }
  return body(c, call, spec, operationId, [])
}

/** A call started before a crash and has no receipt: pick up where it was. */
const resumeCall = (c: Core, call: Model.ToolCall, spec: ToolSpec | undefined, operationId: OperationId) =>
  Effect.gen(function*() {
    const { ctx, deps: { parked, pending } } = c
    const known = ctx.callbacks.filter((callback) => callback.operationId === operationId)
    const open = known.find((callback) => callback.status === "open")
    if (spec !== undefined && open !== undefined) {
      const answer = yield* parked(ctx.awaitCallback(open.callbackId))
      return open.kind === "approval"
        ? yield* approved(c, call, spec, operationId, answer)
        : yield* c.completeOperation(operationId, clientOutcome(answer))
    }
    const client = known.find((callback) => callback.kind === "client_tool" && callback.status === "answered")
    if (client !== undefined) return yield* c.completeOperation(operationId, clientOutcome(client.result))
    // Its approval expired before the crash: nothing ran.
    if (known.some((callback) => callback.kind === "approval" && callback.status === "expired")) {
      return yield* c.refuse(operationId, ApprovalTimeout.expiredOutcome, [])
    }
    const approval = known.find((callback) => callback.kind === "approval" && callback.status === "answered")
    if (approval !== undefined && decodeApproval(approval.result).decision === "deny") {
      return yield* approved(c, call, spec!, operationId, approval.result)
    }
    // The body may have run: only a tool that says so is run again.
    if (spec !== undefined && (spec.client || spec.idempotency === "supported")) {
      return yield* body(c, call, spec, operationId, [])
    }
    pending.add(new OperationUnknown({ operationId, turnId: ctx.turnId }, true))
    return unknownOutcome
  })

/** How a new call is let through: refused with an outcome, asked about, or run. */
type Gate = { readonly _tag: "refuse"; readonly outcome: ToolOutcome } | { readonly _tag: "ask" } | { readonly _tag: "run" }

const runs: Gate = { _tag: "run" }
const asks: Gate = { _tag: "ask" }

/**
 * Gates a new call: the permission layers first (a denial stands whatever the approval mode), then
 * approvals. Decided in place, unless the tool's own `needsApproval` is asked (an Effect).
 */
const gate = (c: Core, call: Model.ToolCall, spec: ToolSpec | undefined, operationId: OperationId): Gate | Effect.Effect<Gate> => {
  const { ctx: { approved: approvedForSession, plan }, deps: { toolkit } } = c
  if (spec === undefined) return { _tag: "refuse", outcome: errorOutcome(`unknown tool: ${call.name}`) }
  const decision = plan.permission(call.name)
  if (decision.permission === "deny") return { _tag: "refuse", outcome: ToolPolicy.notAllowed(call.name, decision) }
  if (plan.approvalMode === "never" || approvedForSession(call.name)) return runs
  if (decision.permission === "ask") return asks
  const needsApproval = spec.client ? undefined : toolkit.get(call.name)?.needsApproval
  if (needsApproval === undefined) return runs
  return Effect.map(needsApproval(call.arguments, c.contextOf(call, operationId)), (needed) => (needed ? asks : runs))
}

/** A call of this reply: one with a receipt is picked up from it, a new one is gated now. */
type Prepared =
  | { readonly _tag: "known"; readonly run: Effect.Effect<ToolOutcome> }
  | New

interface New {
  readonly _tag: "new"
  readonly call: Model.ToolCall
  readonly spec: ToolSpec | undefined
  readonly operationId: OperationId
  readonly started: OperationStarted
  readonly gate: Gate
}

const prepare = (c: Core, call: Model.ToolCall, requestedBy: OperationId): Effect.Effect<Prepared> => {
  const receipt = c.toolReceipts.get(`${requestedBy}/${call.id}`)
  const spec = c.ctx.plan.tool(call.name)
  if (receipt !== undefined) {
    if (receipt.status === "completed") {
      return Effect.succeed({ _tag: "known", run: Effect.succeed({ output: receipt.output, isError: receipt.isError }) })
    }
    if (receipt.status === "unknown") return Effect.succeed({ _tag: "known", run: Effect.succeed(unknownOutcome) })
    return Effect.succeed({ _tag: "known", run: resumeCall(c, call, spec, receipt.operationId) })
  }
  return Effect.flatMap(makeOperationId, (operationId) => {
    const started = Trusted.make(OperationStarted, {
      operationId,
      turnId: c.ctx.turnId,
      kind: "tool",
      name: call.name,
      input: { callId: call.id, arguments: call.arguments, requestedBy }
    })
    const gated = gate(c, call, spec, operationId)
    const prepared = (gate: Gate): Prepared => ({ _tag: "new", call, spec, operationId, started, gate })
    return Effect.isEffect(gated) ? Effect.map(gated, prepared) : Effect.succeed(prepared(gated))
  })
}

/** Carries out one prepared call on its own. */
const perform = (c: Core, prepared: Prepared): Effect.Effect<ToolOutcome> => {
  if (prepared._tag === "known") return prepared.run
  const { call, gate, operationId, spec, started } = prepared
  if (gate._tag === "refuse" || spec === undefined) {
    return c.refuse(operationId, gate._tag === "refuse" ? gate.outcome : errorOutcome(`unknown tool: ${call.name}`), [started])
  }
  if (gate._tag === "run") return body(c, call, spec, operationId, [started])
  return Effect.gen(function*() {
    const request = new ApprovalRequest({ toolName: call.name, callId: call.id, arguments: call.arguments }, true)
    const timeout = c.ctx.plan.approvalTimeoutMs
    const expiresAt = timeout === undefined ? undefined : (yield* Clock.currentTimeMillis) + timeout
    const records = [...c.deps.pending.take(), started]
    const answer = yield* c.deps.parked(c.ctx.openCallback(operationId, request, records, expiresAt))
    return yield* approved(c, call, spec, operationId, answer)
  })
}

/** The server tool a new, allowed call of a `parallel` tool runs, if it may run beside others. */
const parallelRunnable = (c: Core, prepared: Prepared): Runnable | undefined =>
  prepared._tag === "new" && prepared.gate._tag === "run" && prepared.spec?.parallel === true && !prepared.spec.client
    ? c.deps.toolkit.get(prepared.call.name)
    : undefined

/**
 * Runs calls at once, at most `maxParallelTools` at a time: their starts are
 * durable in one commit before any body runs, and their receipts are
 * committed in the model's order, each as soon as it and every call before
 * it are done (a crash loses at most the receipts still waiting for an
 * earlier call: those calls are then picked up as started without one).
 */
const runTogether = (c: Core, group: ReadonlyArray<{ readonly prepared: New; readonly runnable: Runnable }>) =>
  Effect.gen(function*() {
    const { ctx, deps: { pending } } = c
    yield* ctx.commit([...pending.take(), ...group.map(({ prepared }) => prepared.started)])
    const outcomes: Array<ToolOutcome | undefined> = group.map(() => undefined)
    let recorded = 0
    const lock = yield* Effect.makeSemaphore(1)
    const flush = lock.withPermits(1)(Effect.suspend(() => {
      const ready: Array<RecordBody> = []
      while (recorded < group.length && outcomes[recorded] !== undefined) {
        ready.push(c.completed(group[recorded]!.prepared.operationId, outcomes[recorded]!))
        recorded++
      }
      return ready.length === 0 ? Effect.void : ctx.commit([...pending.take(), ...ready])
    }))
    yield* Effect.forEach(group, ({ prepared, runnable }, index) =>
      c.execute(prepared.call, runnable, prepared.operationId).pipe(
        Effect.flatMap((outcome) => {
          outcomes[index] = outcome
          return flush
        })
      ), { concurrency: ctx.plan.maxParallelTools, discard: true })
    return outcomes as ReadonlyArray<ToolOutcome>
  })

/**
 * Runs the calls of one reply in the model's order; consecutive new calls of
 * `parallel` tools that are allowed without asking run at once. Each call is
 * gated when its turn comes (an approval given for the session by an earlier
 * call counts). Returns the outcomes in the model's order.
 */
const runCalls = (c: Core, calls: ReadonlyArray<Model.ToolCall>, requestedBy: OperationId) =>
  Effect.gen(function*() {
    const outcomes: Array<ToolOutcome> = []
    let next = 0
    while (next < calls.length) {
      const prepared = yield* prepare(c, calls[next]!, requestedBy)
      next++
      const runnable = parallelRunnable(c, prepared)
      if (runnable === undefined) {
        outcomes.push(yield* perform(c, prepared))
        continue
      }
      const group = [{ prepared: prepared as New, runnable }]
      let after: Prepared | undefined
      while (next < calls.length && c.ctx.plan.tool(calls[next]!.name)?.parallel === true) {
        const more = yield* prepare(c, calls[next]!, requestedBy)
        next++
        const also = parallelRunnable(c, more)
        if (also === undefined) {
          after = more
          break
        }
        group.push({ prepared: more as New, runnable: also })
      }
      if (group.length === 1) outcomes.push(yield* perform(c, prepared))
      else outcomes.push(...yield* runTogether(c, group))
      if (after !== undefined) outcomes.push(yield* perform(c, after))
    }
    return outcomes
  })

/** The tool calls of a turn (`make`). */
export type ToolCalls = ReturnType<typeof make>

/**
 * The tool calls of the turn `ctx`: `runCalls` runs (or reuses) the calls the
 * model asked for in the reply `requestedBy`, `runCall` one of them.
 */
export const make = (ctx: TurnContext, deps: Deps) => {
  const c = makeCore(ctx, deps)
  return {
    runCall: (call: Model.ToolCall, requestedBy: OperationId) => Effect.flatMap(prepare(c, call, requestedBy), (p) => perform(c, p)),
    runCalls: (calls: ReadonlyArray<Model.ToolCall>, requestedBy: OperationId) => runCalls(c, calls, requestedBy)
  }
}

/** The answer of a turn that a successful call of a `terminal` tool ends: the first such call's output (text, or JSON text). */
export const terminalOutput = (
  plan: TurnContext["plan"],
  calls: ReadonlyArray<Model.ToolCall>,
  outcomes: ReadonlyArray<ToolOutcome>
): string | undefined => {
  for (let i = 0; i < calls.length; i++) {
    const outcome = outcomes[i]
    if (outcome === undefined || outcome.isError || plan.tool(calls[i]!.name)?.terminal !== true) continue
    return typeof outcome.output === "string" ? outcome.output : JSON.stringify(outcome.output)
  }
  return undefined
}
