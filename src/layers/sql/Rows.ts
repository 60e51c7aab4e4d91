/**
 * The SQL store's rows and their codecs: what `troupe_sessions`,
 * `troupe_operations` and `troupe_callbacks` hold, and how a row becomes a
 * `Session`, a receipt or an open callback and back.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Agent } from "../../schema/Agent.js"
import { Budgets } from "../../schema/Budget.js"
import { OpenCallback } from "../../schema/Callback.js"
import { type SessionId, type TurnId } from "../../schema/Ids.js"
import { type Message } from "../../schema/Inbox.js"
import { Lease } from "../../schema/Lease.js"
import { OperationReceipt } from "../../schema/Operation.js"
import { SubagentPolicy } from "../../schema/Policy.js"
import { Principal } from "../../schema/Principal.js"
import { Session } from "../../schema/Session.js"
import * as Trusted from "../../schema/Trusted.js"
import { commandOf, commandText, decodeCommand, encodeCommand } from "../../internal/CommandText.js"
import { type OperationChange, statusOf } from "../../internal/LogProjection.js"

export interface SessionRow {
  readonly id: string
  readonly principal: string
  readonly agent: string
  readonly parent_id: string | null
  readonly root_id: string
  readonly path: string
  readonly agent_path: string
  readonly alias: string | null
  readonly title: string | null
  readonly archived: number
  readonly closed: number
  readonly active_turn_id: string | null
  readonly open_callbacks: number
  readonly busy_policy: string
  readonly budgets: string | null
  readonly subagent_policy: string | null
  readonly metadata: string
  readonly fingerprint: string
  readonly head_seq: number | string
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly tenant: string
}

export const decodeOperation = Schema.decodeUnknown(OperationReceipt)

export const decodeCallback = Schema.decodeUnknown(OpenCallback)

export { commandOf, commandText, decodeCommand, encodeCommand }


export const encodeBudgets = Schema.encodeSync(Budgets)

export const encodePolicy = Schema.encodeSync(SubagentPolicy)

export const json = (text: string | null): unknown => (text === null ? undefined : JSON.parse(text))

const jsonOrNull = (value: unknown): string | null => (value === undefined ? null : JSON.stringify(value))

export const sessionColumns = `id, principal, agent, parent_id, root_id, path, agent_path, alias, title, archived, closed,
  active_turn_id, open_callbacks, busy_policy, budgets, subagent_policy, metadata, fingerprint, head_seq,
  created_at, updated_at, tenant`

export interface OperationRow {
  readonly operation_id: string
  readonly turn_id: string
  readonly kind: string
  readonly name: string
  readonly status: string
  readonly input: string | null
  readonly output: string | null
  readonly is_error: number
  readonly started_seq: number | string
  readonly ended_seq: number | string | null
}

export interface CallbackRow {
  readonly callback_id: string
  readonly turn_id: string
  readonly operation_id: string
  readonly kind: string
  readonly request: string
  readonly opened_seq: number | string
  readonly opened_at: number | string
}

/**
 * Decodes JSON column text through `schema`, remembering recent results:
 * sessions of one agent share its frozen definition, and decoding an `Agent`
 * is the costliest part of reading a session row.
 */
const cachedDecoder = <A, I>(schema: Schema.Schema<A, I>, capacity = 512) => {
  const decode = Schema.decodeUnknownSync(schema)
  const cache = new Map<string, A>()
  return (text: string): A => {
    let value = cache.get(text)
    if (value === undefined) {
      value = decode(JSON.parse(text))
      if (cache.size >= capacity) cache.clear()
      cache.set(text, value)
    }
    return value
  }
}

const agentOf = cachedDecoder(Agent)

const principalOf = cachedDecoder(Principal)

const budgetsOf = cachedDecoder(Budgets)

const subagentPolicyOf = cachedDecoder(SubagentPolicy)

// The JSON columns go through their schemas (cached); the scalar columns were
// written by this store from validated values. A row that does not decode is a defect.
export const sessionOf = (row: SessionRow): Session =>
      Trusted.make(Session, {
        id: row.id as SessionId,
        principal: principalOf(row.principal),
        agent: agentOf(row.agent),
        parentId: row.parent_id as SessionId | null,
        rootId: row.root_id as SessionId,
        agentPath: JSON.parse(row.agent_path),
        alias: row.alias,
        title: row.title,
        archived: Number(row.archived) === 1,
        status: statusOf({
          closed: Number(row.closed) === 1,
          activeTurnId: row.active_turn_id as TurnId | null,
          openCallbacks: Number(row.open_callbacks)
        }),
        activeTurnId: row.active_turn_id as TurnId | null,
        busyPolicy: row.busy_policy as Session["busyPolicy"],
        budgets: row.budgets === null ? null : budgetsOf(row.budgets),
        subagentPolicy: row.subagent_policy === null ? null : subagentPolicyOf(row.subagent_policy),
        metadata: JSON.parse(row.metadata),
        headSeq: Number(row.head_seq),
        createdAt: Number(row.created_at),
        updatedAt: Number(row.updated_at)
      })

export const toSession = (row: SessionRow) => Effect.sync(() => sessionOf(row))

/** The columns of `troupe_operations` an append writes, in the order `operationRow` lists them. */
export const operationColumns = [
  "operation_id",
  "session_id",
  "turn_id",
  "kind",
  "name",
  "status",
  "input",
  "output",
  "is_error",
  "started_seq",
  "ended_seq"
] as const

/** The `troupe_operations` row a change upserts (an end without a start inserts a placeholder start). */
export const operationRow = (
  sessionId: SessionId,
  change: OperationChange
): { readonly [K in typeof operationColumns[number]]: unknown } => ({
  operation_id: change.operationId,
  session_id: sessionId,
  turn_id: change.turnId,
  kind: change.start?.kind ?? "tool",
  name: change.start?.name ?? "",
  status: change.end?.status ?? "started",
  input: jsonOrNull(change.start?.input),
  output: jsonOrNull(change.end?.output),
  is_error: change.end?.isError ? 1 : 0,
  started_seq: change.start?.seq ?? change.end!.seq,
  ended_seq: change.end?.seq ?? null
})

/** The columns of `troupe_callbacks`, in the order `callbackRow` lists them. */
export const callbackColumns = [
  "callback_id",
  "session_id",
  "turn_id",
  "operation_id",
  "kind",
  "request",
  "opened_seq",
  "opened_at"
] as const

/** The `troupe_callbacks` row of an opened callback. */
export const callbackRow = (
  callback: OpenCallback
): { readonly [K in typeof callbackColumns[number]]: unknown } => ({
  callback_id: callback.callbackId,
  session_id: callback.sessionId,
  turn_id: callback.turnId,
  operation_id: callback.operationId,
  kind: callback.kind,
  request: JSON.stringify(callback.request ?? null),
  opened_seq: callback.openedSeq,
  opened_at: callback.openedAt
})

/** The lease an `acquireStep` row stands for. */
export const leaseOf = (sessionId: SessionId, owner: string, row: { readonly lease_epoch: number | string; readonly lease_expires_at: number | string }) =>
  Trusted.make(Lease, { sessionId, owner, epoch: Number(row.lease_epoch), expiresAt: Number(row.lease_expires_at) })

/** A message as the inbox stores it (canonical JSON): a later push of the same message is its duplicate. */
export const encodeMessage = (message: Message): string => commandText(message)
