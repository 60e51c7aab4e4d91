/**
 * The reads of a session's log and inbox: their statements and the pages
 * their rows make (used by `start`, `readLog` and `readInbox`).
 *
 * @since 0.1.0
 */
import { type CommitId, type SessionId } from "../../schema/Ids.js"
import { InboxItem } from "../../schema/Inbox.js"
import { fromJsonText, LogPage, LogRecord } from "../../schema/Record.js"
import * as Trusted from "../../schema/Trusted.js"
import type { Step } from "./Steps.js"
import { commandOf } from "./Rows.js"

/** A row of `troupe_log` as the reads select it. */
export interface LogRow {
  readonly seq: number | string
  readonly at: number | string
  readonly commit_id: string
  readonly body: string
}

/** A row of `troupe_inbox` as the reads select it. */
export interface InboxRow {
  readonly position: number | string
  readonly command: string
  readonly received_at: number | string
}

export const logStep = (sessionId: SessionId, after: number, limit: number): Step => ({
  text: `SELECT seq, at, commit_id, body FROM troupe_log WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
  params: [sessionId, after, limit + 1]
})

export const inboxStep = (sessionId: SessionId, limit: number): Step => ({
  text: `SELECT position, command, received_at FROM troupe_inbox
  WHERE session_id = ? AND consumed = 0 ORDER BY position LIMIT ?`,
  params: [sessionId, limit]
})

/** The page `logStep(sessionId, after, limit)` selected (it reads one row more, to tell whether there are more). */
export const logPageOf = (sessionId: SessionId, rows: ReadonlyArray<LogRow>, after: number, limit: number) => {
  const page = rows.length > limit ? rows.slice(0, limit) : rows
  const records = page.map((row) =>
    Trusted.make(LogRecord, {
      sessionId,
      seq: Number(row.seq),
      at: Number(row.at),
      commitId: row.commit_id as CommitId,
      body: fromJsonText(row.body)
    })
  )
  return new LogPage({
    records,
    cursor: records.length > 0 ? records[records.length - 1]!.seq : after,
    more: rows.length > limit
  }, true)
}

export const inboxItemsOf = (sessionId: SessionId, rows: ReadonlyArray<InboxRow>) =>
  rows.map((row) =>
    new InboxItem({
      sessionId,
      position: Number(row.position),
      receivedAt: Number(row.received_at),
      command: commandOf(row.command)
    }, true)
  )
