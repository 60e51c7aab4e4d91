/**
 * What a session does with each inbox command, decided from its state alone:
 * the records to append, the inputs the commit consumes, the reply for the
 * sender, and what the actor must do around the commit (interrupt the running
 * turn first; start a turn or resume a parked callback after). Pure: the
 * actor runs the outcome, tests read it.
 *
 * @since 0.1.0
 */
import * as HashMap from "effect/HashMap"
import { SessionBusy, StaleCallback, TurnMismatch } from "../schema/Errors.js"
import type { InputId, TurnId } from "../schema/Ids.js"
import type { CallbackAnswer, Command, Control, Interrupt, Message, Steer } from "../schema/Inbox.js"
import type { Refusal, Refusals } from "../services/SessionHost.js"
import type { BusyPolicy } from "../schema/Policy.js"
import {
  Archived,
  CallbackResolved,
  ChildResultRecorded,
  ChildrenAwaited,
  Closed,
  InputApplied,
  type RecordBody,
  Renamed,
  TurnEnded,
  TurnStarted
} from "../schema/Record.js"
import type { Usage } from "../schema/Budget.js"
import * as Trusted from "../schema/Trusted.js"
import * as IdSet from "./IdSet.js"
import * as SessionState from "./SessionState.js"

/** What the sender of a command is told; `E` is what it may be refused with. */
export type Reply<E extends Refusal = Refusal> =
  /** A message (or a steer to an idle session) started this turn. */
  | { readonly _tag: "Started"; readonly turnId: TurnId }
  /** A message waits behind the running turn. */
  | { readonly _tag: "Queued" }
  /** Text was delivered to this running turn. */
  | { readonly _tag: "Steered"; readonly turnId: TurnId }
  /** An interrupt stopped this turn, or found it already ended. */
  | { readonly _tag: "Interrupted"; readonly turnId: TurnId; readonly outcome: "interrupted" | "already_ended" }
  /** A control command, an answer or a child result took effect. */
  | { readonly _tag: "Applied" }
  /** The command was refused. */
  | { readonly _tag: "Refused"; readonly error: E }

/** A decision on one command, which may be refused with `E`. */
export interface Outcome<E extends Refusal = Refusal> {
  /** Interrupt this running turn before the commit; the commit then begins with `interruptRecords`. */
  readonly interrupt?: { readonly turnId: TurnId; readonly reason: string } | undefined
  readonly records: ReadonlyArray<RecordBody>
  readonly consumes: ReadonlyArray<InputId>
  readonly reply: Reply<E>
  /** After the commit: run the turn this commit started. */
  readonly start?: TurnStarted | undefined
  /** After the commit: hand this answer to the turn parked on the callback. */
  readonly resume?: { readonly callbackId: CallbackAnswer["callbackId"]; readonly result: unknown } | undefined
}

/** What a decision needs beside the state: facts of the running actor. */
export interface Context {
  readonly busyPolicy: BusyPolicy
  /** The active turn waits for the user (`wait_user`): a message is its answer. */
  readonly waitingForUser: boolean
  /** The id a turn this command starts gets. */
  readonly nextTurnId: TurnId
}

const applied = (
  inputId: InputId,
  kind: InputApplied["kind"],
  turnId?: TurnId,
  detail?: InputApplied["detail"]
) => new InputApplied({ inputId, kind, turnId, detail }, true)

const begin = (command: Message | Steer, context: Context, before: Partial<Outcome> = {}): Outcome<never> => {
  const started = Trusted.make(TurnStarted, {
    turnId: context.nextTurnId,
    inputId: command.inputId,
    text: command.text,
    run: command._tag === "message" ? command.run : undefined,
    excludeFromAnalytics: command._tag === "message" ? command.excludeFromAnalytics : undefined
  })
  return {
    interrupt: before.interrupt,
    records: [...(before.records ?? []), started],
    consumes: [command.inputId],
    reply: { _tag: "Started", turnId: started.turnId },
    start: started
  }
}

const steer = (state: SessionState.SessionState, command: Message | Steer, context: Context): Outcome<never> => {
  const active = state.active
  if (active === undefined) return begin(command, context)
  const turnId = active.started.turnId
  return {
    records: [applied(command.inputId, "steer", turnId, { text: command.text })],
    consumes: [command.inputId],
    reply: { _tag: "Steered", turnId }
  }
}

const message = (state: SessionState.SessionState, command: Message, context: Context): Outcome<SessionBusy> => {
  const active = state.active
  if (active === undefined) return begin(command, context)
  if (context.waitingForUser) return steer(state, command, context)
  const turnId = active.started.turnId
  switch (context.busyPolicy) {
    case "queue":
      return { records: [], consumes: [], reply: { _tag: "Queued" } }
    case "steer":
      return steer(state, command, context)
    case "reject":
      return {
        records: [applied(command.inputId, "message", turnId, { rejected: "busy" })],
        consumes: [command.inputId],
        reply: { _tag: "Refused", error: new SessionBusy({ sessionId: state.sessionId, activeTurnId: turnId }) }
      }
    case "interrupt":
      return begin(command, context, { interrupt: { turnId, reason: "superseded by a new message" } })
  }
}

