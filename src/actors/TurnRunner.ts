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
import { OperationCompleted, OperationStarted, OutputRejected, TurnEnded } from "../schema/Record.js"
import * as Trusted from "../schema/Trusted.js"
import { CostMeter } from "../services/CostMeter.js"
import { Guardrails } from "../services/Guardrails.js"
import * as Model from "../services/Model.js"
import * as Telemetry from "../services/Telemetry.js"
import { Toolkit } from "../services/Toolkit.js"
import * as GuardrailChecks from "./GuardrailChecks.js"
import * as Handoffs from "./Handoffs.js"
import * as StructuredOutput from "./StructuredOutput.js"
import * as TurnMeter from "./TurnMeter.js"
import * as Compaction from "./Compaction.js"
import * as Compactor from "./Compactor.js"
import * as ToolCalls from "./ToolCalls.js"
import { makePending, type Pending, type TurnContext } from "./TurnContext.js"
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

/**
 * Makes one model call of the turn: its start goes into `pending` with what it
 * took (the messages and the waiting steers it was sent), so a fold of the log
 * gives the conversation it saw; text deltas are published as they come.
 */
const callModel = (
  ctx: TurnContext,
  agent: Agent,
  plan: TurnPlan,
  model: Model.Model["Type"],
  pending: Pending,
  operationId: OperationId,
  spanIds: ToolCalls.Deps["spanIds"]
): Effect.Effect<Either.Either<Model.Reply, ModelError>> => {
  const { turnId } = ctx
  const prompt = ctx.prompt(pending.peek())
  const tools = Compaction.offered(plan.tools, plan.compaction, prompt.archived)
  pending.add(Trusted.make(OperationStarted, {
    operationId,
    turnId,
    kind: "model",
    name: agent.model.name,
    input: { messages: prompt.messages.length + prompt.messages.rest.length, tools: tools.length, steers: prompt.steers, results: prompt.results }
  }))
  const request = Model.withHistory({
    model: agent.model.name,
    instructions: agent.instructions,
    tools,
    settings: plan.settings,
    sessionId: ctx.sessionId,
    turnId,
    agentName: agent.name,
    // The reply's text is the output only when a reply without tool calls ends the turn.
    ...(agent.output !== undefined && plan.noToolPolicy === "finish" ? { output: agent.output } : {})
  }, prompt.messages)
  let reply = Model.emptyReply
  const fold = (events: Iterable<Model.Event>) => {
    const deltas: Array<AssistantDelta> = []
    for (const event of events) {
      reply = Model.gather(reply, event)
      if (event._tag === "TextDelta") deltas.push(Trusted.make(AssistantDelta, { sessionId: ctx.sessionId, turnId, text: event.text }))
    }
    return deltas.length === 0 ? Effect.void : ctx.publish(deltas)
  }
  return ctx.beforeOperation(
    model.whole !== undefined
      ? Effect.flatMap(model.whole(request), fold)
      // Chunk by chunk: a Stream step costs far more than folding a chunk in place.
      : Stream.runForEachChunk(model.stream(request), fold)
  ).pipe(
    // One step for both sides (`map` then `either` took four).
    Effect.match({ onFailure: Either.left, onSuccess: () => Either.right(reply) }),
    Telemetry.withOperationSpan("model", { ...spanIds, operationId }, { "troupe.model": request.model })
  )
}

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

