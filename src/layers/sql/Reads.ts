/**
 * The SQL store's reads: sessions (one, a listing, children, a tree, a child
 * by alias), the log and inbox, and the operation and callback projections.
 * Each is one statement or a few, outside any write transaction.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { InvalidInput, SessionNotFound } from "../../schema/Errors.js"
import { type SessionId, type TurnId } from "../../schema/Ids.js"
import { Principal } from "../../schema/Principal.js"
import { ChildEntry, ChildPage, maxTreeNodes, SessionPage, SessionTree, TreeNode } from "../../schema/Session.js"
import * as ListCursor from "../../internal/ListCursor.js"
import { tenantOf } from "../../internal/SessionDraft.js"
import { type ListSessions, type PageRequest } from "../../services/SessionStore.js"
import * as SqlStatements from "./SqlStatements.js"
import {
  type CallbackRow,
  decodeCallback,
  decodeOperation,
  json,
  type OperationRow,
  sessionColumns,
  sessionOf,
  type SessionRow,
  toSession
} from "./Rows.js"
import { inboxItemsOf, type InboxRow, inboxStep, logPageOf, type LogRow, logStep } from "./LogSteps.js"
import { unavailable } from "./Unavailable.js"
import type { Runner } from "./Runner.js"

/** Sessions looked up by one `withPendingInbox` statement. */
const pendingChunk = 500

