/**
 * What a session's log says, as one immutable value: the transcript the next
 * model call is given, the turns that ended, the callbacks of the turns that
 * have not ended (open or closed, with their resolutions and answers) and of
 * those that have only which were answered or cancelled, the tools approved
 * for the session, and the active turn with its operations (the receipts a
 * resumed turn reuses) and the steers it has not taken yet.
 *
 * A live actor keeps this value for as long as it lives, so apart from the
 * transcript (the conversation itself) nothing in it grows with every turn
 * by more than a packed id (decision 0014).
 *
 * `apply` folds one record onto a state; folding a log in one pass, in pages
 * of any size, or commit by commit gives the same value. The actor keeps the
 * newest state and folds each commit onto it, so after a restart the state
 * rebuilt from the log is the one the actor had. Nothing here runs an effect.
 *
 * The store's own projection of the same records (`LogProjection`) keeps the
 * session row's columns; this keeps what the actor needs, with one meaning of
 * each record for both.
 *
 * @since 0.1.0
 */
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Option from "effect/Option"
import type { CallbackResolution } from "../schema/Callback.js"
import { decodeApprovalResult, OpenCallback } from "../schema/Callback.js"
import type { ArchivedResult } from "../schema/Compaction.js"
import type { CallbackId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import { decodeModelReply, decodeWait, type ModelReplyOutput, type OperationKind, OperationReceipt } from "../schema/Operation.js"
import type {
  CallbackOpened,
  CallbackResolved,
  ChildResultRecorded,
  ChildrenAwaited,
  ChildSpawned,
  Closed,
  ContextCompacted,
  InputApplied,
  LogRecord,
  ModelCallInput,
  OperationCompleted,
  OperationStarted,
  OperationUnknown,
  OutputRejected,
  RecordBody,
  ToolCallInput,
  TurnEnded,
  TurnStarted
} from "../schema/Record.js"
import * as Trusted from "../schema/Trusted.js"
import type * as Model from "../services/Model.js"
import { errorOutcome } from "../services/Tool.js"
import * as Compaction from "./Compaction.js"
import type { Reported } from "./ContextEstimate.js"
import * as StructuredOutput from "./StructuredOutput.js"
import * as IdSet from "./IdSet.js"
import * as Transcript from "./Transcript.js"
import { FINISH } from "./TurnPlan.js"

/** A callback of the session as the log tells it. */
export interface CallbackEntry {
  /** Its `callback_opened` record as an open callback, with the seq and time of its commit. */
  readonly opened: OpenCallback
  readonly toolName: string
  readonly status: "open" | CallbackResolution
  /** The answer, once answered. */
  readonly result?: unknown
  /** When it expires unanswered (an approval with a timeout). */
  readonly expiresAt?: number | undefined
}

/** One operation of the active turn. */
export interface OperationEntry {
  readonly operationId: OperationId
  readonly kind: OperationKind
  readonly name: string
  readonly input: ModelCallInput | ToolCallInput
  readonly status: "started" | "completed" | "unknown"
  readonly output?: unknown
  readonly isError: boolean
  readonly startedSeq: number
  readonly endedSeq?: number | undefined
}

/** The turn that started and has not ended. */
export interface ActiveTurn {
  readonly started: TurnStarted
  readonly startedSeq: number
  /** Its operations in start order. */
  readonly operations: ReadonlyArray<OperationEntry>
  /** Steers delivered to it that no model call has taken yet, oldest first. */
  readonly steers: ReadonlyArray<string>
  /** Results of child turns that arrived while it ran, not yet taken by a model call or `agents.wait`. */
  readonly results: ReadonlyArray<ChildResultRecorded>
  /** Tool calls of its latest model reply that have no result yet. */
  readonly unanswered: ReadonlyArray<Model.ToolCall>
  /** True while it is parked in `agents.wait` (a `children_awaited` record): the session is `waiting`. */
  readonly waitParked: boolean
}

/** A session's state as its log tells it. */
export interface SessionState {
  readonly sessionId: SessionId
  /** The seq of the last record folded. */
  readonly head: number
  readonly closed: boolean
  readonly transcript: Transcript.Transcript
  /** Every turn that ended (asked only when an interrupt names a turn that is not running). */
  readonly ended: IdSet.IdSet<TurnId>
  /** The callbacks of the turns that have not ended; a turn's end leaves of its own only `pastCallbacks`. */
  readonly callbacks: HashMap.HashMap<CallbackId, CallbackEntry>
  /** The callbacks of ended turns that were answered, and those that were cancelled or expired (what a late answer is told). */
  readonly pastCallbacks: PastCallbacks
  /** Tools approved "for the session" by an approval answer: not asked about again. */
  readonly approvals: HashSet.HashSet<string>
  readonly active: ActiveTurn | undefined
  /** This session's children, by id, with the last result each delivered. */
  readonly children: HashMap.HashMap<SessionId, ChildEntry>
  /** The end of the last turn that ended. */
  readonly lastEnd: TurnEnded | undefined
  /** Tool results context compaction archived, by artifact id (`read_artifact` reads them back). */
  readonly artifacts: HashMap.HashMap<string, ArchivedResult>
  /** What the model reported for the newest model call, unless the conversation was compacted since. */
  readonly reported: Reported | null
}

/** What is kept of the callbacks of ended turns: which were answered and which were cancelled (or expired). */
export interface PastCallbacks {
  readonly answered: IdSet.IdSet<CallbackId>
  readonly cancelled: IdSet.IdSet<CallbackId>
}

/** A child this session spawned, as its log tells it. */
export interface ChildEntry {
  readonly childSessionId: SessionId
  readonly alias: string | null
  readonly agentName: string
  /** The tool call that spawned it (an agent tool's call waits for it by this). */
  readonly operationId: OperationId | undefined
  /** Its last turn's result, once one arrived. */
  readonly last: ChildResultRecorded | undefined
}

/** The name of the built-in tool that waits for child results (its results are the tool's output, not transcript messages). */
export const WAIT_TOOL = "agents.wait"

/** A child's result as the parent's model reads it. */
const childResultText = (result: ChildResultRecorded, alias: string | null): string => {
  const who = alias ?? result.childSessionId
  const how = result.outcome === "failed"
    ? `failed (${result.failureCode ?? "internal"})`
    : result.outcome === "interrupted"
    ? `was interrupted${result.reason ? `: ${result.reason}` : ""}`
    : "completed"
  const text = result.output ?? result.publicFinalMessage
  return `[subagent ${who}, turn ${result.turnId}] ${how}${text ? `: ${text}` : ""}`
}

/** What the model is told when a crash left a tool call's outcome unknown. */
export const unknownOutcome = errorOutcome(
  "the outcome of this call is unknown: the host stopped while it ran, and the tool does not declare that it may safely run again"
)

/** A tool output as the model reads it: text as it is, anything else as JSON. */
export const renderOutput = (output: unknown): string =>
  typeof output === "string" ? output : JSON.stringify(output ?? null)

/** The state of a session whose log is empty. */
export const empty = (sessionId: SessionId): SessionState => ({
  sessionId,
  head: 0,
  closed: false,
  transcript: Transcript.empty(),
  ended: IdSet.empty("turn_"),
  callbacks: HashMap.empty(),
  pastCallbacks: { answered: IdSet.empty("cb_"), cancelled: IdSet.empty("cb_") },
  approvals: HashSet.empty(),
  active: undefined,
  children: HashMap.empty(),
  lastEnd: undefined,
  artifacts: HashMap.empty(),
  reported: null
})

/** Whether an approval's result approves its tool for the rest of the session. */
const isSessionApproval = (result: unknown): boolean => {
  const approval = decodeApprovalResult(result)
  return Option.isSome(approval) && "decision" in approval.value && approval.value.decision === "approve_session"
}

const toolMessage = (toolCallId: string, output: unknown): Model.Message => ({
  role: "tool",
  toolCallId,
  content: renderOutput(output)
})

// Where each tool result of a transcript came from, for compaction to name its artifact. Kept beside the
// messages rather than in them: messages are what providers are sent, and they stay plain.
const origins = new WeakMap<Model.Message, Compaction.Origin>()

/** The operation (and its receipt's record) a tool message of a transcript came from. */
export const originOf = (message: Model.Message): Compaction.Origin | undefined => origins.get(message)

/** `transcript` with a tool call's result appended, its origin noted (on the message the list keeps, which may be a shared one). */
const appendResult = (transcript: Transcript.Transcript, message: Model.Message, origin: Compaction.Origin) => {
  const next = Transcript.append(transcript, message)
  origins.set(next.items[next.length - 1]!, origin)
  return next
}

const reportOf = (entry: OperationEntry, reply: ModelReplyOutput): Reported | undefined =>
  reply.inputTokens > 0 && "messages" in entry.input ? { tokens: reply.inputTokens, messages: entry.input.messages } : undefined

/** What a tool call with no result is given when its turn ends, so every call in the transcript has an answer. */
const closingResult = (call: Model.ToolCall, end: TurnEnded): unknown =>
  call.name === FINISH && end.outcome === "completed"
    ? "ok"
    : errorOutcome(
      `not run: the turn ${
        end.outcome === "failed" ? `failed (${end.failureCode ?? "internal"})` : end.outcome === "interrupted" ? "was interrupted" : "completed"
      }`
    ).output

const withoutCall = (calls: ReadonlyArray<Model.ToolCall>, callId: string) => {
  const i = calls.findIndex((call) => call.id === callId)
  return i < 0 ? calls : [...calls.slice(0, i), ...calls.slice(i + 1)]
}

/** What a model call's output that is no reply is read as: an empty one. */
const noReply: ModelReplyOutput = { text: "", toolCalls: [], inputTokens: 0, outputTokens: 0 }

/** A model call's output as its reply, decoded once. */
const replyOf = (output: unknown): ModelReplyOutput => Option.getOrElse(decodeModelReply(output), () => noReply)

// The fold builds every new state as a literal: an object spread with an override costs ~50× as much in V8.
interface Change {
  readonly closed?: boolean
  readonly transcript?: Transcript.Transcript
  readonly ended?: IdSet.IdSet<TurnId>
  readonly callbacks?: HashMap.HashMap<CallbackId, CallbackEntry>
  readonly pastCallbacks?: PastCallbacks
  readonly approvals?: HashSet.HashSet<string>
  readonly children?: HashMap.HashMap<SessionId, ChildEntry>
  readonly lastEnd?: TurnEnded
  readonly artifacts?: HashMap.HashMap<string, ArchivedResult>
  readonly reported?: Reported | null | undefined
}

/** `state` at `head`, with `change`, and `active` as the active turn. */
const next = (state: SessionState, head: number, active: ActiveTurn | undefined, change?: Change): SessionState => ({
  sessionId: state.sessionId,
  head,
  closed: change?.closed ?? state.closed,
  transcript: change?.transcript ?? state.transcript,
  ended: change?.ended ?? state.ended,
  callbacks: change?.callbacks ?? state.callbacks,
  pastCallbacks: change?.pastCallbacks ?? state.pastCallbacks,
  approvals: change?.approvals ?? state.approvals,
  active,
  children: change?.children ?? state.children,
  lastEnd: change?.lastEnd ?? state.lastEnd,
  artifacts: change?.artifacts ?? state.artifacts,
  reported: change?.reported !== undefined ? change.reported : state.reported
})

const activeWith = (
  active: ActiveTurn,
  operations: ReadonlyArray<OperationEntry>,
  steers: ReadonlyArray<string>,
  unanswered: ReadonlyArray<Model.ToolCall>,
  results: ReadonlyArray<ChildResultRecorded> = active.results,
  waitParked: boolean = active.waitParked
): ActiveTurn => ({ started: active.started, startedSeq: active.startedSeq, operations, steers, results, unanswered, waitParked })

const spawnerOf = (state: SessionState, childSessionId: SessionId): OperationId | undefined => {
  const child = HashMap.get(state.children, childSessionId)
  return child._tag === "Some" ? child.value.operationId : undefined
}

const aliasOf = (state: SessionState, childSessionId: SessionId): string | null => {
  const child = HashMap.get(state.children, childSessionId)
  return child._tag === "Some" ? child.value.alias : null
}

/** The child results an `agents.wait` call returned (its output's `results`, by turn id). */
const waitedTurns = (output: unknown): ReadonlySet<string> => {
  const wait = decodeWait(output)
  return new Set(Option.isSome(wait) ? wait.value.results.map((result) => result.turnId) : [])
}

/**
 * The callbacks of `state` once `turnId` ended: its own leave `callbacks`,
 * and those answered or cancelled (or expired) are kept as ids only; one
 * left open can take no answer any more, as a callback never opened.
 */
const pastTurn = (state: SessionState, turnId: TurnId): Pick<Change, "callbacks" | "pastCallbacks"> => {
  let { callbacks } = state
  let { answered, cancelled } = state.pastCallbacks
  for (const entry of HashMap.values(state.callbacks)) {
    if (entry.opened.turnId !== turnId) continue
    callbacks = HashMap.remove(callbacks, entry.opened.callbackId)
    if (entry.status === "answered") answered = IdSet.add(answered, entry.opened.callbackId)
    else if (entry.status !== "open") cancelled = IdSet.add(cancelled, entry.opened.callbackId)
  }
  return callbacks === state.callbacks ? {} : { callbacks, pastCallbacks: { answered, cancelled } }
}

/** A `children_awaited` record: the active turn parks in `agents.wait`, or stops waiting there. */
const childrenAwaited = (state: SessionState, body: ChildrenAwaited, seq: number): SessionState => {
  const active = state.active
  if (active === undefined || body.turnId !== active.started.turnId) return next(state, seq, active)
  return next(state, seq, activeWith(active, active.operations, active.steers, active.unanswered, active.results, body.parked))
}

/** A turn starts: the active turn, its message in the transcript. */
const turnStarted = (state: SessionState, body: TurnStarted, seq: number): SessionState =>
  next(state, seq, { started: body, startedSeq: seq, operations: [], steers: [], results: [], unanswered: [], waitParked: false }, {
    transcript: Transcript.append(state.transcript, { role: "user", content: body.text })
  })

/** A steer waits for the running turn's next model call; other inputs change nothing here. */
const inputApplied = (state: SessionState, body: InputApplied, seq: number): SessionState => {
  const active = state.active
  if (
    body.kind !== "steer" || active === undefined || body.turnId !== active.started.turnId ||
    body.detail === undefined || !("text" in body.detail)
  ) {
    return next(state, seq, active)
  }
  return next(state, seq, activeWith(active, active.operations, [...active.steers, body.detail.text], active.unanswered))
}

/** An operation of the active turn starts; a model call takes the steers and child results it was given. */
const operationStarted = (state: SessionState, body: OperationStarted, seq: number): SessionState => {
  const active = state.active
  if (active === undefined || body.turnId !== active.started.turnId) return next(state, seq, active)
  const entry: OperationEntry = {
    operationId: body.operationId,
    kind: body.kind,
    name: body.name,
    input: body.input,
    status: "started",
    isError: false,
    startedSeq: seq
  }
  let { results, steers, transcript } = { results: active.results, steers: active.steers, transcript: state.transcript }
  if (body.kind === "model" && "messages" in body.input) {
    // The steers and child results this model call took go in just before its reply.
    const taken = Math.min(body.input.steers ?? steers.length, steers.length)
    for (let i = 0; i < taken; i++) transcript = Transcript.append(transcript, { role: "user", content: steers[i]! })
    if (taken > 0) steers = steers.slice(taken)
    const took = Math.min(body.input.results ?? results.length, results.length)
    for (let i = 0; i < took; i++) {
      const result = results[i]!
      transcript = Transcript.append(transcript, { role: "user", content: childResultText(result, aliasOf(state, result.childSessionId)) })
    }
    if (took > 0) results = results.slice(took)
  }
  return next(state, seq, activeWith(active, [...active.operations, entry], steers, active.unanswered, results), { transcript })
}

/**
 * An operation of the active turn ends (or its outcome is unknown): its reply or result joins the
 * transcript. The step after a model call and after a tool call are functions of their own: the
 * fold's hottest step stays small, each path compiled apart.
 */
const operationEnded = (state: SessionState, body: OperationCompleted | OperationUnknown, seq: number): SessionState => {
  const active = state.active
  if (active === undefined || body.turnId !== active.started.turnId) return next(state, seq, active)
  const index = indexOfOperation(active.operations, body.operationId)
  if (index < 0) return next(state, seq, active)
  const operations = active.operations.slice()
  const entry = endedEntry(operations[index]!, body, seq)
  operations[index] = entry
  return entry.kind === "model" ? modelCallEnded(state, active, operations, entry, seq) : toolCallEnded(state, active, operations, entry, seq)
}

/** Where the operation `operationId` is in `operations` (-1: not there). */
const indexOfOperation = (operations: ReadonlyArray<OperationEntry>, operationId: OperationId): number => {
  // The operation that ends is nearly always the newest one.
  for (let i = operations.length - 1; i >= 0; i--) {
    if (operations[i]!.operationId === operationId) return i
  }
  return -1
}

const endedEntry = (entry: OperationEntry, body: OperationCompleted | OperationUnknown, seq: number): OperationEntry => {
  const completed = body._tag === "operation_completed"
  return {
    operationId: entry.operationId,
    kind: entry.kind,
    name: entry.name,
    input: entry.input,
    status: completed ? "completed" : "unknown",
    output: completed ? body.output : undefined,
    isError: completed ? body.isError : false,
    startedSeq: entry.startedSeq,
    endedSeq: seq
  }
}

/** A step of the fold after an operation `entry` of `active` ended (`operations`: with it ended). */
type EndedStep = (
  state: SessionState,
  active: ActiveTurn,
  operations: ReadonlyArray<OperationEntry>,
  entry: OperationEntry,
  seq: number
) => SessionState

/** A model call ended: a reply joins the transcript, and its tool calls wait for answers. */
const modelCallEnded: EndedStep = (state, active, operations, entry, seq) => {
  if (entry.status !== "completed" || entry.isError) return next(state, seq, activeWith(active, operations, active.steers, active.unanswered))
  const reply = replyOf(entry.output)
  const transcript = Transcript.append(state.transcript, {
    role: "assistant",
    content: reply.text,
    toolCalls: reply.toolCalls.length > 0 ? reply.toolCalls : undefined
  })
  return next(state, seq, activeWith(active, operations, active.steers, reply.toolCalls), { transcript, reported: reportOf(entry, reply) })
}

/** A tool call (or a compaction's summary call) ended: a tool's result (or the unknown outcome) answers its call. */
const toolCallEnded: EndedStep = (state, active, operations, entry, seq) => {
  const completed = entry.status === "completed"
  let transcript = state.transcript
  let unanswered = active.unanswered
  if ("callId" in entry.input) {
    transcript = appendResult(
      transcript,
      toolMessage(entry.input.callId, completed ? entry.output : unknownOutcome.output),
      { operationId: entry.operationId, turnId: active.started.turnId, seq, toolName: entry.name }
    )
    unanswered = withoutCall(unanswered, entry.input.callId)
  }
  return next(state, seq, activeWith(active, operations, active.steers, unanswered, resultsLeft(state, active, entry)), { transcript })
}

/** The child results left to the turn after a tool call: what `agents.wait` or an agent tool returned is taken. */
const resultsLeft = (state: SessionState, active: ActiveTurn, entry: OperationEntry): ReadonlyArray<ChildResultRecorded> => {
  const results = active.results
  if (entry.kind !== "tool" || results.length === 0) return results
  if (entry.name === WAIT_TOOL && entry.status === "completed") {
    const waited = waitedTurns(entry.output)
    return results.filter((result) => !waited.has(result.turnId))
  }
  // An agent tool's result is its child's.
  return results.filter((result) => spawnerOf(state, result.childSessionId) !== entry.operationId)
}

/** The active turn ends: every open tool call gets an answer, its callbacks become past ones. */
const turnEnded = (state: SessionState, body: TurnEnded, seq: number): SessionState => {
  const active = state.active
  let transcript = state.transcript
  if (active !== undefined && active.started.turnId === body.turnId) {
    for (const call of active.unanswered) transcript = Transcript.append(transcript, toolMessage(call.id, closingResult(call, body)))
    // Steers and child results no model call took still belong to the conversation.
    for (const content of active.steers) transcript = Transcript.append(transcript, { role: "user", content })
    for (const result of active.results) {
      transcript = Transcript.append(transcript, { role: "user", content: childResultText(result, aliasOf(state, result.childSessionId)) })
    }
  }
  const { callbacks, pastCallbacks } = pastTurn(state, body.turnId)
  return next(state, seq, active?.started.turnId === body.turnId ? undefined : active, {
    transcript,
    ended: IdSet.add(state.ended, body.turnId),
    lastEnd: body,
    ...(callbacks === undefined ? {} : { callbacks, pastCallbacks })
  })
}

/** A child is known by its id. */
const childSpawned = (state: SessionState, body: ChildSpawned, seq: number): SessionState =>
  next(state, seq, state.active, {
    children: HashMap.set(state.children, body.childSessionId, {
      childSessionId: body.childSessionId,
      alias: body.alias,
      agentName: body.agentName,
      operationId: body.operationId,
      last: undefined
    })
  })

/** A child's result waits for the running turn, or joins an idle session's transcript. */
const childResult = (state: SessionState, body: ChildResultRecorded, seq: number): SessionState => {
  const known = HashMap.get(state.children, body.childSessionId)
  const children = known._tag === "Some"
    ? HashMap.set(state.children, body.childSessionId, { ...known.value, last: body })
    : state.children
  const active = state.active
  // A running turn takes it at its next model call (or in `agents.wait`); an idle session's next turn reads it.
  if (active !== undefined) {
    return next(state, seq, activeWith(active, active.operations, active.steers, active.unanswered, [...active.results, body]), { children })
  }
  return next(state, seq, active, {
    children,
    transcript: Transcript.append(state.transcript, { role: "user", content: childResultText(body, aliasOf(state, body.childSessionId)) })
  })
}

/** A callback opens. */
const callbackOpened = (state: SessionState, body: CallbackOpened, seq: number, at: number): SessionState =>
  next(state, seq, state.active, {
    callbacks: HashMap.set(state.callbacks, body.callbackId, {
      opened: new OpenCallback({
        callbackId: body.callbackId,
        sessionId: state.sessionId,
        turnId: body.turnId,
        operationId: body.operationId,
        kind: body.kind,
        request: body.request,
        openedSeq: seq,
        openedAt: at
      }, true),
      toolName: body.request.toolName,
      status: "open",
      expiresAt: body.expiresAt
    })
  })

/** A callback of a running turn closes; an approval "for the session" approves its tool. */
const callbackResolved = (state: SessionState, body: CallbackResolved, seq: number): SessionState => {
  // Only a running turn's callbacks are resolved (an answer, or the turn's interrupt before its end).
  const known = HashMap.get(state.callbacks, body.callbackId)
  if (known._tag === "None") return next(state, seq, state.active)
  const entry = known.value
  return next(state, seq, state.active, {
    callbacks: HashMap.set(state.callbacks, body.callbackId, {
      opened: entry.opened,
      toolName: entry.toolName,
      status: body.resolution,
      result: body.result,
      expiresAt: entry.expiresAt
    }),
    approvals: entry.opened.kind === "approval" && body.resolution === "answered" && isSessionApproval(body.result)
      ? HashSet.add(state.approvals, entry.toolName)
      : state.approvals
  })
}

/** The session closes. */
const sessionClosed = (state: SessionState, _body: Closed, seq: number): SessionState =>
  next(state, seq, state.active, { closed: true })

/** The conversation is compacted, unless the plan was made on another one. */
const contextCompacted = (state: SessionState, body: ContextCompacted, seq: number): SessionState => {
  const transcript = Compaction.applyRecord(state.transcript, body)
  // Planned on another conversation than this one: nothing of it applies.
  if (transcript === state.transcript) return next(state, seq, state.active)
  let artifacts = state.artifacts
  for (const entry of body.archived ?? []) artifacts = HashMap.set(artifacts, entry.artifactId, entry)
  return next(state, seq, state.active, { transcript, artifacts, reported: null })
}

/** A final output was rejected: the model is told why. */
const outputRejected = (state: SessionState, body: OutputRejected, seq: number): SessionState => {
  const active = state.active
  if (active === undefined || body.turnId !== active.started.turnId) return next(state, seq, active)
  // A rejected `finish` call is answered with the problems; a rejected text reply is followed by them.
  let transcript = state.transcript
  const text = StructuredOutput.rejectionText(body.problems)
  const finish = active.unanswered.find((call) => call.name === FINISH)
  for (const call of active.unanswered) {
    const output = call === finish ? errorOutcome(text).output : errorOutcome("not run: the final output was rejected").output
    transcript = Transcript.append(transcript, toolMessage(call.id, output))
  }
  if (finish === undefined) transcript = Transcript.append(transcript, { role: "user", content: text })
  return next(state, seq, activeWith(active, active.operations, active.steers, [], active.results), { transcript })
}

/** Folds one record, stored at `seq` by a commit at `at`, onto `state`: one case per record kind. */
export const apply = (state: SessionState, body: RecordBody, seq: number, at: number): SessionState => {
  switch (body._tag) {
    case "turn_started": return turnStarted(state, body, seq)
    case "input_applied": return inputApplied(state, body, seq)
    case "operation_started": return operationStarted(state, body, seq)
    case "operation_completed":
    case "operation_unknown": return operationEnded(state, body, seq)
    case "turn_ended": return turnEnded(state, body, seq)
    case "child_spawned": return childSpawned(state, body, seq)
    case "child_result": return childResult(state, body, seq)
    case "children_awaited": return childrenAwaited(state, body, seq)
    case "callback_opened": return callbackOpened(state, body, seq, at)
    case "callback_resolved": return callbackResolved(state, body, seq)
    case "closed": return sessionClosed(state, body, seq)
    case "context_compacted": return contextCompacted(state, body, seq)
    case "output_rejected": return outputRejected(state, body, seq)
    case "session_created":
    case "renamed":
    case "archived":
    case "handoff":
    case "guardrail_checked": return next(state, seq, state.active)
  }
}

/** Folds the records of one commit (stored from `firstSeq`, at `at`). */
export const applyCommit = (
  state: SessionState,
  firstSeq: number,
  at: number,
  records: ReadonlyArray<RecordBody>
): SessionState => {
  let next = state
  for (let i = 0; i < records.length; i++) next = apply(next, records[i]!, firstSeq + i, at)
  return next
}

/** Folds a page of log records. */
export const fold = (state: SessionState, records: ReadonlyArray<LogRecord>): SessionState => {
  let next = state
  for (const record of records) next = apply(next, record.body, record.seq, record.at)
  return next
}

/** The messages the active turn's next model call takes: its waiting steers, then its waiting child results. */
export const waitingMessages = (state: SessionState): ReadonlyArray<Model.Message> => {
  const active = state.active
  if (active === undefined) return []
  const messages: Array<Model.Message> = active.steers.map((content) => ({ role: "user", content }))
  for (const result of active.results) {
    messages.push({ role: "user", content: childResultText(result, aliasOf(state, result.childSessionId)) })
  }
  return messages
}

/**
 * How many steers and child results wait for the active turn's next model
 * call, once the `pending` records (not committed yet) have taken theirs.
 */
export const waitingInputs = (state: SessionState, pending: ReadonlyArray<RecordBody>): number => {
  let steers = state.active?.steers.length ?? 0
  let results = state.active?.results.length ?? 0
  for (const record of pending) {
    if (record._tag === "operation_started" && record.kind === "model" && "messages" in record.input) {
      steers -= record.input.steers ?? steers
      results -= record.input.results ?? results
    }
  }
  return Math.max(0, steers) + Math.max(0, results)
}

/** How a callback of an ended turn was closed, when it was answered or cancelled (or expired). */
export const pastResolution = (state: SessionState, callbackId: CallbackId): "answered" | "cancelled" | undefined =>
  IdSet.has(state.pastCallbacks.answered, callbackId)
    ? "answered"
    : IdSet.has(state.pastCallbacks.cancelled, callbackId)
    ? "cancelled"
    : undefined

/** The callbacks of `turnId` that are still open, in the order they opened. */
export const openCallbacksOf = (state: SessionState, turnId: TurnId): ReadonlyArray<CallbackEntry> => {
  const open: Array<CallbackEntry> = []
  for (const entry of HashMap.values(state.callbacks)) {
    if (entry.status === "open" && entry.opened.turnId === turnId) open.push(entry)
  }
  return open.sort((a, b) => a.opened.openedSeq - b.opened.openedSeq)
}

/** Every callback of `turnId`, open or closed, in the order they opened. */
export const callbacksOf = (state: SessionState, turnId: TurnId): ReadonlyArray<CallbackEntry> => {
  const all: Array<CallbackEntry> = []
  for (const entry of HashMap.values(state.callbacks)) if (entry.opened.turnId === turnId) all.push(entry)
  return all.sort((a, b) => a.opened.openedSeq - b.opened.openedSeq)
}

/** The active turn's operations as the receipts a resumed turn reuses. */
export const receiptsOf = (state: SessionState): ReadonlyArray<OperationReceipt> =>
  (state.active?.operations ?? []).map((entry) =>
    Trusted.make(OperationReceipt, {
      operationId: entry.operationId,
      sessionId: state.sessionId,
      turnId: state.active!.started.turnId,
      kind: entry.kind,
      name: entry.name,
      status: entry.status,
      input: entry.input,
      output: entry.output,
      isError: entry.isError,
      startedSeq: entry.startedSeq,
      endedSeq: entry.endedSeq
    })
  )