/** Runs one turn to its end, resuming from the receipts and callbacks it is given. */
export const run = (ctx: TurnContext) =>
  Effect.gen(function*() {
    // The services read from the context at once: one Effect step rather than one (and its continuation) per tag.
    const services = yield* Effect.context<Model.Model | Toolkit | CostMeter | Guardrails>()
    const model = Context.get(services, Model.Model)
    const toolkit = Context.get(services, Toolkit)
    const costs = Context.get(services, CostMeter)
    const guardrails = Context.get(services, Guardrails)
    // Read in place rather than one Effect step per reading: the meter is checked around every operation.
    const clock = ctx.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const { meter, turnId } = ctx
    // The agent in charge, and its plan: a handoff changes both.
    let agent = ctx.agent
    let plan = ctx.plan
    const spanIds = { sessionId: ctx.sessionId, turnId, epoch: ctx.epoch }
    const reusable = ctx.receipts.filter((r) => r.kind === "model" && r.status === "completed")
    const pending = makePending()
    const handoffs = Handoffs.make({ turnId, maxHandoffs: ctx.agent.maxHandoffs, receipts: ctx.receipts })
    let rejected = 0

    const { blocked, complete, end, exhausted, guard } = endings(ctx, pending, guardrails, now)

    /** Runs `effect` as parked time: it does not count as active. */
    const parked = <A>(effect: Effect.Effect<A>) =>
      Effect.flatMap(Clock.currentTimeMillis, (from) =>
        // Also when interrupted while parked: the interrupted turn reports its usage too.
        Effect.ensuring(
          effect,
          Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => meter.addParked(now - from)))
        ))

    const compactor = yield* Compactor.make(ctx, { model, pending, meter, spanIds, inCharge: () => ({ agent, plan }) })
    const toolsOf = (plan: TurnPlan) =>
      ToolCalls.make(plan === ctx.plan ? ctx : { ...ctx, plan }, { toolkit: compactor.toolkit(toolkit), pending, parked, spanIds })
    let tools = toolsOf(plan)

    // A turn that made a model call passed its input guardrails (their records went out with that call's).
    if (reusable.length === 0 && agent.inputGuardrails.length > 0) {
      const block = yield* guard(agent, "input", ctx.message)
      if (block !== undefined) return yield* blocked(block)
    }

    for (let call = 0;; call++) {
      const previous = reusable[call]
      if (previous === undefined) {
        if (call >= plan.maxCycles) {
          return yield* end({ outcome: "failed", failureCode: "max_cycles", failure: { _tag: "MaxCycles", maxCycles: plan.maxCycles } })
        }
        const before = TurnMeter.checkBeforeModelCall(plan.budgets, meter, now())
        if (before !== undefined) return yield* exhausted(before)
      }
      if (previous === undefined) yield* compactor.beforeModelCall
      const operationId = previous !== undefined ? previous.operationId : yield* makeOperationId
      const outcome = previous !== undefined
        ? Either.right(previous.output as Model.Reply)
        : yield* callModel(ctx, agent, plan, model, pending, operationId, spanIds)
      if (Either.isLeft(outcome)) {
        const error = outcome.left
        pending.add(Trusted.make(OperationCompleted, { operationId, turnId, output: { error: error.reason }, isError: true }))
        return yield* end({
          outcome: "failed",
          failureCode: "model_error",
          failure: { _tag: "ModelError", reason: error.reason, retryable: error.retryable }
        })
      }
      const result = outcome.right
      if (previous === undefined) {
        pending.add(Trusted.make(OperationCompleted, { operationId, turnId, output: result, isError: false }))
      }
      const cost = costs.cost(agent.model.name, result.inputTokens, result.outputTokens)
      meter.addModelCall(result.inputTokens, result.outputTokens, cost)
      const afterCall = TurnMeter.checkAfterResult(plan.budgets, meter, now())
      if (afterCall !== undefined) return yield* exhausted(afterCall)
      // A later receipt proves the turn went on from here before a crash.
      const wentOn = reusable[call + 1] !== undefined

      /** The final output, or (while retries are left) its problems sent back to the model. */
      const finalize = (finish: Model.ToolCall | undefined): Effect.Effect<"again" | void> => {
        const final = finalOutput(agent, result.text, finish)
        if (Either.isRight(final)) return complete(agent, final.right)
        const spec = agent.output!
        if (rejected >= spec.maxRetries) {
          return end({
            outcome: "failed",
            failureCode: "invalid_output",
            failure: { _tag: "InvalidOutput", problems: final.left, attempts: rejected + 1 }
          })
        }
        rejected++
        // Recorded before a crash when the turn went on: not twice.
        if (!wentOn) pending.add(new OutputRejected({ turnId, operationId, attempt: rejected, problems: final.left }, true))
        return Effect.succeed("again" as const)
      }

      if (result.toolCalls.length === 0) {
        // Steers that came meanwhile go to another model call, while there may be one.
        if (ctx.waitingSteers(pending.peek()) > 0 && (wentOn || call + 1 < plan.maxCycles)) continue
        switch (plan.noToolPolicy) {
          case "finish": {
            if ((yield* finalize(undefined)) === "again") continue
            return
          }
          case "continue":
            continue
          case "wait_user": {
            if (pending.peek().length > 0) yield* ctx.commit(pending.take())
            if (!wentOn) yield* parked(ctx.awaitSteers)
            continue
          }
        }
      }

      const finish = plan.finishes ? result.toolCalls.find((c) => c.name === FINISH) : undefined
      // Transfers are taken after the reply's other calls ran; with a finish, they are not taken at all.
      const transfers = result.toolCalls.filter((c) => Handoffs.targetOf(agent, c) !== undefined)
      const work = result.toolCalls.filter((c) => c !== finish && !transfers.includes(c))
      if (work.length > 0) {
        const batch = TurnMeter.checkBeforeToolBatch(plan.budgets, meter, work.map((c) => c.name), now())
        if (batch !== undefined) return yield* exhausted(batch)
      }
      const outcomes = yield* tools.runCalls(work, operationId)
      for (const toolCall of work) meter.addToolCall(toolCall.name)
      if (finish !== undefined) {
        if ((yield* finalize(finish)) === "again") continue
        return
      }
      const terminal = ToolCalls.terminalOutput(plan, work, outcomes)
      if (terminal !== undefined) return yield* complete(agent, terminal)
      const afterTools = TurnMeter.checkAfterResult(plan.budgets, meter, now())
      if (afterTools !== undefined) return yield* exhausted(afterTools)
      if (transfers.length > 0) {
        const taken = yield* handoffs.take(agent, transfers, operationId)
        if (taken._tag === "Exceeded") {
          return yield* end({
            outcome: "failed",
            failureCode: "max_handoffs",
            failure: { _tag: "MaxHandoffs", maxHandoffs: taken.maxHandoffs, agentName: agent.name }
          })
        }
        // Durable at once: whoever follows the session sees who answers from here on.
        if (taken.records.length > 0) yield* ctx.commit([...pending.take(), ...taken.records])
        agent = taken.agent
        plan = ctx.planFor(agent)
        tools = toolsOf(plan)
      }
    }
  })