const interrupt = (state: SessionState.SessionState, command: Interrupt): Outcome<TurnMismatch> => {
  const active = state.active
  const expected = command.expectedTurnId
  if (active !== undefined && active.started.turnId === expected) {
    return {
      interrupt: { turnId: expected, reason: command.reason ?? "interrupted" },
      records: [applied(command.inputId, "interrupt", expected, { outcome: "interrupted" })],
      consumes: [command.inputId],
      reply: { _tag: "Interrupted", turnId: expected, outcome: "interrupted" }
    }
  }
  const raced = IdSet.has(state.ended, expected)
  return {
    records: [applied(command.inputId, "interrupt", expected, { outcome: raced ? "already_ended" : "turn_mismatch" })],
    consumes: [command.inputId],
    reply: raced
      ? { _tag: "Interrupted", turnId: expected, outcome: "already_ended" }
      : {
        _tag: "Refused",
        error: new TurnMismatch({
          sessionId: state.sessionId,
          expectedTurnId: expected,
          activeTurnId: active?.started.turnId ?? null
        })
      }
  }
}

/** Why an answer that is not the one taking effect is stale. */
const staleReason = (
  state: SessionState.SessionState,
  command: CallbackAnswer
): StaleCallback["reason"] | undefined => {
  const known = HashMap.get(state.callbacks, command.callbackId)
  if (known._tag === "None") return SessionState.pastResolution(state, command.callbackId) ?? "not_open"
  const entry = known.value
  switch (entry.status) {
    case "answered":
      return "answered"
    case "cancelled":
    case "expired":
      return "cancelled"
    case "open":
      // Only a running turn takes answers: a callback left open by a turn that is gone takes none.
      if (state.active?.started.turnId !== entry.opened.turnId) return "not_open"
      return entry.opened.turnId !== command.turnId || entry.opened.operationId !== command.operationId
        ? "mismatch"
        : undefined
  }
}

/** The first answer admitted wins: it closes the callback and resumes its turn; any other is stale. */
const answer = (state: SessionState.SessionState, command: CallbackAnswer): Outcome<StaleCallback> => {
  const stale = staleReason(state, command)
  if (stale !== undefined) {
    return {
      records: [applied(command.inputId, "callback_answer", command.turnId, { callbackId: command.callbackId, stale })],
      consumes: [command.inputId],
      reply: {
        _tag: "Refused",
        error: new StaleCallback({ sessionId: state.sessionId, callbackId: command.callbackId, reason: stale })
      }
    }
  }
  return {
    records: [
      new CallbackResolved({
        callbackId: command.callbackId,
        turnId: command.turnId,
        // The turn's own answer at an approval's deadline, admitted before any other.
        resolution: command.expired === true ? "expired" : "answered",
        result: command.result
      }, true),
      applied(command.inputId, "callback_answer", command.turnId)
    ],
    consumes: [command.inputId],
    reply: { _tag: "Applied" },
    resume: { callbackId: command.callbackId, result: command.result }
  }
}

const control = (state: SessionState.SessionState, command: Control): Outcome<never> => {
  const done = applied(command.inputId, "control")
  const action = command.action
  switch (action._tag) {
    case "rename":
      return { records: [new Renamed({ title: action.title }, true), done], consumes: [command.inputId], reply: { _tag: "Applied" } }
    case "archive":
      return {
        records: [new Archived({ archived: action.archived }, true), done],
        consumes: [command.inputId],
        reply: { _tag: "Applied" }
      }
    case "close":
      return {
        interrupt: state.active === undefined ? undefined : { turnId: state.active.started.turnId, reason: "session closed" },
        records: [new Closed({}, true), done],
        consumes: [command.inputId],
        reply: { _tag: "Applied" }
      }
  }
}

const decideAny = (state: SessionState.SessionState, command: Command, context: Context): Outcome => {
  if (state.closed) {
    // Admitted just before the close: recorded and consumed, never acted on.
    return {
      records: [applied(command.inputId, command._tag, undefined, { ignored: "session closed" })],
      consumes: [command.inputId],
      reply: { _tag: "Applied" }
    }
  }
  switch (command._tag) {
    case "message":
      return message(state, command, context)
    case "steer":
      return steer(state, command, context)
    case "interrupt":
      return interrupt(state, command)
    case "callback_answer":
      return answer(state, command)
    case "control":
      return control(state, command)
    case "child_result":
      // Recorded: a running turn takes it at its next model call (or in agents.wait), an idle session's next turn reads it.
      return {
        records: [
          new ChildResultRecorded({
            childSessionId: command.childSessionId,
            turnId: command.turnId,
            outcome: command.outcome,
            output: command.output,
            publicFinalMessage: command.publicFinalMessage,
            failureCode: command.failureCode,
            reason: command.reason,
            usage: command.usage
          }, true)
        ],
        consumes: [command.inputId],
        reply: { _tag: "Applied" }
      }
  }
}

/**
 * Decides what `command` does to a session in `state`. A command of kind `K`
 * is refused only with `Refusals[K]` (each case above is typed so).
 */
export const decide = <C extends Command>(
  state: SessionState.SessionState,
  command: C,
  context: Context
): Outcome<Refusals[C["_tag"]]> => decideAny(state, command, context) as Outcome<Refusals[C["_tag"]]>

/**
 * The records that end an interrupted turn: its open callbacks cancelled,
 * then its `turn_ended` with the usage it reached (which only the running
 * turn knows, so the actor reads it once the turn has stopped).
 */
export const interruptRecords = (
  state: SessionState.SessionState,
  turnId: TurnId,
  reason: string,
  usage: Usage
): ReadonlyArray<RecordBody> => [
  ...SessionState.openCallbacksOf(state, turnId).map((entry) =>
    new CallbackResolved({ callbackId: entry.opened.callbackId, turnId, resolution: "cancelled" }, true)
  ),
  // A turn parked in `agents.wait` stops waiting: the session is `waiting` no more.
  ...(state.active?.started.turnId === turnId && state.active.waitParked ? [new ChildrenAwaited({ turnId, parked: false }, true)] : []),
  Trusted.make(TurnEnded, { turnId, outcome: "interrupted", reason, usage })
]
