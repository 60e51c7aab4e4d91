/**
 * `StoreSignals` for processes sharing one SQLite file: while anything is
 * watched, a connection of its own reads `PRAGMA data_version` every few
 * milliseconds (a counter that moves when any other connection commits: one
 * page-cache check, no I/O); when it moved, one query reads the watched
 * sessions' heads (`head_seq`, `inbox_head`) and signals those that grew.
 *
 * The pool's hint ("sessions became claimable") and volatile deltas go
 * through side files beside the database (`SqliteLiveFiles`, decision 0047):
 * `announceClaimable` rewrites `FILE-pool`, which every process's check stats
 * (every `claimPoll` while only the hint is watched) and hints at once; a
 * session followed with deltas has its marker kept fresh, and the deltas
 * another process appends for it are read at each check. Any other
 * connection's commit still stands for the pool's hint too (a push through a
 * process that does not run the session), `hintAfter` after it was seen and at
 * most every `claimEvery`, so a worker's claim loop looks again soon after
 * another process wrote, but not before that process started the session it
 * may just have pushed to. Nothing watched, nothing runs.
 *
 * A newly watched session's heads are read as it is watched, so a change by
 * another process between a watcher's subscription and the next check is
 * signalled against them. Where that read cannot be made (the file is not
 * there yet, or the connection is inside a transaction), the session is
 * signalled once (`Inbox` and `Log`) when the next check first sees it. A check
 * after no other connection's commit reads only such sessions' heads.
 *
 * `data_version` does not move for the commits of the connection that reads
 * it. On a connection of its own (`layer`) every commit of the process's own
 * store moves it, and each one costs a query of the watched sessions' heads;
 * on the store's connection (`makeOn`, which `SqliteSessionStore.layerWithSignals`
 * uses) only other processes' commits do: this process's own are announced
 * in-process already.
 *
 * @since 0.1.0
 */
import type Database from "better-sqlite3"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import { type SessionId, ulid } from "../schema/Ids.js"
import { layerNoop, Signal, StoreSignals } from "../services/StoreSignals.js"
import * as SignalHub from "./SignalHub.js"
import * as SqliteLiveFiles from "./SqliteLiveFiles.js"

/** Where the file is, and how often it is checked while watched. */
export interface Options {
  readonly filename: string
  /** The change check's interval while anything is watched (default 5 ms). */
  readonly interval?: Duration.DurationInput | undefined
}

/** The pool's hint at most this often: a commit elsewhere is only perhaps a release. */
const claimEvery = 250

/**
 * How long after another connection's commit the pool's hint waits. When that commit was a
 * push, the process that pushed starts the session itself at once; a worker told at the same
 * moment could race it for the lease and run the turn with its own model and tools.
 */
const hintAfter = 100

/** How often the pool's hint file is looked at while only the hint is watched: an explicit hint is taken at once. */
const claimPoll = 25

interface Heads {
  head: number
  inbox: number
}

/** A watched session's row as the heads query reads it. */
interface HeadsRow {
  readonly id: SessionId
  readonly head_seq: number
  readonly inbox_head: number
}

/** Ids per heads query (SQLite's default limit on parameters is far above it). */
const chunk = 500

/**
 * `text` prepared once per connection (`pluck`: its rows' first column only): a connection opened
 * again after a failure prepares it again.
 */
const preparedOnce = (text: string, pluck = false) => {
  let prepared: { readonly db: Database.Database; readonly statement: Database.Statement } | undefined
  return (db: Database.Database): Database.Statement => {
    if (prepared?.db !== db) prepared = { db, statement: db.prepare(text).pluck(pluck) }
    return prepared.statement
  }
}

/** Signals over the file, on a connection of their own; a private `:memory:` database has no other process: no signals. */
export const layer = (options: Options): Layer.Layer<StoreSignals> =>
  options.filename === ":memory:" ? layerNoop : Layer.scoped(StoreSignals, make(options))

/** Where the check reads: the connection, and what to do with it when a check fails; where the side files are. */
interface Reader {
  readonly db: () => Database.Database
  readonly failed: () => void
  readonly paths: SqliteLiveFiles.Paths
}

