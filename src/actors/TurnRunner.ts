/**
 * The turn body. For now one `Model` call whose reply completes the turn; the
 * agent-loop issue grows it into model calls and tool calls until explicit
 * completion. Everything a turn needs from its actor comes in `TurnContext`,
 * so that change stays in this module.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Option, Stream } from "effect"
import type { Agent } from "../schema/Agent.js"
import { Usage } from "../schema/Budget.js"
import { AssistantDelta } from "../schema/Event.js"
import { makeOperationId, type InputId, type SessionId, type TurnId } from "../schema/Ids.js"
import { OperationCompleted, OperationStarted, type RecordBody, TurnEnded } from "../schema/Record.js"
import * as Model from "../services/Model.js"
import type { OperationReceipt } from "../schema/Operation.js"

/** What a turn is given by the actor that runs it. */
export interface TurnContext {
  readonly sessionId: SessionId
  readonly turnId: TurnId
  readonly inputId: InputId
  readonly agent: Agent
  /** The conversation before this turn. */
  readonly history: ReadonlyArray<Model.Message>
  readonly text: string
  /** Receipts of operations this turn completed before a crash, reused instead of re-run. */
  readonly receipts: ReadonlyArray<OperationReceipt>
  /** Appends records to the session log (fenced by the actor's lease). */
  readonly commit: (records: ReadonlyArray<RecordBody>) => Effect.Effect<void>
  /** Broadcasts a volatile event. */
  readonly publish: (delta: AssistantDelta) => Effect.Effect<void>
  /** Takes the steering messages that arrived since the last model call. */
  readonly takeSteers: Effect.Effect<ReadonlyArray<string>>
}

/** How a turn ended, for the actor's in-memory transcript. */
export interface TurnSummary {
  readonly outcome: "completed" | "failed"
  readonly output: string
  /** User text the turn consumed (its message and any steers). */
  readonly userTexts: ReadonlyArray<string>
}

const usageOf = (reply: Model.Reply, wallTimeMs: number) =>
  new Usage({
    inputTokens: reply.inputTokens,
    outputTokens: reply.outputTokens,
    totalTokens: reply.inputTokens + reply.outputTokens,
    modelCalls: 1,
    toolCalls: 0,
    toolCallsByName: {},
    wallTimeMs,
    costMicros: 0
  }, true)

/** Runs one turn to its end, recording the model call as an operation with a receipt. */
export const run = (ctx: TurnContext) =>
  Effect.gen(function*() {
    const model = yield* Model.Model
    const startedAt = yield* Clock.currentTimeMillis
    const steers = yield* ctx.takeSteers
    const userTexts = [ctx.text, ...steers]
    const messages: Array<Model.Message> = [...ctx.history, ...userTexts.map((content) => ({ role: "user" as const, content }))]
    const previous = Option.fromNullable(ctx.receipts.find((r) => r.kind === "model" && r.status === "completed"))
    const operationId = Option.isSome(previous) ? previous.value.operationId : yield* makeOperationId
    const request: Model.Request = {
      model: ctx.agent.model.name,
      instructions: ctx.agent.instructions,
      messages,
      tools: ctx.agent.tools,
      settings: ctx.agent.model.settings,
      sessionId: ctx.sessionId,
      turnId: ctx.turnId,
      agentName: ctx.agent.name
    }
    let reply = Model.emptyReply
    const call = model.stream(request).pipe(
      // Chunk by chunk: a Stream step costs far more than folding a chunk in place.
      Stream.runForEachChunk((chunk) => {
        const deltas: Array<AssistantDelta> = []
        for (const event of chunk) {
          reply = Model.gather(reply, event)
          if (event._tag === "TextDelta") {
            deltas.push(new AssistantDelta({ sessionId: ctx.sessionId, turnId: ctx.turnId, text: event.text }, true))
          }
        }
        return deltas.length === 0 ? Effect.void : Effect.forEach(deltas, ctx.publish, { discard: true })
      }),
      Effect.map(() => reply),
      Effect.either
    )
    const outcome = Option.isSome(previous)
      ? { _tag: "Right" as const, right: previous.value.output as Model.Reply }
      : yield* call
    const wallTimeMs = (yield* Clock.currentTimeMillis) - startedAt
    // The model call is recorded with its receipt once it returns: a call cut
    // off by a crash has no side effects, so it is simply made again.
    const started = Option.isSome(previous)
      ? []
      : [new OperationStarted({
        operationId,
        turnId: ctx.turnId,
        kind: "model",
        name: request.model,
        input: { messages: messages.length, tools: request.tools.length }
      }, true)]
    if (outcome._tag === "Left") {
      const error = outcome.left
      yield* ctx.commit([
        ...started,
        new OperationCompleted({ operationId, turnId: ctx.turnId, output: { error: error.reason }, isError: true }, true),
        new TurnEnded({
          turnId: ctx.turnId,
          outcome: "failed",
          failureCode: "model_error",
          failure: { _tag: "ModelError", reason: error.reason, retryable: error.retryable },
          usage: usageOf(Model.emptyReply, wallTimeMs)
        }, true)
      ])
      return { outcome: "failed", output: "", userTexts } satisfies TurnSummary
    }
    const result = outcome.right
    yield* ctx.commit([
      ...started,
      ...(Option.isSome(previous)
        ? []
        : [new OperationCompleted({ operationId, turnId: ctx.turnId, output: result, isError: false }, true)]),
      new TurnEnded({
        turnId: ctx.turnId,
        outcome: "completed",
        output: result.text,
        publicFinalMessage: result.text,
        usage: usageOf(result, wallTimeMs)
      }, true)
    ])
    return { outcome: "completed", output: result.text, userTexts } satisfies TurnSummary
  })
