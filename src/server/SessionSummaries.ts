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
import { Effect, Stream } from "effect"
import type { SessionNotFound, StoreUnavailable } from "../schema/Errors.js"
import type { CallbackId, SessionId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import type { RecordBody } from "../schema/Record.js"
import type { Session } from "../schema/Session.js"
import type { Sessions } from "../services/Sessions.js"

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

/** Counts kept over `sessions`, read on behalf of the principal that listed them. */
export const make = (sessions: Sessions["Type"], capacity = DEFAULT_CAPACITY) => {
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
  const countOf = (principal: Principal, session: Session): Effect.Effect<Count, SessionNotFound | StoreUnavailable> => {
    const kept = counts.get(session.id) ?? empty
    if (kept.cursor >= session.headSeq) return Effect.succeed(kept)
    return sessions.events(principal, session.id, { after: kept.cursor, follow: false }).pipe(
      Stream.takeWhile((event) => event._tag !== "durable" || event.cursor <= session.headSeq),
      Stream.runFold(kept, (count, event) => (event._tag === "durable" ? add(count, event.cursor, event.record) : count)),
      Effect.tap((count) => keep(session.id, count))
    )
  }

  return {
    /** The summaries of listed sessions, by id. */
    of: (principal: Principal, listed: ReadonlyArray<Session>) =>
      Effect.map(
        Effect.forEach(listed, (session) => countOf(principal, session), { concurrency: 4 }),
        (all) => Object.fromEntries(all.map((count, i) => [listed[i]!.id, summaryOf(count)])) as Record<SessionId, Summary>
      ),
    /** How many sessions are counted now. */
    size: () => counts.size
  }
}

/** The summaries kept by one listener. */
export type SessionSummaries = ReturnType<typeof make>
