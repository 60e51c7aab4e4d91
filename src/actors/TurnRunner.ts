/**
 * The turn body. For now one `Model` call whose reply completes the turn; the
 * agent-loop issue grows it into model calls and tool calls until explicit
 * completion. Everything a turn needs from its actor comes in `TurnContext`,
 * so that change stays in this module.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Either, Option, Stream } from "effect"
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
}

const usageOf = (replies: ReadonlyArray<Model.Reply>, wallTimeMs: number) => {
  let inputTokens = 0
  let outputTokens = 0
  for (const reply of replies) {
    inputTokens += reply.inputTokens
    outputTokens += reply.outputTokens
  }
  return new Usage({
    inputTokens,
    outputTokens,
    totalTokens: inputTokens + outputTokens,
    modelCalls: replies.length,
    toolCalls: 0,
    toolCallsByName: {},
    wallTimeMs,
    costMicros: 0
  }, true)
}

/**
 * Runs one turn to its end. Each model call is an operation recorded with its
 * receipt; text steered into the turn while a call runs is delivered at the
 * next call, so a reply followed by steers is answered again (up to the
 * agent's `maxCycles` calls). On resume, receipts of calls the turn already
 * completed are reused in order instead of calling the model again.
 */
export const run = (ctx: TurnContext) =>
  Effect.gen(function*() {
    const model = yield* Model.Model
    const startedAt = yield* Clock.currentTimeMillis
    const reusable = ctx.receipts.filter((r) => r.kind === "model" && r.status === "completed")
    const messages: Array<Model.Message> = [...ctx.history, { role: "user", content: ctx.text }]
    for (const content of yield* ctx.takeSteers) messages.push({ role: "user", content })
    const replies: Array<Model.Reply> = []
    const elapsed = Effect.map(Clock.currentTimeMillis, (now) => now - startedAt)

    for (let call = 0;; call++) {
      const previous = Option.fromNullable(reusable[call])
      const operationId = Option.isSome(previous) ? previous.value.operationId : yield* makeOperationId
      const request: Model.Request = {
        model: ctx.agent.model.name,
        instructions: ctx.agent.instructions,
        messages: messages.slice(),
        tools: ctx.agent.tools,
        settings: ctx.agent.model.settings,
        sessionId: ctx.sessionId,
        turnId: ctx.turnId,
        agentName: ctx.agent.name
      }
      let reply = Model.emptyReply
      const outcome = Option.isSome(previous)
        ? Either.right(previous.value.output as Model.Reply)
        : yield* model.stream(request).pipe(
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
      // A model call is recorded with its receipt once it returns: a call cut
      // off by a crash has no side effects, so it is simply made again.
      const started = Option.isSome(previous)
        ? []
        : [new OperationStarted({
          operationId,
          turnId: ctx.turnId,
          kind: "model",
          name: request.model,
          input: { messages: request.messages.length, tools: request.tools.length }
        }, true)]
      if (Either.isLeft(outcome)) {
        const error = outcome.left
        yield* ctx.commit([
          ...started,
          new OperationCompleted({ operationId, turnId: ctx.turnId, output: { error: error.reason }, isError: true }, true),
          new TurnEnded({
            turnId: ctx.turnId,
            outcome: "failed",
            failureCode: "model_error",
            failure: { _tag: "ModelError", reason: error.reason, retryable: error.retryable },
            usage: usageOf(replies, yield* elapsed)
          }, true)
        ])
        return { outcome: "failed", output: "" } satisfies TurnSummary
      }
      const result = outcome.right
      replies.push(result)
      const receipt = Option.isSome(previous)
        ? []
        : [...started, new OperationCompleted({ operationId, turnId: ctx.turnId, output: result, isError: false }, true)]
      const steers = yield* ctx.takeSteers
      if (steers.length > 0 && call + 1 < ctx.agent.maxCycles) {
        yield* ctx.commit(receipt)
        messages.push({ role: "assistant", content: result.text })
        for (const content of steers) messages.push({ role: "user", content })
        continue
      }
      yield* ctx.commit([
        ...receipt,
        new TurnEnded({
          turnId: ctx.turnId,
          outcome: "completed",
          output: result.text,
          publicFinalMessage: result.text,
          usage: usageOf(replies, yield* elapsed)
        }, true)
      ])
      return { outcome: "completed", output: result.text } satisfies TurnSummary
    }
  })
