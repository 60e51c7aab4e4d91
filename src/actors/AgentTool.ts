/**
 * An agent used as a tool (`Agent.asTool`): a call spawns the tool's agent as
 * a child session of the caller with `input` as its first message (through
 * the subagent machinery, so the tree's policy counts it), parks the turn
 * until the child's turn ends, and returns its final output as the tool's
 * result (a failed or interrupted child is a tool error). The parent turn
 * then goes on.
 *
 * The child is known by the call's operation (its `child_spawned` record
 * names it), so a call run again after a crash waits for the child it
 * spawned rather than spawning another: the tool declares idempotency
 * `supported`.
 *
 * Interrupting the parent's turn while it waits interrupts the child's turn
 * too, with the same public reason; a host that stops (its turn resumes
 * elsewhere) leaves the child running.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Schema from "effect/Schema"
import type { Agent, ToolSpec } from "../schema/Agent.js"
import { type InputId, makeSessionId, type OperationId, type SessionId } from "../schema/Ids.js"
import { Interrupt, Message } from "../schema/Inbox.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import type * as Model from "../services/Model.js"
import { errorOutcome, type ToolOutcome } from "../services/Tool.js"
import type { Runnable } from "../services/Toolkit.js"
import { args, type Env, refusalOutcome } from "./SubagentTools.js"

const Args = Schema.Struct({ input: Schema.String })

/** The child a call (its operation) spawned, if it did. */
const childOf = (env: Env, operationId: OperationId): SessionId | undefined => {
  for (const child of HashMap.values(env.state().children)) if (child.operationId === operationId) return child.childSessionId
  return undefined
}

/** The outcome the model sees once the child's turn ended. */
const outcomeOf = (env: Env, childId: SessionId, agent: Agent): ToolOutcome | undefined => {
  const known = HashMap.get(env.state().children, childId)
  const last = known._tag === "Some" ? known.value.last : undefined
  if (last === undefined) return undefined
  if (last.outcome === "completed") return { output: last.output ?? "", isError: false }
  return errorOutcome(
    last.outcome === "failed"
      ? `the agent ${agent.name} failed (${last.failureCode ?? "internal"})`
      : `the agent ${agent.name} was interrupted${last.reason === undefined ? "" : `: ${last.reason}`}`
  )
}

/**
 * Interrupts the running turn of `childId` with the reason the actor
 * interrupted the parent's turn for. Without one the host is stopping and
 * the parent's turn resumes elsewhere, still waiting on the child: nothing
 * to do. A child whose turn ended meanwhile is left as it is.
 */
const cascade = (env: Env, childId: SessionId, operationId: OperationId): Effect.Effect<void> =>
  Effect.suspend(() => {
    const reason = env.interruptReason?.()
    if (reason === undefined) return Effect.void
    return env.store.get(childId).pipe(
      Effect.flatMap((child) =>
        child.activeTurnId === null ? Effect.void : Effect.zipRight(
          env.store.push(
            childId,
            // One interrupt per call, whoever sends it again.
            new Interrupt({ inputId: `cascade:${operationId}` as InputId, expectedTurnId: child.activeTurnId, reason }, true)
          ),
          env.wake(childId)
        )
      ),
      Effect.ignore
    )
  })

const run = (env: Env, spec: ToolSpec, agent: Agent, call: Model.ToolCall, operationId: OperationId) =>
  Effect.gen(function*() {
    let childId = childOf(env, operationId)
    if (childId === undefined) {
      const { input } = yield* args(Args, call.arguments)
      const sessionId = yield* makeSessionId
      const spawned = yield* env.commitSpawn({
        agent,
        // One first message per call, whoever runs it again.
        message: new Message({ inputId: `agent-tool:${operationId}` as InputId, text: input }, true),
        sessionId,
        alias: `${spec.name}-${HashMap.size(env.state().children) + 1}`,
        title: spec.name,
        turnId: env.turnId,
        operationId
      }, []).pipe(Effect.either)
      if (spawned._tag === "Left") {
        const error = spawned.left
        if (error._tag !== "SpawnRefused") return errorOutcome(error.message)
        yield* env.telemetry.emit(ProductEvent.subagentRefused(error.reason))
        return refusalOutcome(error)
      }
      yield* env.telemetry.emit(ProductEvent.sessionStarted("child"))
      yield* env.wake(sessionId)
      childId = sessionId
    }
    const waited = childId
    return yield* Effect.gen(function*() {
      for (;;) {
        const outcome = outcomeOf(env, waited, agent)
        if (outcome !== undefined) return outcome
        yield* env.awaitResult
      }
    }).pipe(Effect.onInterrupt(() => cascade(env, waited, operationId)))
  }).pipe(Effect.catchAll((outcome) => Effect.succeed(outcome)))

/**
 * The agent tools of one turn, over the subagent tools' environment: made by `env` when an agent
 * tool is first called (most turns call none).
 */
export const make = (env: () => Env) => ({
  /** The runnable of `spec` when it is an agent tool. */
  get: (spec: ToolSpec, call: Model.ToolCall, operationId: OperationId): Runnable | undefined => {
    const agent = spec.agent
    return agent === undefined ? undefined : { spec, run: () => run(env(), spec, agent, call, operationId) }
  }
})

/** The agent tools of one turn. */
export type AgentTools = ReturnType<typeof make>
