/**
 * The agent loop of one turn: call the model, record its reply as a receipt,
 * run the tools it asked for (each an operation), and repeat until the turn
 * ends explicitly: the `finish` tool, or the agent's `noToolPolicy` on a reply
 * without tool calls. `maxCycles` bounds the model calls, budgets bound usage,
 * the permission policy guards each tool call, and client tools and approvals
 * park the turn on a callback. Guardrails check the message before the first
 * model call and the final output before the turn completes; a handoff moves
 * the rest of the turn to another agent (`Handoffs`); an agent with an output
 * schema has its final output checked, and sent back when it does not match
 * (`StructuredOutput`).
 *
 * Before each model call it makes, the context is compacted when the request
 * would be over its threshold (`Compactor`).
 *
 * Everything a turn needs from its actor comes in `TurnContext` (its own module).
 *
 * Crash safety: a model call is recorded once it returns (a call cut off by a
 * crash had no side effects, so it is made again); a tool call is recorded as
 * started before its body runs and completed right after. On resume, receipts
 * are reused in order, callbacks still open are waited for again, and a tool
 * started without a receipt runs again only if it declares idempotency
 * `supported`: otherwise its outcome is recorded as unknown and the model is
 * told so.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import type { Agent } from "../schema/Agent.js"
import type { ModelError } from "../schema/Errors.js"
import { AssistantDelta } from "../schema/Event.js"
import { makeOperationId, type OperationId } from "../schema/Ids.js"
import type { OperationReceipt } from "../schema/Operation.js"
import { OperationCompleted, OperationStarted, OutputRejected, TurnEnded } from "../schema/Record.js"
import * as Trusted from "../schema/Trusted.js"
import { CostMeter } from "../services/CostMeter.js"
import { Guardrails } from "../services/Guardrails.js"
import * as Model from "../services/Model.js"
import * as Telemetry from "../services/Telemetry.js"
import type { ToolOutcome } from "../services/Tool.js"
import { Toolkit } from "../services/Toolkit.js"
import * as GuardrailChecks from "./GuardrailChecks.js"
import * as Handoffs from "./Handoffs.js"
import * as StructuredOutput from "./StructuredOutput.js"
import * as TurnMeter from "./TurnMeter.js"
import * as Compaction from "./Compaction.js"
import * as Compactor from "./Compactor.js"
import * as ToolCalls from "./ToolCalls.js"
import { makePending, type Pending, type Prompt, type TurnContext } from "./TurnContext.js"
import { FINISH, type TurnPlan } from "./TurnPlan.js"

const finishArgs = (argumentsText: string): { readonly output?: unknown } | undefined => {
  try {
    const args = JSON.parse(argumentsText)
    return typeof args === "object" && args !== null ? args : undefined
  } catch {
    return undefined
  }
}

const finishOutput = (argumentsText: string): string | undefined => {
  const output = finishArgs(argumentsText)?.output
  return typeof output === "string" ? output : undefined
}

/** The final output of `agent` from a reply's text or its `finish` call: its text, or the problems found. */
const finalOutput = (agent: Agent, text: string, finish: Model.ToolCall | undefined): Either.Either<string, string> => {
  if (agent.output === undefined) return Either.right(finish === undefined ? text : finishOutput(finish.arguments) ?? text)
  if (finish === undefined) return StructuredOutput.checkText(agent.output, text)
  const args = finishArgs(finish.arguments)
  return args === undefined || !("output" in args)
    ? Either.left("the finish call has no output")
    : StructuredOutput.checkValue(agent.output, args.output)
}

/** The agent in charge of a turn and its plan: a handoff changes both. */
interface InCharge {
  agent: Agent
  plan: TurnPlan
}

/**
 * What the cycles of one turn share: its context and services, the agent in charge, its tool calls
 * (made again for the plan of an agent it is handed to), and its parts. One object passed along,
 * so that each step of a cycle is a small function of it rather than a closure in one big body.
 */