/** Builds the signals on a connection of their own (closed with the scope); the check runs in a fiber of the scope. */
export const make = (options: Options) =>
  Effect.gen(function*() {
    // Loaded when the signals are built, not when troupe is imported (docs/decisions/0044-drivers-load-when-used.md).
    const { default: Sqlite }: { readonly default: typeof Database } = yield* Effect.promise(() => import("better-sqlite3"))
    let db: Database.Database | undefined
    yield* Effect.addFinalizer(() => Effect.sync(() => db?.close()))
    return yield* makeWith(options.interval, {
      // Opened at the first watch: by then the store has created and migrated the file.
      db: () => (db ??= new Sqlite(options.filename, { fileMustExist: true })),
      // A file the store has not created yet, or a busy moment: the next check opens it again.
      failed: () => {
        db?.close()
        db = undefined
      },
      paths: SqliteLiveFiles.pathsOf(options.filename)
    })
  })

/**
 * Builds the signals on `db`, the store's own open connection (its owner
 * closes it): only other connections' commits move its `data_version`.
 */
export const makeOn = (db: Database.Database, options: Pick<Options, "interval"> = {}) =>
  makeWith(options.interval, { db: () => db, failed: () => {}, paths: SqliteLiveFiles.pathsOf(db.name) })

const makeWith = (every: Duration.DurationInput | undefined, reader: Reader) =>
  Effect.gen(function*() {
    const interval = Duration.decode(every ?? "5 millis")
    const origin = yield* ulid
    const hint = SqliteLiveFiles.poolHint(reader.paths, origin)
    const deltas = SqliteLiveFiles.reader(reader.paths, origin)
    const outgoing = SqliteLiveFiles.writer(reader.paths, origin)
    yield* Effect.addFinalizer(() => Effect.sync(deltas.close))
    const nudges = yield* Queue.sliding<void>(1)
    // Watched sessions whose heads are not known yet: the next check reads them and signals them once.
    const fresh = new Set<SessionId>()
    const known = new Map<SessionId, Heads>()
    const hub = SignalHub.make((sessionId) => {
      if (!baseline(sessionId)) fresh.add(sessionId)
      Queue.unsafeOffer(nudges, undefined)
    })
    let version = -1
    // The data version the last pool hint stood for, and when it went; when a newer one was first seen.
    let hinted = -1
    let hintedAt = 0
    let movedAt: number | undefined

    // The first failure of the side files, logged once by the loop (`undefined`: none, or logged).
    let sideFilesFailed: { readonly cause: unknown } | undefined
    let sideFilesLogged = false
    /**
     * The side files' part of a check: the followed sessions' deltas handed to their watchers;
     * whether the pool's hint file changed. Best effort: a directory it cannot write (or read)
     * costs the hint and the deltas, never the store's signals.
     */
    const sideFiles = (): boolean => {
      try {
        for (const [sessionId, events] of deltas.poll(hub.followed())) hub.emit(Signal.Deltas({ sessionId, events }))
        return hint.changed()
      } catch (cause) {
        if (!sideFilesLogged) sideFilesFailed ??= { cause }
        return false
      }
    }

    // `PRAGMA data_version` prepared once per connection (`db.pragma` prepares it at every call, 200 times a second).
    const versionOn = preparedOnce("PRAGMA data_version", true)
    const dataVersion = (db: Database.Database): number => versionOn(db).get() as number

    /** One check: did anyone else commit, and if so which watched sessions grew. */
    const check = () => {
      const db = reader.db()
      const now = dataVersion(db)
      hintPool(now)
      if (now === version && fresh.size === 0) return
      // No other connection committed since the last check: only the sessions not known yet are read.
      const ids = now === version ? [...fresh] : hub.sessions()
      version = now
      fresh.clear()
      readHeads(db, ids)
    }

    const headsOn = preparedOnce("SELECT id, head_seq, inbox_head FROM troupe_sessions WHERE id = ?")
    /**
     * A session's heads read as it is first watched: later growth is signalled against them, and
     * its watcher reads the store after subscribing. False where they cannot be read now (the file
     * is not there yet; the connection is inside a transaction, whose writes may yet roll back):
     * the next check then reads them and signals the session once.
     */
    const baseline = (sessionId: SessionId): boolean => {
      try {
        const db = reader.db()
        if (db.inTransaction) return false
        const row = headsOn(db).get(sessionId) as HeadsRow | undefined
        if (row === undefined) return false
        known.set(sessionId, { head: row.head_seq, inbox: row.inbox_head })
        return true
      } catch {
        return false
      }
    }

    // The check's parts are functions of their own: it runs every few milliseconds, and one
    // body holding them all compiled into one large piece of optimized code.

    /** The pool's hint: an explicit one (a release) at once; a commit (perhaps a push) a little later. */
    const hintPool = (now: number) => {
      if (sideFiles() && hub.claimWatched()) {
        hinted = now
        hintedAt = Date.now()
        movedAt = undefined
        hub.claimable()
      }
      if (hub.claimWatched() && now !== hinted) {
        const at = Date.now()
        movedAt ??= at
        if (at - movedAt >= hintAfter && at - hintedAt >= claimEvery) {
          hinted = now
          hintedAt = at
          movedAt = undefined
          hub.claimable()
        }
      }
    }

    /** Reads the heads of `ids` (watched sessions) and signals those that grew (or are seen for the first time). */
    const readHeads = (db: Database.Database, ids: ReadonlyArray<SessionId>) => {
      for (const id of known.keys()) if (!hub.has(id)) known.delete(id)
      for (let i = 0; i < ids.length; i += chunk) {
        const part = ids.slice(i, i + chunk)
        const rows = db.prepare(
          `SELECT id, head_seq, inbox_head FROM troupe_sessions WHERE id IN (${part.map(() => "?").join(", ")})`
        ).all(...part) as ReadonlyArray<HeadsRow>
        for (let r = 0; r < rows.length; r++) signalGrowth(rows[r]!)
      }
    }

    const signalGrowth = (row: HeadsRow) => {
      const before = known.get(row.id)
      if (before === undefined) {
        known.set(row.id, { head: row.head_seq, inbox: row.inbox_head })
        hub.emit(Signal.Log({ sessionId: row.id, seq: row.head_seq }))
        hub.emit(Signal.Inbox({ sessionId: row.id }))
        return
      }
      if (row.inbox_head > before.inbox) {
        before.inbox = row.inbox_head
        hub.emit(Signal.Inbox({ sessionId: row.id }))
      }
      if (row.head_seq > before.head) {
        before.head = row.head_seq
        hub.emit(Signal.Log({ sessionId: row.id, seq: row.head_seq }))
      }
    }

    const logSideFiles = Effect.suspend(() => {
      const failed = sideFilesFailed
      if (failed === undefined) return Effect.void
      sideFilesFailed = undefined
      sideFilesLogged = true
      return Effect.logDebug("store side files unusable: no pool hint or deltas through them", failed.cause)
    })

    const tick = Effect.suspend(() =>
      hub.sessions().length === 0 && !hub.claimWatched()
        ? Queue.take(nudges)
        : Effect.zipRight(
          Effect.try({ try: check, catch: (cause) => cause }).pipe(
            Effect.catchAll((cause) =>
              // The next tick tries again.
              Effect.zipRight(
                Effect.logDebug("store change check failed", cause),
                Effect.sync(() => {
                  reader.failed()
                  version = -1
                })
              )
            )
          ),
          Effect.zipRight(logSideFiles, Effect.sleep(hub.sessions().length > 0 ? interval : Duration.millis(claimPoll)))
        )
    )
    yield* Effect.forkScoped(Effect.forever(tick))
    return StoreSignals.of({
      watch: hub.watch,
      onSignal: hub.onSignal,
      announce: () => Effect.void,
      forward: (sessionId, events) =>
        Effect.sync(() => outgoing.forward(sessionId, events)).pipe(
          Effect.catchAllDefect((cause) => Effect.logDebug("deltas not forwarded", cause))
        ),
      // Written before the drain goes on: the process may exit right after.
      announceClaimable: Effect.sync(hint.announce).pipe(
        Effect.catchAllDefect((cause) => Effect.logDebug("pool hint not sent", cause))
      ),
      watchClaimable: Effect.tap(hub.watchClaimable, () => Queue.offer(nudges, undefined)),
      shared: true,
      announcesCommits: false
    })
  })
