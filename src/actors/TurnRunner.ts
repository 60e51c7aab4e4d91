/**
 * The agent loop of one turn: call the model, record its reply as a receipt,
 * run the tools it asked for (each an operation), and repeat until the turn
 * ends explicitly: the `finish` tool, or the agent's `noToolPolicy` on a reply
 * without tool calls. `maxCycles` bounds the model calls, budgets bound usage,
 * the permission policy guards each tool call, and client tools and approvals
 * park the turn on a callback.
 *
 * Everything a turn needs from its actor comes in `TurnContext`.
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
import { Clock, Effect, Either, Schema, Stream } from "effect"
import type { Agent, ToolSpec } from "../schema/Agent.js"
import {
  ApprovalAnswer,
  ApprovalRequest,
  type CallbackKind,
  type CallbackRequest,
  ClientToolAnswer,
  ClientToolRequest
} from "../schema/Callback.js"
import type { ModelError } from "../schema/Errors.js"
import { AssistantDelta } from "../schema/Event.js"
import { type CallbackId, makeOperationId, type OperationId, type SessionId, type TurnId } from "../schema/Ids.js"
import type { OperationReceipt } from "../schema/Operation.js"
import {
  OperationCompleted,
  OperationStarted,
  OperationUnknown,
  type RecordBody,
  TurnEnded
} from "../schema/Record.js"
import { CostMeter } from "../services/CostMeter.js"
import * as Model from "../services/Model.js"
import { errorOutcome, type ToolOutcome } from "../services/Tool.js"
import * as Telemetry from "../services/Telemetry.js"
import { Toolkit } from "../services/Toolkit.js"
import { unknownOutcome } from "./SessionState.js"
import * as TurnMeter from "./TurnMeter.js"
import { FINISH, type TurnPlan } from "./TurnPlan.js"

/** A callback of this turn found in the log when it resumes. */
export interface KnownCallback {
  readonly callbackId: CallbackId
  readonly operationId: OperationId
  readonly kind: CallbackKind
  readonly status: "open" | "answered" | "cancelled" | "expired"
  readonly result?: unknown
}

/** A model request's conversation, and how many waiting steers it takes. */
export interface Prompt {
  readonly messages: ReadonlyArray<Model.Message>
  readonly steers: number
}

/** What a turn is given by the actor that runs it. */
export interface TurnContext {
  readonly sessionId: SessionId
  readonly turnId: TurnId
  /** The epoch of the lease the turn runs under (for spans). */
  readonly epoch: number
  readonly agent: Agent
  readonly plan: TurnPlan
  /**
   * The conversation a model call made now is given: the session's transcript
   * (every earlier turn's steps, and this turn's so far) with `pending`
   * records folded on, then every steer waiting for the turn.
   */
  readonly prompt: (pending: ReadonlyArray<RecordBody>) => Prompt
  /** How many steers wait for the turn's next model call, once `pending` records took theirs. */
  readonly waitingSteers: (pending: ReadonlyArray<RecordBody>) => number
  /** Receipts of operations this turn recorded before a crash. */
  readonly receipts: ReadonlyArray<OperationReceipt>
  /** Callbacks this turn opened before a crash. */
  readonly callbacks: ReadonlyArray<KnownCallback>
  /** The turn's usage, shared with the actor (which reports it when it interrupts the turn). */
  readonly meter: TurnMeter.TurnMeter
  /** True for a tool approved "for the session": it is not asked about again. */
  readonly approved: (toolName: string) => boolean
  /** Appends records to the session log (fenced by the actor's lease). */
  readonly commit: (records: ReadonlyArray<RecordBody>) => Effect.Effect<void>
  /** Broadcasts volatile events. */
  readonly publish: (deltas: ReadonlyArray<AssistantDelta>) => Effect.Effect<void>
  /** Parks until the user says something (`wait_user`): a steer waits for the turn. */
  readonly awaitSteers: Effect.Effect<void>
  /**
   * Commits `records` with a new `callback_opened` for `operationId`, offers it
   * to providers, and parks until it is answered; returns the answer.
   */
  readonly openCallback: (
    operationId: OperationId,
    request: CallbackRequest,
    records: ReadonlyArray<RecordBody>
  ) => Effect.Effect<unknown>
  /** Parks on a callback opened before a crash until it is answered. */
  readonly awaitCallback: (callbackId: CallbackId) => Effect.Effect<unknown>
}

