/**
 * The statements of an inbox admission: a plain push, and an answer's (a push
 * guarded by the first-answer-wins rule on the callback's row).
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import { Conflict, SessionClosed, SessionNotFound, StaleCallback } from "../../schema/Errors.js"
import { type InputId, type OperationId, type SessionId, type TurnId } from "../../schema/Ids.js"
import { Admission, type CallbackAnswer } from "../../schema/Inbox.js"
import * as Trusted from "../../schema/Trusted.js"
import { answerRefusal } from "../../services/SessionStore.js"
import * as SqlStatements from "./SqlStatements.js"
import type { Clock } from "./Dialect.js"
import type { Step, Steps } from "./Steps.js"

const pushHeadText = SqlStatements.shaped((lockRow: string) =>
  `SELECT closed, inbox_head, active_turn_id FROM troupe_sessions WHERE id = ? ${lockRow}`
)

const pushText = SqlStatements.shaped((clockText: string) =>
  `INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at)
    VALUES (?, ?, ?, ?, ${clockText})`
)

/** The earlier admission of `inputId` in a session's inbox: a duplicate, `Conflict` when its content differs. */
export function* earlierAdmission(
  sessionId: SessionId,
  inputId: InputId,
  print: string
): Generator<Step, Either.Either<Admission, Conflict> | undefined, ReadonlyArray<never>> {
  const known: ReadonlyArray<{ position: number | string; command: string }> = yield {
    text: `SELECT position, command FROM troupe_inbox WHERE session_id = ? AND input_id = ?`,
    params: [sessionId, inputId]
  }
  if (known.length === 0) return undefined
  if (known[0]!.command !== print) {
    return Either.left(new Conflict({ entity: "input", key: inputId, reason: "inputId reused with a different command" }))
  }
  return Either.right(new Admission({ sessionId, inputId, position: Number(known[0]!.position), duplicate: true }, true))
}

/**
 * A check a push runs under the session's lock, after its duplicate and
 * closed checks, on the locked row: a refusal, or undefined to admit (it may
 * write too: the push's transaction is its own).
 */
export type PushGuard<E> = (
  row: { readonly active_turn_id: string | null }
) => Generator<Step, E | undefined, ReadonlyArray<never>>

/** The statements of a push of the command `inputId` whose canonical JSON is `print`, checked by `guard` if given. */
export function* pushSteps<E = never>(
  sessionId: SessionId,
  inputId: InputId,
  print: string,
  clock: Clock,
  lockRow: string,
  guard?: PushGuard<E>
): Steps<Admission, SessionNotFound | Conflict | SessionClosed | E> {
  const rows: ReadonlyArray<{ closed: number; inbox_head: number | string; active_turn_id: string | null }> = yield {
    text: pushHeadText(lockRow),
    params: [sessionId]
  }
  if (rows.length === 0) return Either.left(new SessionNotFound({ sessionId }))
  const known: ReadonlyArray<{ position: number | string; command: string }> = yield {
    text: `SELECT position, command FROM troupe_inbox WHERE session_id = ? AND input_id = ?`,
    params: [sessionId, inputId]
  }
  if (known.length > 0) {
    if (known[0]!.command !== print) {
      return Either.left(new Conflict({ entity: "input", key: inputId, reason: "inputId reused with a different command" }))
    }
    return Either.right(
      new Admission({ sessionId, inputId, position: Number(known[0]!.position), duplicate: true }, true)
    )
  }
  if (Number(rows[0]!.closed) === 1) return Either.left(new SessionClosed({ sessionId }))
  if (guard !== undefined) {
    const refused = yield* guard(rows[0]!)
    if (refused !== undefined) return Either.left(refused)
  }
  const position = Number(rows[0]!.inbox_head) + 1
  yield {
    text: pushText(clock.text),
    params: [sessionId, position, inputId, print, ...clock.params]
  }
  yield {
    text: `UPDATE troupe_sessions SET inbox_head = ?, ready_count = ready_count + 1 WHERE id = ?`,
    params: [position, sessionId]
  }
  return Either.right(Trusted.make(Admission, { sessionId, inputId, position, duplicate: false }))
}

/**
 * The statements of an answer's admission (see `SessionStore.admitAnswer`):
 * a push guarded by the admission rule, which marks the callback's row with
 * the answer's input id. `closed` when the callback is not open: the caller
 * reads the log for the reason.
 */
export function* answerSteps(
  sessionId: SessionId,
  answer: CallbackAnswer,
  print: string,
  clock: Clock,
  lockRow: string
): Steps<Admission, SessionNotFound | Conflict | SessionClosed | StaleCallback | "closed"> {
  const callbackId = answer.callbackId
  return yield* pushSteps<StaleCallback | "closed">(sessionId, answer.inputId, print, clock, lockRow, function*(row) {
    const open: ReadonlyArray<{ turn_id: string; operation_id: string; answer_input_id: string | null }> = yield {
      text: `SELECT turn_id, operation_id, answer_input_id FROM troupe_callbacks WHERE callback_id = ? AND session_id = ?`,
      params: [callbackId, sessionId]
    }
    const target = open[0] && {
      turnId: open[0].turn_id as TurnId,
      operationId: open[0].operation_id as OperationId,
      answered: open[0].answer_input_id !== null
    }
    const refusal = answerRefusal(target, row.active_turn_id as TurnId | null, answer)
    if (refusal === "closed") return refusal
    if (refusal !== undefined) return new StaleCallback({ sessionId, callbackId, reason: refusal })
    // The session's lock already serialises answers; the condition keeps the rule on the row itself.
    const marked: ReadonlyArray<unknown> = yield {
      text: `UPDATE troupe_callbacks SET answer_input_id = ?
      WHERE callback_id = ? AND session_id = ? AND answer_input_id IS NULL RETURNING callback_id`,
      params: [answer.inputId, callbackId, sessionId]
    }
    return marked.length === 0 ? new StaleCallback({ sessionId, callbackId, reason: "answered" }) : undefined
  })
}
