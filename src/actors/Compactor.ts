/**
 * Context compaction as a turn runs it: before each model call the turn makes
 * (not one reused from a receipt), the next request is estimated, and when it
 * is over the threshold it is compacted. Micro first: old, long tool results
 * are archived (a `context_compacted` record with their markers rides along
 * with the turn's next commit; the full texts stay where they are, in the tool
 * calls' receipts). Then, when still over, a summary: the model summarizes the
 * older messages, and the summary replaces them only if that shrinks the
 * request. The summary call is an operation (`kind: "compaction"`) whose
 * receipt is committed with the record at once; a call that fails, or a
 * summary that does not shrink the request, leaves the conversation as it was
 * (its receipt still says so), and no second summary is tried in that turn.
 *
 * It also offers the turn's tool calls the built-in `read_artifact`
 * (`ArtifactTool`).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { Agent } from "../schema/Agent.js"
import { ContextCompacted } from "../schema/Compaction.js"
import type { ModelError } from "../schema/Errors.js"
import { makeOperationId } from "../schema/Ids.js"
import { decodeSummary, type SummaryOutput } from "../schema/Operation.js"
import { OperationCompleted, OperationStarted } from "../schema/Record.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import { CostMeter } from "../services/CostMeter.js"
import * as Model from "../services/Model.js"
import { SessionStore } from "../services/SessionStore.js"
import * as Telemetry from "../services/Telemetry.js"
import { Toolkit } from "../services/Toolkit.js"
import * as ArtifactTool from "./ArtifactTool.js"
import * as Compaction from "./Compaction.js"
import * as ContextEstimate from "./ContextEstimate.js"
import * as SessionState from "./SessionState.js"
import * as Transcript from "./Transcript.js"
import type * as TurnMeter from "./TurnMeter.js"
import type { TurnPlan } from "./TurnPlan.js"
import type { Pending, TurnContext } from "./TurnContext.js"

/** What compaction shares with the rest of its turn. */
export interface Deps {
  readonly model: Model.Model["Type"]
  readonly pending: Pending
  readonly meter: TurnMeter.TurnMeter
  readonly spanIds: { readonly sessionId: string; readonly turnId: string; readonly epoch: number }
  /** The agent in charge and its plan, now: a handoff changes them, and its settings then apply (default: the turn's first). */
  readonly inCharge?: (() => { readonly agent: Agent; readonly plan: TurnPlan }) | undefined
}

/** A turn's compaction. */
export interface Compactor {
  /** Compacts the conversation when the next model request would be over the threshold. */
  readonly beforeModelCall: Effect.Effect<void>
  /** `toolkit` with `read_artifact`: archived results here, other ids to the host's own `read_artifact` if it has one. */
  readonly toolkit: (toolkit: Toolkit["Type"]) => Toolkit["Type"]
}

/** The one reply of a summary call. */
const summaryCall = (model: Model.Model["Type"], request: Model.Request): Effect.Effect<Either.Either<Model.Reply, ModelError>> => {
  const gather = (events: Iterable<Model.Event>) => {
    let reply = Model.emptyReply
    for (const event of events) reply = Model.gather(reply, event)
    return reply
  }
  return (model.whole !== undefined
    ? Effect.map(model.whole(request), gather)
    : Effect.map(Stream.runCollect(model.stream(request)), gather)).pipe(Effect.either)
}

/** What compaction reads of the agent in charge: its plan's settings, and what its requests hold besides messages. */
interface Charge {
  readonly agent: Agent
  readonly plan: TurnPlan
  readonly settings: Compaction.Settings
  readonly fixed: number
}

const chargeWith = (agent: Agent, plan: TurnPlan): Charge => ({
  agent,
  plan,
  settings: plan.compaction,
  fixed: ContextEstimate.fixedChars(agent.instructions, Compaction.offered(plan.tools, plan.compaction, 1))
})

/** The agent in charge of the turn, now: read again after a handoff, whose target's settings then apply. */
const chargeOf = (ctx: TurnContext, deps: Deps): () => Charge => {
  let current = chargeWith(ctx.agent, ctx.plan)
  return () => {
    const now = deps.inCharge?.()
    if (now !== undefined && now.plan !== current.plan) current = chargeWith(now.agent, now.plan)
    return current
  }
}

/** The services compaction reads: the turn runner holds them already. */
export type Services = SessionStore | Telemetry.Telemetry | CostMeter