export { unknownOutcome }

// Answers were checked against these schemas when admitted; a stored one that no longer decodes is refused, not a crash.
const decodeApproval = (answer: unknown): ApprovalAnswer =>
  Either.getOrElse(
    Schema.decodeUnknownEither(ApprovalAnswer)(answer),
    () => new ApprovalAnswer({ decision: "deny", reason: "the approval answer was unreadable" })
  )
const decodeClientTool = Schema.decodeUnknownEither(ClientToolAnswer)

const finishOutput = (argumentsText: string): string | undefined => {
  try {
    const args = JSON.parse(argumentsText)
    return typeof args?.output === "string" ? args.output : undefined
  } catch {
    return undefined
  }
}

/** Runs one turn to its end, resuming from the receipts and callbacks it is given. */
export const run = (ctx: TurnContext) =>
  Effect.gen(function*() {
    const model = yield* Model.Model
    const toolkit = yield* Toolkit
    const costs = yield* CostMeter
    // Read in place rather than one Effect step per reading: the meter is checked around every operation.
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const { agent, meter, plan, turnId } = ctx
    const spanIds = { sessionId: ctx.sessionId, turnId, epoch: ctx.epoch }
    const budgets = plan.budgets
    const reusable = ctx.receipts.filter((r) => r.kind === "model" && r.status === "completed")
    // Model call ids are only unique within one reply, so a tool call is known by the reply that asked for it.
    const toolReceipts = new Map<string, OperationReceipt>()
    for (const receipt of ctx.receipts) {
      const input = receipt.input as OperationStarted["input"]
      if (receipt.kind === "tool" && "callId" in input) toolReceipts.set(`${input.requestedBy}/${input.callId}`, receipt)
    }
    const callbacksOf = (operationId: OperationId) => ctx.callbacks.filter((c) => c.operationId === operationId)
    // Records of steps without side effects (a model reply, a refused call) ride along with the next commit.
    let pending: Array<RecordBody> = []
    const take = () => {
      const records = pending
      pending = []
      return records
    }

    const end = (fields: Omit<ConstructorParameters<typeof TurnEnded>[0], "turnId" | "usage">) =>
      Effect.gen(function*() {
        const usage = meter.usage(now())
        yield* ctx.commit([...take(), new TurnEnded({ ...fields, turnId, usage }, true)])
      })
    const complete = (output: string) => end({ outcome: "completed", output, publicFinalMessage: output })
    const exhausted = (exhaustion: TurnMeter.Exhaustion) =>
      end({ outcome: "failed", failureCode: "budget_exhausted", failure: { _tag: "BudgetExhausted", ...exhaustion } })

    /** Runs `effect` as parked time: it does not count as active. */
    const parked = <A>(effect: Effect.Effect<A>) =>
      Effect.flatMap(Clock.currentTimeMillis, (from) =>
        // Also when interrupted while parked: the interrupted turn reports its usage too.
        Effect.ensuring(
          effect,
          Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => meter.addParked(now - from)))
        ))

    const completed = (operationId: OperationId, outcome: ToolOutcome) =>
      new OperationCompleted({ operationId, turnId, output: outcome.output, isError: outcome.isError }, true)

    /** Records a tool call's outcome now: once a body ran, its receipt must be durable before anything else. */
    const completeOperation = (operationId: OperationId, outcome: ToolOutcome) =>
      Effect.as(ctx.commit([...take(), completed(operationId, outcome)]), outcome)

    /** Refuses a call without running anything: the records wait for the next commit. */
    const refuse = (operationId: OperationId, outcome: ToolOutcome, before: ReadonlyArray<RecordBody>) =>
      Effect.sync(() => {
        pending.push(...before, completed(operationId, outcome))
        return outcome
      })

    const clientOutcome = (answer: unknown): ToolOutcome =>
      Either.match(decodeClientTool(answer), {
        onLeft: () => errorOutcome("the client's result was unreadable"),
        onRight: (decoded) => ({ output: decoded.output, isError: decoded.isError })
      })

    /** The body of an allowed call: on the client through a callback, or here through the toolkit. */
    const body = (call: Model.ToolCall, spec: ToolSpec, operationId: OperationId, before: ReadonlyArray<RecordBody>) =>
      Effect.gen(function*() {
        if (spec.client) {
          const request = new ClientToolRequest({ toolName: call.name, callId: call.id, arguments: call.arguments }, true)
          const answer = yield* parked(ctx.openCallback(operationId, request, [...take(), ...before]))
          return yield* completeOperation(operationId, clientOutcome(answer))
        }
        const runnable = toolkit.get(call.name)
        if (runnable === undefined) {
          return yield* refuse(operationId, errorOutcome(`no handler for the tool ${call.name} on this host`), before)
        }
        // Started is durable before the body runs: a crash from here on leaves the call's outcome unknown.
        const records = [...take(), ...before]
        if (records.length > 0) yield* ctx.commit(records)
        const outcome = yield* runnable.run(call.arguments).pipe(
          Effect.catchAllDefect(() => Effect.succeed(errorOutcome(`the tool ${call.name} crashed`))),
          Telemetry.withOperationSpan("tool", { ...spanIds, operationId }, { "troupe.tool": call.name })
        )
        return yield* completeOperation(operationId, outcome)
      })

    /** After an approval answer: run the body, or refuse it. */
    const approved = (call: Model.ToolCall, spec: ToolSpec, operationId: OperationId, answer: unknown) => {
      const decision = decodeApproval(answer)
      if (decision.decision === "deny") {
        return refuse(
          operationId,
          errorOutcome(`denied by the user${decision.reason ? `: ${decision.reason}` : ""}`),
          []
        )
      }
      return body(call, spec, operationId, [])
    }

    /** A call started before a crash and has no receipt: pick up where it was. */
    const resumeCall = (call: Model.ToolCall, spec: ToolSpec | undefined, operationId: OperationId) =>
      Effect.gen(function*() {
        const known = callbacksOf(operationId)
        const open = known.find((c) => c.status === "open")
        if (spec !== undefined && open !== undefined) {
          const answer = yield* parked(ctx.awaitCallback(open.callbackId))
          return open.kind === "approval"
            ? yield* approved(call, spec, operationId, answer)
            : yield* completeOperation(operationId, clientOutcome(answer))
        }
        const client = known.find((c) => c.kind === "client_tool" && c.status === "answered")
        if (client !== undefined) return yield* completeOperation(operationId, clientOutcome(client.result))
        const approval = known.find((c) => c.kind === "approval" && c.status === "answered")
        if (approval !== undefined && decodeApproval(approval.result).decision === "deny") {
          return yield* approved(call, spec!, operationId, approval.result)
        }
        // The body may have run: only a tool that says so is run again.
        if (spec !== undefined && (spec.client || spec.idempotency === "supported")) {
          return yield* body(call, spec, operationId, [])
        }
        pending.push(new OperationUnknown({ operationId, turnId }, true))
        return unknownOutcome
      })

    const runCall = (call: Model.ToolCall, requestedBy: OperationId) =>
      Effect.gen(function*() {
        const receipt = toolReceipts.get(`${requestedBy}/${call.id}`)
        if (receipt !== undefined && receipt.status === "completed") {
          return { output: receipt.output, isError: receipt.isError } satisfies ToolOutcome
        }
        if (receipt !== undefined && receipt.status === "unknown") return unknownOutcome
        const spec = plan.tool(call.name)
        if (receipt !== undefined) return yield* resumeCall(call, spec, receipt.operationId)
        const operationId = yield* makeOperationId
        const started = new OperationStarted({
          operationId,
          turnId,
          kind: "tool",
          name: call.name,
          input: { callId: call.id, arguments: call.arguments, requestedBy }
        }, true)
        if (spec === undefined) return yield* refuse(operationId, errorOutcome(`unknown tool: ${call.name}`), [started])
        const permission = plan.permission(call.name)
        if (permission === "deny") {
          return yield* refuse(operationId, errorOutcome("denied by permission policy"), [started])
        }
        if (permission === "ask" && !ctx.approved(call.name)) {
          const request = new ApprovalRequest({ toolName: call.name, callId: call.id, arguments: call.arguments }, true)
          const answer = yield* parked(ctx.openCallback(operationId, request, [...take(), started]))
          return yield* approved(call, spec, operationId, answer)
        }
        return yield* body(call, spec, operationId, [started])
      })

    for (let call = 0;; call++) {
      const previous = reusable[call]
      if (previous === undefined) {
        if (call >= agent.maxCycles) {
          return yield* end({ outcome: "failed", failureCode: "max_cycles", failure: { _tag: "MaxCycles", maxCycles: agent.maxCycles } })
        }
        const before = TurnMeter.checkBeforeModelCall(budgets, meter, now())
        if (before !== undefined) return yield* exhausted(before)
      }
      const operationId = previous !== undefined ? previous.operationId : yield* makeOperationId
      let reply = Model.emptyReply
      const fold = (events: Iterable<Model.Event>) => {
        const deltas: Array<AssistantDelta> = []
        for (const event of events) {
          reply = Model.gather(reply, event)
          if (event._tag === "TextDelta") {
            deltas.push(new AssistantDelta({ sessionId: ctx.sessionId, turnId, text: event.text }, true))
          }
        }
        return deltas.length === 0 ? Effect.void : ctx.publish(deltas)
      }
      let outcome: Either.Either<Model.Reply, ModelError>
      if (previous !== undefined) {
        outcome = Either.right(previous.output as Model.Reply)
      } else {
        // The call's start is recorded with what it took, so a fold of the log gives the conversation it was sent.
        const prompt = ctx.prompt(pending)
        pending.push(new OperationStarted({
          operationId,
          turnId,
          kind: "model",
          name: agent.model.name,
          input: { messages: prompt.messages.length, tools: plan.tools.length, steers: prompt.steers }
        }, true))
        const request: Model.Request = {
          model: agent.model.name,
          instructions: agent.instructions,
          messages: prompt.messages,
          tools: plan.tools,
          settings: plan.settings,
          sessionId: ctx.sessionId,
          turnId,
          agentName: agent.name
        }
        outcome = yield* (model.whole !== undefined
          ? Effect.flatMap(model.whole(request), fold)
          // Chunk by chunk: a Stream step costs far more than folding a chunk in place.
          : Stream.runForEachChunk(model.stream(request), fold)).pipe(
          Effect.map(() => reply),
          Effect.either,
          Telemetry.withOperationSpan("model", { ...spanIds, operationId }, { "troupe.model": request.model })
        )
      }
      if (Either.isLeft(outcome)) {
        const error = outcome.left
        pending.push(new OperationCompleted({ operationId, turnId, output: { error: error.reason }, isError: true }, true))
        return yield* end({
          outcome: "failed",
          failureCode: "model_error",
          failure: { _tag: "ModelError", reason: error.reason, retryable: error.retryable }
        })
      }
      const result = outcome.right
      if (previous === undefined) {
        pending.push(new OperationCompleted({ operationId, turnId, output: result, isError: false }, true))
      }
      const cost = costs.cost(agent.model.name, result.inputTokens, result.outputTokens)
      meter.addModelCall(result.inputTokens, result.outputTokens, cost)
      const afterCall = TurnMeter.checkAfterResult(budgets, meter, now())
      if (afterCall !== undefined) return yield* exhausted(afterCall)
      // A later receipt proves the turn went on from here before a crash.
      const wentOn = reusable[call + 1] !== undefined

      if (result.toolCalls.length === 0) {
        // Steers that came meanwhile go to another model call, while there may be one.
        if (ctx.waitingSteers(pending) > 0 && (wentOn || call + 1 < agent.maxCycles)) continue
        switch (agent.noToolPolicy) {
          case "finish":
            return yield* complete(result.text)
          case "continue":
            continue
          case "wait_user": {
            if (pending.length > 0) yield* ctx.commit(take())
            if (!wentOn) yield* parked(ctx.awaitSteers)
            continue
          }
        }
      }

      const finish = plan.finishes ? result.toolCalls.find((c) => c.name === FINISH) : undefined
      const work = result.toolCalls.filter((c) => c !== finish)
      if (work.length > 0) {
        const batch = TurnMeter.checkBeforeToolBatch(budgets, meter, work.map((c) => c.name), now())
        if (batch !== undefined) return yield* exhausted(batch)
      }
      for (const toolCall of work) {
        yield* runCall(toolCall, operationId)
        meter.addToolCall(toolCall.name)
      }
      if (finish !== undefined) return yield* complete(finishOutput(finish.arguments) ?? result.text)
      const afterTools = TurnMeter.checkAfterResult(budgets, meter, now())
      if (afterTools !== undefined) return yield* exhausted(afterTools)
    }
  })
