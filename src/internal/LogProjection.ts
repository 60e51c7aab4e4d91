/**
 * How appended records change a session's derived state: its active turn,
 * open callbacks, title, archived and closed flags, and operation receipts.
 * Every store layer applies the same projection inside its append transaction.
 *
 * @since 0.1.0
 */
import type { CallbackId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import { OpenCallback } from "../schema/Callback.js"
import type { OperationKind, OperationStatus } from "../schema/Operation.js"
import type { RecordBody } from "../schema/Record.js"
import type { SessionStatus } from "../schema/Session.js"

/** The columns of a session that the log determines. */
export interface Head {
  readonly headSeq: number
  readonly activeTurnId: TurnId | null
  /** What the active turn waits on: its open callbacks, plus one while it is parked in `agents.wait` (`children_awaited`). */
  readonly openCallbacks: number
  readonly title: string | null
  readonly archived: boolean
  readonly closed: boolean
}

/** A change to one operation receipt: a start, an end, or both. */
export interface OperationChange {
  readonly operationId: OperationId
  readonly turnId: TurnId
  readonly start?: {
    readonly kind: OperationKind
    readonly name: string
    readonly input: unknown
    readonly seq: number
  }
  readonly end?: {
    readonly status: Exclude<OperationStatus, "started">
    readonly output: unknown
    readonly isError: boolean
    readonly seq: number
  }
}

/** Everything a batch of records changes besides the log itself. */
export interface Projection {
  readonly head: Head
  readonly operations: ReadonlyArray<OperationChange>
  readonly callbacksOpened: ReadonlyArray<OpenCallback>
  readonly callbacksClosed: ReadonlyArray<CallbackId>
}

/** The session status a head implies. */
export const statusOf = (head: Pick<Head, "closed" | "activeTurnId" | "openCallbacks">): SessionStatus =>
  head.closed ? "closed" : head.activeTurnId === null ? "idle" : head.openCallbacks > 0 ? "waiting" : "running"

/**
 * Projects `records`, to be stored at `head.headSeq + 1 …`, onto `head`.
 * Callbacks opened and closed in the same batch cancel out; `head.openCallbacks`
 * does not yet count `callbacksClosed`, which the store subtracts once it knows
 * how many of them were really open.
 */
export const project = (
  sessionId: SessionId,
  head: Head,
  records: ReadonlyArray<RecordBody>,
  at: number
): Projection => {
  let { activeTurnId, archived, closed, openCallbacks, title } = head
  const operations = new Map<OperationId, { -readonly [K in keyof OperationChange]: OperationChange[K] }>()
  const opened = new Map<CallbackId, OpenCallback>()
  const closedCallbacks: Array<CallbackId> = []
  let seq = head.headSeq
  for (const record of records) {
    seq++
    switch (record._tag) {
      case "turn_started":
        activeTurnId = record.turnId
        break
      case "turn_ended":
        if (activeTurnId === record.turnId) activeTurnId = null
        break
      case "operation_started":
        operations.set(record.operationId, {
          operationId: record.operationId,
          turnId: record.turnId,
          start: { kind: record.kind, name: record.name, input: record.input, seq }
        })
        break
      case "operation_completed":
      case "operation_unknown": {
        const end = record._tag === "operation_completed"
          ? { status: "completed" as const, output: record.output, isError: record.isError, seq }
          : { status: "unknown" as const, output: undefined, isError: false, seq }
        const existing = operations.get(record.operationId)
        if (existing) existing.end = end
        else operations.set(record.operationId, { operationId: record.operationId, turnId: record.turnId, end })
        break
      }
      case "callback_opened":
        opened.set(
          record.callbackId,
          new OpenCallback({
            callbackId: record.callbackId,
            sessionId,
            turnId: record.turnId,
            operationId: record.operationId,
            kind: record.kind,
            request: record.request,
            openedSeq: seq,
            openedAt: at
          })
        )
        openCallbacks++
        break
      case "callback_resolved":
        if (opened.delete(record.callbackId)) openCallbacks--
        else closedCallbacks.push(record.callbackId)
        break
      case "children_awaited":
        // Counted with the open callbacks: both make the session `waiting`. Every park is ended by one record
        // (the wait's return, or the interrupt's), so the count is exact without knowing the turn here.
        openCallbacks += record.parked ? 1 : -1
        break
      case "renamed":
        title = record.title
        break
      case "archived":
        archived = record.archived
        break
      case "closed":
        closed = true
        break
      default:
        break
    }
  }
  return {
    head: { headSeq: seq, activeTurnId, archived, closed, openCallbacks, title },
    operations: [...operations.values()],
    callbacksOpened: [...opened.values()],
    callbacksClosed: closedCallbacks
  }
}
