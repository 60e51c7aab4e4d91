/**
 * What a turn is given by the actor that runs it (`TurnContext`), and what the
 * turn's parts share while it runs (`Pending`, the records that ride along with
 * the next commit). Its own module so that the turn loop (`TurnRunner`), its
 * tool calls (`ToolCalls`) and context compaction (`Compactor`) all import it
 * and none of them imports another for its types.
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import type * as Effect from "effect/Effect"
import type { Agent } from "../schema/Agent.js"
import type { CallbackKind, CallbackRequest } from "../schema/Callback.js"
import type { AssistantDelta } from "../schema/Event.js"
import type { CallbackId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import type { OperationReceipt } from "../schema/Operation.js"
import type { Principal } from "../schema/Principal.js"
import type { RecordBody } from "../schema/Record.js"
import type * as Model from "../services/Model.js"
import type { Runnable } from "../services/Toolkit.js"
import type { AgentTools } from "./AgentTool.js"
import type { SessionState } from "./SessionState.js"
import type { SubagentTools } from "./SubagentTools.js"
import type * as TurnMeter from "./TurnMeter.js"
import type { TurnPlan } from "./TurnPlan.js"

/** A callback of this turn found in the log when it resumes. */
export interface KnownCallback {
  readonly callbackId: CallbackId
  readonly operationId: OperationId
  readonly kind: CallbackKind
  readonly status: "open" | "answered" | "cancelled" | "expired"
  readonly result?: unknown
  /** When it expires unanswered (an approval opened with a timeout). */
  readonly expiresAt?: number | undefined
}

/** A model request's conversation, and how many waiting steers and child results it takes. */
export interface Prompt {
  /** The transcript, then the waiting steers and child results (`rest`). */
  readonly messages: Model.History
  readonly steers: number
  readonly results: number
  /** How many tool results the session has archived (`read_artifact` is offered once there is one). */
  readonly archived: number
}

/** What a turn is given by the actor that runs it. */
export interface TurnContext {
  readonly sessionId: SessionId
  readonly turnId: TurnId
  /** Whose session it is, and the agent names from the root down (for tools' `ToolContext`). */
  readonly principal: Principal
  readonly agentPath: ReadonlyArray<string>
  /** The root session of the tree (for tools' `ToolContext`: whose workspace they use). */
  readonly rootId?: SessionId | undefined
  /** The epoch of the lease the turn runs under (for spans). */
  readonly epoch: number
  /** The actor's clock, read in place (no Effect step per reading). */
  readonly clock: Clock.Clock
  /** The agent the turn starts on (the session's). */
  readonly agent: Agent
  readonly plan: TurnPlan
  /** The plan of an agent the turn is handed off to (the same run options, session and host). */
  readonly planFor: (agent: Agent) => TurnPlan
  /** The turn's message (what input guardrails check). */
  readonly message: string
  /**
   * The conversation a model call made now is given: the session's transcript
   * (every earlier turn's steps, and this turn's so far) with `pending`
   * records folded on, then every steer waiting for the turn.
   */
  readonly prompt: (pending: ReadonlyArray<RecordBody>) => Prompt
  /** The session's state with `pending` records folded on: what context compaction plans on. */
  readonly view: (pending: ReadonlyArray<RecordBody>) => SessionState
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
  /**
   * Runs an operation (a model call, a tool body, a guardrail check) after the lease check: at
   * once while the lease may still be held by its local deadline, after a renewal when that passed,
   * and not at all when the lease is lost: the turn is interrupted (decision 0031).
   */
  readonly beforeOperation: <A, E, R>(operation: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Broadcasts volatile events. */
  readonly publish: (deltas: ReadonlyArray<AssistantDelta>) => Effect.Effect<void>
  /** Parks until the user says something (`wait_user`): a steer waits for the turn. */
  readonly awaitSteers: Effect.Effect<void>
  /**
   * Commits `records` with a new `callback_opened` for `operationId`, offers it
   * to providers, and parks until it is answered; returns the answer. With
   * `expiresAt`, an answer not admitted by then is the expiry (`ApprovalTimeout`).
   */
  readonly openCallback: (
    operationId: OperationId,
    request: CallbackRequest,
    records: ReadonlyArray<RecordBody>,
    expiresAt?: number | undefined
  ) => Effect.Effect<unknown>
  /** Parks on a callback opened before a crash until it is answered (or expires, at the deadline in its record). */
  readonly awaitCallback: (callbackId: CallbackId) => Effect.Effect<unknown>
  /** The `agents.*` tools, when the session may spawn subagents. */
  readonly subagents?: SubagentTools | undefined
  /** The agents used as tools (`Agent.asTool`). */
  readonly agentTools?: AgentTools | undefined
  /** The session's toolsets (MCP servers): their tools, by model-facing name. */
  readonly toolsets?: { readonly get: (name: string) => Runnable | undefined } | undefined
}

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
