/**
 * The tool calls of a turn: each one an operation recorded before its body
 * runs and completed right after, under the permission policy (`ask` parks the
 * turn on an approval callback), on the client through a `client_tool`
 * callback or here through the toolkit, and, on resume, picked up from its
 * receipt or callbacks (a call started without a receipt runs again only when
 * its tool declares idempotency `supported`).
 *
 * @since 0.1.0
 */
import { Effect, Either, Schema } from "effect"
import type { ToolSpec } from "../schema/Agent.js"
import { ApprovalAnswer, ApprovalRequest, ClientToolAnswer, ClientToolRequest } from "../schema/Callback.js"
import { makeOperationId, type OperationId } from "../schema/Ids.js"
import { isToolCallInput, type OperationReceipt } from "../schema/Operation.js"
import { OperationCompleted, OperationStarted, OperationUnknown, type RecordBody } from "../schema/Record.js"
import type * as Model from "../services/Model.js"
import * as Telemetry from "../services/Telemetry.js"
import { errorOutcome, type ToolOutcome } from "../services/Tool.js"
import type { Toolkit } from "../services/Toolkit.js"
import { unknownOutcome } from "./SessionState.js"
import * as SubagentTools from "./SubagentTools.js"
import type { TurnContext } from "./TurnRunner.js"

/** Records of steps without side effects (a model reply, a refused call) that ride along with the turn's next commit. */
export interface Pending {
  readonly add: (...records: ReadonlyArray<RecordBody>) => void
  /** The records so far, handed over and forgotten. */
  readonly take: () => ReadonlyArray<RecordBody>
  readonly peek: () => ReadonlyArray<RecordBody>
}

/** An empty `Pending`. */
export const makePending = (): Pending => {
  let records: Array<RecordBody> = []
  return {
    add: (...more) => {
      records.push(...more)
    },
    take: () => {
      const taken = records
      records = []
      return taken
    },
    peek: () => records
  }
}

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

/** The tool calls of the turn `ctx`: `runCall` runs (or reuses) one call the model asked for in the reply `requestedBy`. */
export const make = (ctx: TurnContext, deps: Deps) => {
  const { parked, pending, spanIds, toolkit } = deps
  const { plan, turnId } = ctx
  // Model call ids are only unique within one reply, so a tool call is known by the reply that asked for it.
  const toolReceipts = new Map<string, OperationReceipt>()
  for (const receipt of ctx.receipts) {
    const input = receipt.input
    if (receipt.kind === "tool" && isToolCallInput(input)) toolReceipts.set(`${input.requestedBy}/${input.callId}`, receipt)
  }
  const callbacksOf = (operationId: OperationId) => ctx.callbacks.filter((c) => c.operationId === operationId)

  const completed = (operationId: OperationId, outcome: ToolOutcome) =>
    new OperationCompleted({ operationId, turnId, output: outcome.output, isError: outcome.isError }, true)

  /** Records a tool call's outcome now: once a body ran, its receipt must be durable before anything else. */
  const completeOperation = (operationId: OperationId, outcome: ToolOutcome) =>
    Effect.as(ctx.commit([...pending.take(), completed(operationId, outcome)]), outcome)

  /** Refuses a call without running anything: the records wait for the next commit. */
  const refuse = (operationId: OperationId, outcome: ToolOutcome, before: ReadonlyArray<RecordBody>) =>
    Effect.sync(() => {
      pending.add(...before, completed(operationId, outcome))
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
        const answer = yield* parked(ctx.openCallback(operationId, request, [...pending.take(), ...before]))
        return yield* completeOperation(operationId, clientOutcome(answer))
      }
      if (call.name === SubagentTools.SPAWN && ctx.subagents !== undefined) {
        // The spawn and the call's receipt commit together, or neither does.
        const prior = [...pending.take(), ...before]
        const spawned = yield* ctx.subagents.spawn(call, operationId, (outcome) => [...prior, completed(operationId, outcome)])
        if (!spawned.written) pending.add(...prior, completed(operationId, spawned.outcome))
        return spawned.outcome
      }
      const runnable = ctx.agentTools?.get(spec, call, operationId) ?? ctx.subagents?.get(call.name, call, operationId) ??
        toolkit.get(call.name)
      if (runnable === undefined) {
        return yield* refuse(operationId, errorOutcome(`no handler for the tool ${call.name} on this host`), before)
      }
      // Started is durable before the body runs: a crash from here on leaves the call's outcome unknown.
      const records = [...pending.take(), ...before]
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
      pending.add(new OperationUnknown({ operationId, turnId }, true))
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
        const answer = yield* parked(ctx.openCallback(operationId, request, [...pending.take(), started]))
        return yield* approved(call, spec, operationId, answer)
      }
      return yield* body(call, spec, operationId, [started])
    })

  return { runCall }
}