interface Turn {
  readonly ctx: TurnContext
  readonly model: Model.Model["Type"]
  readonly costs: CostMeter["Type"]
  /** The actor's clock read in place: the meter is checked around every operation. */
  readonly now: () => number
  readonly pending: Pending
  /** Runs an effect as parked time: it does not count as active. */
  readonly parked: <A>(effect: Effect.Effect<A>) => Effect.Effect<A>
  readonly spanIds: ToolCalls.Deps["spanIds"]
  /** The model calls this turn made before a crash, in order: the cycles reuse their replies. */
  readonly reusable: ReadonlyArray<OperationReceipt>
  readonly handoffs: ReturnType<typeof Handoffs.make>
  readonly compactor: Compactor.Compactor
  readonly endings: Endings
  readonly charge: InCharge
  /** The tool calls of the turn under a plan (that of an agent it is handed to). */
  readonly toolsOf: (plan: TurnPlan) => ToolCalls.ToolCalls
  /** The tool calls of the plan in charge. */
  tools: ToolCalls.ToolCalls
  /** How many final outputs were sent back so far for not matching the output schema. */
  rejected: number
}

/**
 * Makes one model call of the turn (`modelRequest`); text deltas are published as they come.
 */
const callModel = (t: Turn, operationId: OperationId): Effect.Effect<Either.Either<Model.Reply, ModelError>> => {
  const { ctx, model } = t
  const request = modelRequest(t, operationId)
  const replying = replyGatherer(ctx)
  return ctx.beforeOperation(
    model.whole !== undefined
      ? Effect.flatMap(model.whole(request), replying.fold)
      // Chunk by chunk: a Stream step costs far more than folding a chunk in place.
      : Stream.runForEachChunk(model.stream(request), replying.fold)
  ).pipe(
    // One step for both sides (`map` then `either` took four).
    Effect.match({ onFailure: Either.left, onSuccess: () => Either.right(replying.reply()) }),
    Telemetry.withOperationSpan("model", { ...t.spanIds, operationId }, { "troupe.model": request.model })
  )
}

/**
 * The request of a model call made now; its start goes into `pending` with what it takes (the
 * messages and the waiting steers it is sent), so a fold of the log gives the conversation it saw.
 */
const modelRequest = (t: Turn, operationId: OperationId): Model.Request => {
  const { ctx } = t
  const { agent, plan } = t.charge
  const prompt = ctx.prompt(t.pending.peek())
  const tools = Compaction.offered(plan.tools, plan.compaction, prompt.archived)
  t.pending.add(modelCallStarted(ctx, agent, operationId, prompt, tools.length))
  return Model.withHistory({
    model: agent.model.name,
    instructions: agent.instructions,
    tools,
    settings: plan.settings,
    sessionId: ctx.sessionId,
    turnId: ctx.turnId,
    agentName: agent.name,
    // The reply's text is the output only when a reply without tool calls ends the turn.
    ...(agent.output !== undefined && plan.noToolPolicy === "finish" ? { output: agent.output } : {})
  }, prompt.messages)
}

/** The start of a model call, with what it takes: the messages, tools, steers and child results it is sent. */
const modelCallStarted = (ctx: TurnContext, agent: Agent, operationId: OperationId, prompt: Prompt, tools: number) =>
  Trusted.make(OperationStarted, {
    operationId,
    turnId: ctx.turnId,
    kind: "model",
    name: agent.model.name,
    input: { messages: prompt.messages.length + prompt.messages.rest.length, tools, steers: prompt.steers, results: prompt.results }
  })

/** Gathers a model call's reply from its events (`fold`, which publishes the text deltas as they come). */
const replyGatherer = (ctx: TurnContext) => {
  let reply = Model.emptyReply
  const fold = (events: Iterable<Model.Event>) => {
    const deltas: Array<AssistantDelta> = []
    for (const event of events) {
      reply = Model.gather(reply, event)
      if (event._tag === "TextDelta") deltas.push(Trusted.make(AssistantDelta, { sessionId: ctx.sessionId, turnId: ctx.turnId, text: event.text }))
    }
    return deltas.length === 0 ? Effect.void : ctx.publish(deltas)
  }
  return { fold, reply: () => reply }
}

/** The endings of a turn (`endings`). */
type Endings = ReturnType<typeof endings>

/**
 * How a turn ends: each ending commits the pending records with its
 * `turn_ended`; `complete` first runs the output guardrails of the agent that
 * gives the output, and `guard` runs an agent's guardrails of one stage
 * (their records go to `pending`), returning the block if any.
 */
