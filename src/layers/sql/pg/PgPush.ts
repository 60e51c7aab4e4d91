/**
 * PostgreSQL's push: an inbox admission in ONE statement (one round trip)
 * instead of a transaction of six (`BEGIN`, lock, duplicate lookup, insert,
 * session update, `COMMIT`). Data-modifying CTEs lock the session row, look
 * the input id up, and insert the command and advance the inbox head only
 * when it is new and the session is open. The same stale-snapshot check as
 * the append's (decision 0003): every writer of a session's inbox updates its
 * row, so when the locked row is not the version the statement's snapshot
 * sees, the lookup may be stale; the statement then writes nothing and runs
 * again. See docs/decisions/0021-postgres-turn-round-trips.md.
 *
 * The checks and their order are `PushSteps.pushSteps`' (not found, a
 * known input id: its duplicate or a `Conflict`, closed), which stays the
 * reference and the fallback.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { Conflict, SessionClosed, SessionNotFound } from "../../../schema/Errors.js"
import type { InputId, SessionId } from "../../../schema/Ids.js"
import { Admission } from "../../../schema/Inbox.js"
import type { Push, PushStrategy } from "../Dialect.js"
import { type Named, statementName } from "./PgNamed.js"

interface PushRow {
  readonly current: boolean
  readonly closed: number
  readonly inbox_head: number | string
  readonly known_position: number | string | null
  readonly known_command: string | null
  readonly applied: boolean
}

/** The statement (`$1` session, `$2` input id, `$3` command); `clock` is the store clock's SQL text. */
export const statement = (clock: string) =>
  `WITH s AS MATERIALIZED (
    SELECT ctid AS version, closed, inbox_head FROM troupe_sessions WHERE id = $1 FOR UPDATE
  ),
  h AS MATERIALIZED (
    SELECT s.*, s.version = (SELECT ctid FROM troupe_sessions WHERE id = $1) AS current,
      k.position AS known_position, k.command AS known_command
    FROM s LEFT JOIN troupe_inbox k ON k.session_id = $1 AND k.input_id = $2
  ),
  ok AS MATERIALIZED (
    SELECT h.* FROM h WHERE h.current AND h.known_position IS NULL AND h.closed = 0
  ),
  admitted AS (
    INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at)
    SELECT $1, ok.inbox_head + 1, $2, $3, ${clock} FROM ok
  ),
  head AS (
    UPDATE troupe_sessions t SET inbox_head = ok.inbox_head + 1, ready_count = t.ready_count + 1
    FROM ok WHERE t.id = $1
  )
  SELECT h.current, h.closed, h.inbox_head, h.known_position, h.known_command,
    EXISTS (SELECT 1 FROM ok) AS applied
  FROM h`

/**
 * A push in one statement, run by `execute` (a named prepared statement).
 * When another writer changed the session between the statement's snapshot
 * and its lock, it wrote nothing and runs again; after `attempts` (default 3)
 * such runs `inTransaction` (the store's push of several statements) takes over.
 */
export const strategy = (
  clock: string,
  execute: Named,
  options: { readonly attempts?: number | undefined } = {}
): PushStrategy =>
(inTransaction) => {
  const attempts = options.attempts ?? 3
  const sql = statement(clock)
  const name = statementName("push", sql)
  const run = (sessionId: SessionId, inputId: InputId, print: string, attempt: number): ReturnType<Push> =>
    Effect.flatMap(execute(name, sql, [sessionId, inputId, print]), (rows): ReturnType<Push> => {
      if (rows.length === 0) return Effect.fail(new SessionNotFound({ sessionId }))
      const row = rows[0] as PushRow
      if (!row.current) {
        return attempt < attempts ? run(sessionId, inputId, print, attempt + 1) : inTransaction(sessionId, inputId, print)
      }
      if (row.known_position !== null) {
        return row.known_command !== print
          ? Effect.fail(new Conflict({ entity: "input", key: inputId, reason: "inputId reused with a different command" }))
          : Effect.succeed(new Admission({ sessionId, inputId, position: Number(row.known_position), duplicate: true }, true))
      }
      if (Number(row.closed) === 1) return Effect.fail(new SessionClosed({ sessionId }))
      if (!row.applied) return inTransaction(sessionId, inputId, print) // unreachable when the checks mirror the statement's
      return Effect.succeed(
        new Admission({ sessionId, inputId, position: Number(row.inbox_head) + 1, duplicate: false }, true)
      )
    })
  return (sessionId, inputId, print) => Effect.suspend(() => run(sessionId, inputId, print, 1))
}
