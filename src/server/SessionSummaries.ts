/**
 * What a listing shows of each session beside the session itself
 * (`GET /v1/sessions?summaries=true`, HTTP.md): the turns it started, the
 * tokens its turns used, and its callbacks still open, counted from its log.
 *
 * A listener keeps each session's count with the cursor it reached, so a
 * session's log is read from there on only: each record once over the
 * listener's life, not once per page shown (the inspector's sessions list
 * asks for a page of 50 with every load and every refresh). At most
 * `capacity` sessions are kept, the least recently counted dropped first.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import type { StoreUnavailable } from "../schema/Errors.js"
import type { CallbackId, SessionId } from "../schema/Ids.js"
import type { RecordBody } from "../schema/Record.js"
import type { Session } from "../schema/Session.js"
import type { SessionStore } from "../services/SessionStore.js"

/** One session's summary, as the listing answers it. */
export interface Summary {
  readonly turns: number
  readonly totalTokens: number
  readonly pendingCallbacks: number
}

/** A session's count up to `cursor`: its summary, with the ids of the callbacks still open. */
export interface Count {
  readonly cursor: number
  readonly turns: number
  readonly totalTokens: number
  readonly open: ReadonlySet<CallbackId>
}

/** The count of a log not read yet. */
export const empty: Count = { cursor: 0, turns: 0, totalTokens: 0, open: new Set() }

/** `count` with one more record, at `cursor` (pure). */
export const add = (count: Count, cursor: number, record: RecordBody): Count => {
  switch (record._tag) {
    case "turn_started":
      return { ...count, cursor, turns: count.turns + 1 }
    case "turn_ended":
      return { ...count, cursor, totalTokens: count.totalTokens + record.usage.totalTokens }
    case "callback_opened":
      return { ...count, cursor, open: new Set(count.open).add(record.callbackId) }
    case "callback_resolved": {
      const open = new Set(count.open)
      open.delete(record.callbackId)
      return { ...count, cursor, open }
    }
    default:
      return { ...count, cursor }
  }
}

/** A count as the listing answers it. */
export const summaryOf = (count: Count): Summary => ({
  turns: count.turns,
  totalTokens: count.totalTokens,
  pendingCallbacks: count.open.size
})

/** The most sessions a listener keeps counts of (a few hundred bytes each). */
export const DEFAULT_CAPACITY = 20_000

/** How many records one read of a log takes. */
const PAGE = 1000

/**
 * Counts kept over the store's logs. The sessions given are a listing's, so
 * their tenancy was checked by it: their logs are read straight from the
 * store (`readLog`), without an event stream's subscription per session.
 */
export const make = (store: SessionStore["Type"], capacity = DEFAULT_CAPACITY) => {
  const counts = new Map<SessionId, Count>()

  const keep = (sessionId: SessionId, count: Count) => {
    const kept = counts.get(sessionId)
    // Two requests may count the same session at once: the further count stays.
    if (kept !== undefined && kept.cursor >= count.cursor) return
    counts.delete(sessionId)
    counts.set(sessionId, count)
    if (counts.size > capacity) counts.delete(counts.keys().next().value!)
  }

  /** The count of `session` up to its head, reading only what was not counted yet. */
  const countOf = (session: Session): Effect.Effect<Count, StoreUnavailable> =>
    Effect.gen(function*() {
      let count = counts.get(session.id) ?? empty
      while (count.cursor < session.headSeq) {
        const page = yield* store.readLog(session.id, { after: count.cursor, limit: PAGE })
        for (const record of page.records) if (record.seq <= session.headSeq) count = add(count, record.seq, record.body)
        if (!page.more || page.records.length === 0) break
      }
      keep(session.id, count)
      return count
    })

  return {
    /** The summaries of the sessions of a listing, by id. */
    of: (listed: ReadonlyArray<Session>) =>
      Effect.map(
        Effect.forEach(listed, countOf, { concurrency: 4 }),
        (all) => Object.fromEntries(all.map((count, i) => [listed[i]!.id, summaryOf(count)])) as Record<SessionId, Summary>
      ),
    /** How many sessions are counted now. */
    size: () => counts.size
  }
}

/** The summaries kept by one listener. */
export type SessionSummaries = ReturnType<typeof make>