const endings = (
  ctx: TurnContext,
  pending: Pending,
  guardrails: Guardrails["Type"],
  now: () => number
) => {
  const { meter, turnId } = ctx
  const end = (fields: Omit<ConstructorParameters<typeof TurnEnded>[0], "turnId" | "usage">) =>
    Effect.suspend(() => ctx.commit([...pending.take(), Trusted.make(TurnEnded, { ...fields, turnId, usage: meter.usage(now()) })]))
  const blocked = (block: GuardrailChecks.Blocked) =>
    end({ outcome: "failed", failureCode: "guardrail_blocked", failure: { _tag: "GuardrailBlocked", ...block } })
  const exhausted = (exhaustion: TurnMeter.Exhaustion) =>
    end({ outcome: "failed", failureCode: "budget_exhausted", failure: { _tag: "BudgetExhausted", ...exhaustion } })
  /** Runs the agent's guardrails of `stage`; called only when it has some (an agent without any skips the check). */
  const guard = (agent: Agent, stage: "input" | "output", text: string) => {
    const names = stage === "input" ? agent.inputGuardrails : agent.outputGuardrails
    const checking = GuardrailChecks.check(guardrails, names, { stage, text, sessionId: ctx.sessionId, turnId, agentName: agent.name })
    // A guardrail may be a model call of its own: an operation like the others.
    return ctx.beforeOperation(checking).pipe(Effect.map((checked) => {
      pending.add(...checked.records)
      return checked.blocked
    }))
  }
  const complete = (agent: Agent, output: string) =>
    // No output guardrails (most agents): straight to the end, no empty check run and mapped.
    agent.outputGuardrails.length === 0
      ? end({ outcome: "completed", output, publicFinalMessage: output })
      : Effect.flatMap(guard(agent, "output", output), (block) =>
        block !== undefined ? blocked(block) : end({ outcome: "completed", output, publicFinalMessage: output }))
  return { blocked, complete, end, exhausted, guard }
}

/** What a cycle's step gives: another cycle, or (anything else: the turn ended) none. */
const AGAIN = "again" as const
type Next = typeof AGAIN | void
const again: Effect.Effect<Next> = Effect.succeed(AGAIN)

/** Runs `effect` as parked time of `meter`: it does not count as active. */
const parkedOn = (meter: TurnMeter.TurnMeter) => <A>(effect: Effect.Effect<A>) =>
  Effect.flatMap(Clock.currentTimeMillis, (from) =>
    // Also when interrupted while parked: the interrupted turn reports its usage too.
    Effect.ensuring(
      effect,
      Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => meter.addParked(now - from)))
    ))

/** The services a turn reads from its fiber's context. */
type Services = Model.Model | Toolkit | CostMeter | Guardrails

/** Runs one turn to its end, resuming from the receipts and callbacks it is given. */
export const run = (ctx: TurnContext) =>
  // The services read from the context in place: one Effect step rather than one (and its continuation) per tag.
  Effect.withFiberRuntime<void, never, Services | Compactor.Services>((fiber) => {
    const services = fiber.currentContext as Context.Context<Services | Compactor.Services>
    const model = Context.get(services, Model.Model)
    const clock = ctx.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const { meter, turnId } = ctx
    const charge: InCharge = { agent: ctx.agent, plan: ctx.plan }
    const spanIds = { sessionId: ctx.sessionId, turnId, epoch: ctx.epoch }
    const pending = makePending()
    const compactor = Compactor.make(ctx, { model, pending, meter, spanIds, inCharge: () => charge }, services)
    const toolkit = Context.get(services, Toolkit)
    const parked = parkedOn(meter)
    // The toolkit wrapped again for each agent in charge: its compaction settings say whether `read_artifact` is offered.
    const toolsOf = (plan: TurnPlan) =>
      ToolCalls.make(plan === ctx.plan ? ctx : { ...ctx, plan }, { toolkit: compactor.toolkit(toolkit), pending, parked, spanIds })
    const t: Turn = {
      ctx,
      model,
      costs: Context.get(services, CostMeter),
      now,
      pending,
      parked,
      spanIds,
      reusable: ctx.receipts.filter((r) => r.kind === "model" && r.status === "completed"),
      handoffs: Handoffs.make({ turnId, maxHandoffs: ctx.agent.maxHandoffs, receipts: ctx.receipts }),
      compactor,
      endings: endings(ctx, pending, Context.get(services, Guardrails), now),
      charge,
      toolsOf,
      tools: toolsOf(ctx.plan),
      rejected: 0
    }
    // A turn that made a model call passed its input guardrails (their records went out with that call's).
    if (t.reusable.length > 0 || charge.agent.inputGuardrails.length === 0) return cycles(t)
    return Effect.flatMap(t.endings.guard(charge.agent, "input", ctx.message), (block) =>
      block !== undefined ? t.endings.blocked(block) : cycles(t))
  })