/** The compaction of the turn `ctx`, over the turn's `services`: built once per turn, in no Effect step. */
export const make = (ctx: TurnContext, deps: Deps, services: Context.Context<Services>): Compactor => {
  const store = Context.get(services, SessionStore)
  const telemetry = Context.get(services, Telemetry.Telemetry)
  const costs = Context.get(services, CostMeter)
  const { meter, model, pending, spanIds } = deps
  const { sessionId, turnId } = ctx
  const charge = chargeOf(ctx, deps)
  const countUsage = (output: SummaryOutput) => {
    meter.addModelCall(output.inputTokens, output.outputTokens, costs.cost(charge().agent.model.name, output.inputTokens, output.outputTokens))
  }
  // A summary that failed or did not shrink the request is not tried again in this turn.
  let summaryRefused = false
  // A resumed turn's summary calls were paid for: they count in its usage again, as its model calls do.
  for (const receipt of ctx.receipts) {
    if (receipt.kind !== "compaction" || receipt.status !== "completed") continue
    const summary = receipt.isError ? Option.none() : decodeSummary(receipt.output)
    if (receipt.isError || (Option.isSome(summary) && summary.value.rejected === true)) summaryRefused = true
    if (Option.isSome(summary)) countUsage(summary.value)
  }

  const requestTokens = (messages: ReadonlyArray<Model.Message>, waiting: ReadonlyArray<Model.Message>) =>
    ContextEstimate.estimateAll(messages, charge().fixed) + ContextEstimate.estimateAll(waiting, 0)

  const summarize = (current: ReadonlyArray<Model.Message>, waiting: ReadonlyArray<Model.Message>, cut: number, tokens: number) =>
    Effect.gen(function*() {
      const { agent, plan, settings } = charge()
      yield* telemetry.emit(ProductEvent.compactionStarted("summary", tokens))
      const operationId = yield* makeOperationId
      const request: Model.Request = {
        model: agent.model.name,
        instructions: Compaction.SUMMARY_INSTRUCTIONS,
        // Half the threshold at most, so that the summary call fits where the request did not.
        messages: [{ role: "user", content: Compaction.summaryInput(current.slice(0, cut), settings.threshold * 2) }],
        tools: [],
        settings: plan.settings,
        sessionId,
        turnId,
        agentName: agent.name,
        purpose: "summary"
      }
      const started = new OperationStarted({
        operationId,
        turnId,
        kind: "compaction",
        name: agent.model.name,
        input: { messages: cut, tools: 0 }
      }, true)
      const reply = yield* ctx.beforeOperation(summaryCall(model, request)).pipe(
        Telemetry.withOperationSpan("model", { ...spanIds, operationId }, { "troupe.model": request.model, "troupe.purpose": "summary" })
      )
      const unchanged = { tokensBefore: tokens, tokensAfter: tokens, archived: 0 }
      if (Either.isLeft(reply)) {
        summaryRefused = true
        pending.add(started, new OperationCompleted({ operationId, turnId, output: { error: reply.left.reason }, isError: true }, true))
        return yield* telemetry.emit(ProductEvent.compactionCompleted("summary", "failed", unchanged))
      }
      const result = reply.right
      const output: SummaryOutput = { summary: result.text, inputTokens: result.inputTokens, outputTokens: result.outputTokens }
      countUsage(output)
      const summary = Compaction.summaryMessage(result.text)
      const after = requestTokens([{ role: "user", content: summary }, ...current.slice(cut)], waiting)
      if (result.text.trim().length === 0 || after >= tokens) {
        summaryRefused = true
        pending.add(started, new OperationCompleted({ operationId, turnId, output: { ...output, rejected: true }, isError: false }, true))
        return yield* telemetry.emit(
          ProductEvent.compactionCompleted("summary", "rejected", { tokensBefore: tokens, tokensAfter: after, archived: 0 })
        )
      }
      const record = new ContextCompacted({
        turnId,
        mode: "summary",
        messagesBefore: current.length,
        tokensBefore: tokens,
        tokensAfter: after,
        replaced: cut,
        summary,
        operationId
      }, true)
      // Durable at once, with its receipt: a crash from here on never pays for this summary again.
      yield* ctx.commit([
        ...pending.take(),
        started,
        new OperationCompleted({ operationId, turnId, output, isError: false }, true),
        record
      ])
      yield* telemetry.emit(
        ProductEvent.compactionCompleted("summary", "compacted", { tokensBefore: tokens, tokensAfter: after, archived: 0 })
      )
    })

  const compact = (view: SessionState.SessionState, waiting: ReadonlyArray<Model.Message>, before: number) =>
    Effect.gen(function*() {
      const { plan, settings } = charge()
      const messages = Transcript.toArray(view.transcript)
      let current: ReadonlyArray<Model.Message> = messages
      let tokens = before
      const archived = Compaction.planMicro(
        messages,
        settings,
        (toolName) => plan.tool(toolName)?.preserveResult === true,
        SessionState.originOf
      )
      if (archived.length > 0) {
        yield* telemetry.emit(ProductEvent.compactionStarted("micro", before))
        current = Compaction.withArchived(messages, archived)
        tokens = requestTokens(current, waiting)
        pending.add(
          new ContextCompacted({
            turnId,
            mode: "micro",
            messagesBefore: messages.length,
            tokensBefore: before,
            tokensAfter: tokens,
            archived
          }, true)
        )
        yield* telemetry.emit(
          ProductEvent.compactionCompleted("micro", "compacted", { tokensBefore: before, tokensAfter: tokens, archived: archived.length })
        )
      }
      if (tokens <= settings.threshold || summaryRefused) return
      const cut = Compaction.planCut(current, settings.keepRecentMessages)
      if (cut !== undefined) yield* summarize(current, waiting, cut, tokens)
    })

  const beforeModelCall = Effect.suspend(() => {
    const { fixed, settings } = charge()
    if (!settings.enabled) return Effect.void
    const view = ctx.view(pending.peek())
    const waiting = SessionState.waitingMessages(view)
    const before = ContextEstimate.estimate(view.transcript, waiting, view.reported, fixed)
    return before <= settings.threshold ? Effect.void : compact(view, waiting, before)
  })

  const artifacts = () => ctx.view(pending.peek()).artifacts
  return {
    beforeModelCall,
    toolkit: (inner) => {
      if (!charge().settings.enabled) return inner
      // The host's own read_artifact (workspace artifacts) answers the ids compaction did not archive.
      const runnable = ArtifactTool.make(store, sessionId, artifacts, inner.get(Compaction.READ_ARTIFACT))
      return Toolkit.of({ ...inner, get: (name) => (name === Compaction.READ_ARTIFACT ? runnable : inner.get(name)) })
    }
  } satisfies Compactor
}