/** The reads of a store run by `runner`. */
export const make = (runner: Runner) => {
  const { query, sessionById } = runner

  const get = Effect.fnUntraced(function*(sessionId: SessionId) {
    const rows = yield* sessionById(sessionId)
    if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
    return yield* toSession(rows[0]!)
  }, unavailable("get"))

  /** The anchor of a listing when it belongs to `principal`'s tenancy. */
  const anchorOf = (principal: Principal, sessionId: SessionId) =>
    Effect.flatMap(
      query<SessionRow & { readonly path: string }>(
        `SELECT ${sessionColumns}, path FROM troupe_sessions WHERE id = ? AND tenant = ?`,
        [sessionId, tenantOf(principal)]
      ),
      (rows) => (rows.length === 0 ? Effect.fail(new SessionNotFound({ sessionId })) : Effect.succeed(rows[0]!))
    )

  /** A newest-first page of the sessions `clauses` select, bound to the listing `of`. */
  const pageOf = (
    clauses: Array<string>,
    params: Array<unknown>,
    before: SessionId | undefined,
    limit: number,
    of: string
  ) =>
    Effect.gen(function*() {
      if (before !== undefined) {
        clauses.push("id < ?")
        params.push(before)
      }
      params.push(limit + 1)
      const rows = yield* query<SessionRow>(
        `SELECT ${sessionColumns} FROM troupe_sessions WHERE ${clauses.join(" AND ")} ORDER BY id DESC LIMIT ?`,
        params
      )
      const items = yield* Effect.forEach(rows.slice(0, limit), toSession)
      return { items, nextCursor: rows.length > limit ? ListCursor.encode(items[items.length - 1]!.id, of) : undefined }
    })

  const list = Effect.fnUntraced(function*(request: ListSessions) {
    const limit = yield* ListCursor.limitOf(request.limit)
    const includeArchived = request.includeArchived === true
    const of = ListCursor.listing(request.principal, { _tag: "list", scope: request.scope, includeArchived })
    const before = yield* ListCursor.positionOf(request.cursor, of)
    const clauses = ["tenant = ?"]
    const params: Array<unknown> = [tenantOf(request.principal)]
    if (request.scope === "roots") {
      clauses.push("parent_id IS NULL")
    } else {
      const anchorId = "children" in request.scope ? request.scope.children : request.scope.tree
      const anchor = yield* anchorOf(request.principal, anchorId)
      if ("children" in request.scope) {
        clauses.push("parent_id = ?")
        params.push(anchorId)
      } else {
        // Descendants share the anchor's root and extend its path; the path
        // is made of ids, so it holds no LIKE wildcards.
        clauses.push("root_id = ?", "path LIKE ?", "id <> ?")
        params.push(anchor.root_id, anchor.path + "%", anchorId)
      }
    }
    if (!includeArchived) clauses.push("archived = 0")
    const page = yield* pageOf(clauses, params, before, limit, of)
    return new SessionPage(page.nextCursor === undefined ? { items: page.items } : page, true)
  }, unavailable("list"))

  const children = Effect.fnUntraced(function*(principal: Principal, sessionId: SessionId, request: PageRequest = {}) {
    const limit = yield* ListCursor.limitOf(request.limit)
    const of = ListCursor.listing(principal, { _tag: "children", sessionId })
    const before = yield* ListCursor.positionOf(request.cursor, of)
    yield* anchorOf(principal, sessionId)
    const page = yield* pageOf(["tenant = ?", "parent_id = ?"], [tenantOf(principal), sessionId], before, limit, of)
    const items = page.items.map((session) =>
      new ChildEntry({ session, alias: session.alias, agent: session.agent.name, agentPath: session.agentPath }, true)
    )
    return new ChildPage(page.nextCursor === undefined ? { items } : { items, nextCursor: page.nextCursor }, true)
  }, unavailable("children"))

  const tree = Effect.fnUntraced(function*(
    principal: Principal,
    sessionId: SessionId,
    options: { readonly includeArchived?: boolean | undefined } = {}
  ) {
    const anchor = yield* anchorOf(principal, sessionId)
    // Ids grow with creation time, so id order puts every parent before its children.
    const rows = yield* query<SessionRow>(
      `SELECT ${sessionColumns} FROM troupe_sessions
      WHERE root_id = ? AND path LIKE ? AND id <> ? AND tenant = ? ${options.includeArchived ? "" : "AND archived = 0"}
      ORDER BY id LIMIT ?`,
      [anchor.root_id, anchor.path + "%", sessionId, anchor.tenant, maxTreeNodes + 1]
    )
    if (rows.length > maxTreeNodes) {
      return yield* new InvalidInput({
        what: "tree",
        reason: `more than ${maxTreeNodes} sessions below ${sessionId}: page with list({ scope: { tree } })`
      })
    }
    const nodes = rows.map((row) => {
      const session = sessionOf(row)
      return new TreeNode({ session, parentId: session.parentId!, alias: session.alias, agentPath: session.agentPath }, true)
    })
    return new SessionTree({ root: yield* toSession(anchor), nodes }, true)
  }, unavailable("tree"))

  const findChild = Effect.fnUntraced(function*(principal: Principal, parentId: SessionId, child: string) {
    // An id is never an alias of another child: ids are prefixed ULIDs, and a child found by id is that child.
    const rows = yield* query<SessionRow>(
      `SELECT ${sessionColumns} FROM troupe_sessions
      WHERE parent_id = ? AND tenant = ? AND (id = ? OR alias = ?) ORDER BY id = ? DESC LIMIT 1`,
      [parentId, tenantOf(principal), child, child, child]
    )
    if (rows.length === 0) return yield* new SessionNotFound({ sessionId: child })
    return yield* toSession(rows[0]!)
  }, unavailable("findChild"))

  const readLog = Effect.fnUntraced(function*(
    sessionId: SessionId,
    options?: { readonly after?: number | undefined; readonly limit?: number | undefined }
  ) {
    const after = options?.after ?? 0
    const limit = options?.limit ?? 500
    const step = logStep(sessionId, after, limit)
    return logPageOf(sessionId, yield* query<LogRow>(step.text, step.params), after, limit)
  }, unavailable("readLog"))

  const readInbox = Effect.fnUntraced(
    function*(sessionId: SessionId, options?: { readonly limit?: number | undefined }) {
      const step = inboxStep(sessionId, options?.limit ?? 1000)
      return inboxItemsOf(sessionId, yield* query<InboxRow>(step.text, step.params))
    },
    unavailable("readInbox")
  )

  const withPendingInbox = Effect.fnUntraced(function*(sessionIds: ReadonlyArray<SessionId>) {
    const pending: Array<SessionId> = []
    for (let from = 0; from < sessionIds.length; from += pendingChunk) {
      const chunk = sessionIds.slice(from, from + pendingChunk)
      const rows = yield* query<{ session_id: SessionId }>(
        `SELECT DISTINCT session_id FROM troupe_inbox WHERE consumed = 0 AND session_id IN (${SqlStatements.list(chunk.length)})`,
        chunk
      )
      for (const row of rows) pending.push(row.session_id)
    }
    return pending
  }, unavailable("withPendingInbox"))

  const operations = Effect.fnUntraced(function*(sessionId: SessionId, turnId?: TurnId) {
    const rows = yield* query<OperationRow>(
      `SELECT operation_id, turn_id, kind, name, status, input, output, is_error, started_seq, ended_seq
      FROM troupe_operations WHERE session_id = ? ${turnId === undefined ? "" : "AND turn_id = ?"}
      ORDER BY started_seq`,
      turnId === undefined ? [sessionId] : [sessionId, turnId]
    )
    return yield* Effect.forEach(rows, (row) =>
      decodeOperation({
        operationId: row.operation_id,
        sessionId,
        turnId: row.turn_id,
        kind: row.kind,
        name: row.name,
        status: row.status,
        input: json(row.input),
        output: json(row.output),
        isError: Number(row.is_error) === 1,
        startedSeq: Number(row.started_seq),
        ...(row.ended_seq === null ? {} : { endedSeq: Number(row.ended_seq) })
      }).pipe(Effect.orDie))
  }, unavailable("operations"))

  const openCallbacks = Effect.fnUntraced(function*(sessionId: SessionId) {
    const rows = yield* query<CallbackRow>(
      `SELECT callback_id, turn_id, operation_id, kind, request, opened_seq, opened_at
      FROM troupe_callbacks WHERE session_id = ? ORDER BY opened_seq`,
      [sessionId]
    )
    return yield* Effect.forEach(rows, (row) =>
      decodeCallback({
        callbackId: row.callback_id,
        sessionId,
        turnId: row.turn_id,
        operationId: row.operation_id,
        kind: row.kind,
        request: JSON.parse(row.request),
        openedSeq: Number(row.opened_seq),
        openedAt: Number(row.opened_at)
      }).pipe(Effect.orDie))
  }, unavailable("openCallbacks"))

  return { get, list, children, tree, findChild, readLog, readInbox, withPendingInbox, operations, openCallbacks }
}