/**
 * The turn's cycles, each a model call (or its receipt) and what its reply asks for, until one ends
 * the turn. Only the waiting is here, at as few yields as it takes (each one costs the optimised
 * code a resume point); what each step decides is in plain functions of the turn.
 */
const cycles = (t: Turn) =>
  Effect.gen(function*() {
    for (let call = 0;; call++) {
      // Undefined: the turn makes a new model call.
      let next: Effect.Effect<Next> | Work | undefined = t.reusable[call] !== undefined ? reused(t, call) : refusedBeforeCall(t, call)
      if (next === undefined) {
        yield* t.compactor.beforeModelCall
        const operationId = yield* makeOperationId
        next = replied(t, call, operationId, yield* callModel(t, operationId), true)
      }
      if (!Effect.isEffect(next)) {
        next = afterTools(t, next, next.calls.length === 0 ? [] : yield* t.tools.runCalls(next.calls, next.requestedBy))
      }
      if ((yield* next) !== AGAIN) return
    }
  })

/** The reply of the turn's model call `call`, reused from its receipt. */
const reused = (t: Turn, call: number) => {
  const receipt = t.reusable[call]!
  return replied(t, call, receipt.operationId, Either.right(receipt.output as Model.Reply), false)
}

/** The end of a turn that may not make its next model call (out of cycles or of budget), if so. */
const refusedBeforeCall = (t: Turn, call: number): Effect.Effect<void> | undefined => {
  const { plan } = t.charge
  if (call >= plan.maxCycles) {
    return t.endings.end({ outcome: "failed", failureCode: "max_cycles", failure: { _tag: "MaxCycles", maxCycles: plan.maxCycles } })
  }
  const before = TurnMeter.checkBeforeModelCall(plan.budgets, t.ctx.meter, t.now())
  return before === undefined ? undefined : t.endings.exhausted(before)
}

/** The tool calls of a reply the turn runs before it goes on: those of the reply but its finish and its transfers. */
interface Work {
  /** The model call whose reply it is. */
  readonly requestedBy: OperationId
  readonly reply: Model.Reply
  readonly calls: ReadonlyArray<Model.ToolCall>
  readonly finish: Model.ToolCall | undefined
  readonly transfers: ReadonlyArray<Model.ToolCall>
  /** A later receipt proves the turn went on from this reply before a crash. */
  readonly wentOn: boolean
}

/**
 * Records a model call's outcome (`made`: not one reused from its receipt) and meters it; then
 * what its reply asks for: the turn's end, another cycle, or tool calls to run first.
 */
const replied = (
  t: Turn,
  call: number,
  operationId: OperationId,
  outcome: Either.Either<Model.Reply, ModelError>,
  made: boolean
): Effect.Effect<Next> | Work => {
  const { ctx, pending } = t
  const { agent, plan } = t.charge
  if (Either.isLeft(outcome)) {
    const error = outcome.left
    pending.add(Trusted.make(OperationCompleted, { operationId, turnId: ctx.turnId, output: { error: error.reason }, isError: true }))
    return t.endings.end({
      outcome: "failed",
      failureCode: "model_error",
      failure: { _tag: "ModelError", reason: error.reason, retryable: error.retryable }
    })
  }
  const reply = outcome.right
  if (made) pending.add(Trusted.make(OperationCompleted, { operationId, turnId: ctx.turnId, output: reply, isError: false }))
  ctx.meter.addModelCall(reply.inputTokens, reply.outputTokens, t.costs.cost(agent.model.name, reply.inputTokens, reply.outputTokens))
  const afterCall = TurnMeter.checkAfterResult(plan.budgets, ctx.meter, t.now())
  if (afterCall !== undefined) return t.endings.exhausted(afterCall)
  const wentOn = t.reusable[call + 1] !== undefined
  if (reply.toolCalls.length === 0) return withoutTools(t, call, operationId, reply, wentOn)
  const finish = plan.finishes ? reply.toolCalls.find((c) => c.name === FINISH) : undefined
  // Transfers are taken after the reply's other calls ran; with a finish, they are not taken at all.
  const transfers = reply.toolCalls.filter((c) => Handoffs.targetOf(agent, c) !== undefined)
  const calls = reply.toolCalls.filter((c) => c !== finish && !transfers.includes(c))
  if (calls.length > 0) {
    const batch = TurnMeter.checkBeforeToolBatch(plan.budgets, ctx.meter, calls.map((c) => c.name), t.now())
    if (batch !== undefined) return t.endings.exhausted(batch)
  }
  return { requestedBy: operationId, reply, calls, finish, transfers, wentOn }
}

/** What a reply without tool calls asks for, by the plan's `noToolPolicy`. */
const withoutTools = (t: Turn, call: number, operationId: OperationId, reply: Model.Reply, wentOn: boolean): Effect.Effect<Next> => {
  const { ctx, pending } = t
  const { plan } = t.charge
  // Steers that came meanwhile go to another model call, while there may be one.
  if (ctx.waitingSteers(pending.peek()) > 0 && (wentOn || call + 1 < plan.maxCycles)) return again
  switch (plan.noToolPolicy) {
    case "finish":
      return finalize(t, reply, operationId, wentOn, undefined)
    case "continue":
      return again
    case "wait_user": {
      const waiting: Effect.Effect<Next> = wentOn ? again : Effect.as(t.parked(ctx.awaitSteers), AGAIN)
      return pending.peek().length > 0 ? Effect.zipRight(ctx.commit(pending.take()), waiting) : waiting
    }
  }
}

/** After a reply's tool calls ran: its finish, a terminal tool's output, the budget, or its transfers. */
const afterTools = (t: Turn, work: Work, outcomes: ReadonlyArray<ToolOutcome>): Effect.Effect<Next> => {
  const { meter } = t.ctx
  const operationId = work.requestedBy
  const { plan } = t.charge
  for (const toolCall of work.calls) meter.addToolCall(toolCall.name)
  if (work.finish !== undefined) return finalize(t, work.reply, operationId, work.wentOn, work.finish)
  const terminal = ToolCalls.terminalOutput(plan, work.calls, outcomes)
  if (terminal !== undefined) return t.endings.complete(t.charge.agent, terminal)
  const afterTools = TurnMeter.checkAfterResult(plan.budgets, meter, t.now())
  if (afterTools !== undefined) return t.endings.exhausted(afterTools)
  return work.transfers.length > 0 ? handOff(t, work.transfers, operationId) : again
}

/** The final output, or (while retries are left) its problems sent back to the model. */
const finalize = (
  t: Turn,
  reply: Model.Reply,
  operationId: OperationId,
  wentOn: boolean,
  finish: Model.ToolCall | undefined
): Effect.Effect<Next> => {
  const { agent } = t.charge
  const final = finalOutput(agent, reply.text, finish)
  if (Either.isRight(final)) return t.endings.complete(agent, final.right)
  const spec = agent.output!
  if (t.rejected >= spec.maxRetries) {
    return t.endings.end({
      outcome: "failed",
      failureCode: "invalid_output",
      failure: { _tag: "InvalidOutput", problems: final.left, attempts: t.rejected + 1 }
    })
  }
  t.rejected++
  // Recorded before a crash when the turn went on: not twice.
  if (!wentOn) t.pending.add(new OutputRejected({ turnId: t.ctx.turnId, operationId, attempt: t.rejected, problems: final.left }, true))
  return again
}

/** Takes a reply's transfers: the turn goes on with the agent it is handed to, unless it has no handoff left. */
const handOff = (t: Turn, transfers: ReadonlyArray<Model.ToolCall>, operationId: OperationId): Effect.Effect<Next> =>
  Effect.flatMap(t.handoffs.take(t.charge.agent, transfers, operationId), (taken) => {
    if (taken._tag === "Exceeded") {
      return t.endings.end({
        outcome: "failed",
        failureCode: "max_handoffs",
        failure: { _tag: "MaxHandoffs", maxHandoffs: taken.maxHandoffs, agentName: t.charge.agent.name }
      })
    }
    const handedTo = () => {
      const plan = t.ctx.planFor(taken.agent)
      t.charge.agent = taken.agent
      t.charge.plan = plan
      t.tools = t.toolsOf(plan)
      return AGAIN
    }
    // Durable at once: whoever follows the session sees who answers from here on.
    return taken.records.length > 0 ? Effect.map(t.ctx.commit([...t.pending.take(), ...taken.records]), handedTo) : Effect.succeed(handedTo())
  })
