/**
 * The `SessionStore` on SQLite (better-sqlite3): a file in WAL mode, or
 * `:memory:`. Writes run in `BEGIN IMMEDIATE` transactions so several
 * processes on one file serialise instead of failing on lock upgrades; lease
 * time is the Effect `Clock` of the process (one machine, one clock).
 *
 * `layer` opens the database itself and runs each commit as one synchronous
 * better-sqlite3 transaction (docs/decisions/0006-sqlite-sync-commit.md);
 * `make` runs the same store over any SQLite `SqlClient` in context, one
 * statement at a time (the store's paths 2 and 1: docs/store.md, "three paths").
 *
 * The public module is `SqliteSessionStore`, which loads this one (and
 * @effect/sql under it) when a store is built (decision 0049).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StoreUnavailable } from "../../../schema/Errors.js"
import { SessionStore } from "../../../services/SessionStore.js"
import { layerNoop, StoreSignals } from "../../../services/StoreSignals.js"
import { clientOf, failed, type Handle, open } from "./SqliteConnection.js"
import * as SqliteGroupCommit from "./SqliteGroupCommit.js"
import { boundClock } from "../Dialect.js"
import * as SqlSessionStore from "../SqlSessionStore.js"
import * as SqliteStoreSignals from "../../SqliteStoreSignals.js"

/** Where the SQLite database lives. */
export interface Options {
  /** A file path, or `:memory:` for a private in-process database. */
  readonly filename: string
  /**
   * Group commit: several sessions' writes that come together share one
   * transaction (`SqliteGroupCommit`). On by default; `false` commits every
   * write alone (docs/decisions/0018, 0024).
   */
  readonly groupCommit?: SqliteGroupCommit.Options | boolean | undefined
  /**
   * When a commit is on disk (`PRAGMA synchronous`). `"normal"` (the default):
   * the WAL is synced at checkpoints, so a commit survives any crash of the
   * process but the last ones may be lost on power loss or an OS crash.
   * `"full"`: the WAL is synced at every commit, which survives those too, at
   * the cost of an fsync per commit (docs/store.md, "Durability").
   */
  readonly synchronous?: Synchronous | undefined
}

/** The durability of a SQLite store's commits: `PRAGMA synchronous` in WAL mode. */
export type Synchronous = "normal" | "full"

/** The `PRAGMA synchronous` texts, by choice: only these reach the database. */
const SYNCHRONOUS: Record<Synchronous, string> = { normal: "NORMAL", full: "FULL" }

/** Carries a refusal out of a better-sqlite3 transaction, which rolls back on any throw. */
class Refused {
  constructor(readonly error: unknown) {}
}

/** Carries a throw of the steps' own code (a bug, not the database) out of the transaction: a defect, as on the Effect path. */
class Crashed {
  constructor(readonly defect: unknown) {}
}

/** Resumes `steps`; what its own code throws is marked as a defect. */
const resume = <A, E>(steps: SqlSessionStore.Steps<A, E>, rows?: ReadonlyArray<never>) => {
  try {
    return rows === undefined ? steps.next() : steps.next(rows)
  } catch (defect) {
    throw new Crashed(defect)
  }
}

/**
 * Runs the statements of a write transaction on the handle in one synchronous
 * `BEGIN IMMEDIATE` transaction, with no Effect step between them. The store
 * clock is read once the write lock is taken. With `group`, transactions of
 * several sessions that come together share one transaction, each in its own
 * savepoint (`SqliteGroupCommit`).
 */
const syncTransact = (
  handle: Handle,
  atomic: <A, E>(now: () => Effect.Effect<A, E>) => Effect.Effect<A, E>,
  atomicNow: <A, E>(now: () => Effect.Effect<A, E>) => Effect.Effect<A, E>,
  idle: () => boolean,
  group: SqliteGroupCommit.Options | boolean | undefined
) => {
  const body = <A, E>(steps: (clock: SqlSessionStore.Clock) => SqlSessionStore.Steps<A, E>, clock: Clock.Clock): A => {
    const running = steps(boundClock(clock.unsafeCurrentTimeMillis()))
    let next = resume(running)
    while (!next.done) next = resume(running, handle.run(next.value.text, next.value.params) as ReadonlyArray<never>)
    if (Either.isLeft(next.value)) throw new Refused(next.value.left)
    return next.value.right
  }
  const inTransaction = handle.db.transaction(body)
  // Called inside an open transaction, a better-sqlite3 transaction function is a savepoint.
  const inSavepoint = handle.db.transaction((run: () => unknown) => run())
  const inOneTransaction = handle.db.transaction((batch: () => void) => batch())
  /** What a transaction's outcome (its value, or what it threw) is to its caller. */
  const settle = <A, E>(outcome: SqliteGroupCommit.Outcome): Effect.Effect<A, E | SqlError> => {
    if (outcome.ok) return Effect.succeed(outcome.value as A)
    const error = outcome.error
    if (error instanceof Refused) return Effect.fail(error.error as E)
    // Anything else was thrown by better-sqlite3 (a statement, BEGIN or COMMIT).
    return error instanceof Crashed ? Effect.die(error.defect) : Effect.fail(failed(error))
  }
  /** Runs the transaction now, synchronously; the returned effect only reports how it went. */
  const now = <A, E>(steps: (clock: SqlSessionStore.Clock) => SqlSessionStore.Steps<A, E>, clock: Clock.Clock): Effect.Effect<A, E | SqlError> => {
    try {
      return Effect.succeed(inTransaction.immediate(steps, clock) as A)
    } catch (error) {
      return settle({ ok: false, error })
    }
  }
  if (group === false) {
    return <A, E>(steps: (clock: SqlSessionStore.Clock) => SqlSessionStore.Steps<A, E>, _key: string | undefined) =>
      Effect.clockWith((clock) => atomicNow(() => now(steps, clock)))
  }
  const grouped = SqliteGroupCommit.make({
    inOneTransaction: (batch) => inOneTransaction.immediate(batch),
    inSavepoint: (run) => inSavepoint(run),
    inTransaction: () => handle.db.inTransaction,
    atomic,
    atomicNow,
    idle
  }, group === true || group === undefined ? {} : group)
  // The group's effect reads the clock and decides on company as it runs: the transaction runs in that one step.
  return <A, E>(steps: (clock: SqlSessionStore.Clock) => SqlSessionStore.Steps<A, E>, key: string | undefined) =>
    grouped<A, E>(key, (clock) => now(steps, clock), (clock) => body(steps, clock), settle)
}

/** Runs one statement on the handle now, synchronously; the returned effect only reports how it went. */
const runNow = (handle: Handle, text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<any>, SqlError> => {
  try {
    return Effect.succeed(handle.run(text, params))
  } catch (error) {
    return Effect.fail(failed(error))
  }
}

/** WAL pages a commit may leave before it checkpoints them itself (SQLite's default is 1,000). */
const autocheckpointPages = 10_000

/** How often the layer checkpoints the WAL in the background. */
const checkpointEvery = Duration.seconds(1)

/**
 * Keeps checkpoints off the commit path. By default a commit that takes the
 * WAL past 1,000 pages copies them into the database file before it returns
 * (every ~30 tool turns, and most of the p99 latency of a turn). Commits now
 * checkpoint only past `autocheckpointPages` (a backstop); a fiber of the
 * layer's scope runs a PASSIVE checkpoint (it waits for no reader or writer,
 * here or in another process) every `checkpointEvery`, between statements.
 * A checkpoint that cannot run is retried at the next tick.
 */
const checkpoints = (handle: Handle, atomic: <A, E>(now: () => Effect.Effect<A, E>) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    yield* Effect.try({
      try: () => handle.db.pragma(`wal_autocheckpoint = ${autocheckpointPages}`),
      catch: (cause) => new StoreUnavailable({ operation: "open", cause })
    })
    yield* atomic(() => runNow(handle, "PRAGMA wal_checkpoint(PASSIVE)", [])).pipe(
      Effect.ignore,
      Effect.delay(checkpointEvery),
      Effect.forever,
      Effect.forkScoped
    )
  })

/**
 * The SQLite dialect over the `SqlClient` in context. It reserves the client's
 * one connection for as long as the scope lasts and serialises its own use of
 * it: reserving per statement costs more than the statement (see
 * docs/decisions/0001-sql-hot-path.md). The client must not serve anyone else
 * meanwhile, which is why `layer` opens a client of its own.
 *
 * On the layer's own connection (`handle`), a statement or a synchronous
 * transaction runs in one step that nothing can interleave with, so it takes
 * the lock only while a transaction of several Effect steps (a `create`) holds
 * the connection: a round on the semaphore costs ~30 Effect steps, more than
 * the statement. The check and the statement run in the same synchronous
 * thunk: the fiber cannot yield between them, so a transaction cannot begin in
 * between and take the statement in (and roll it back with its own).
 */
const dialectWith = (handle: Handle | undefined, group?: SqliteGroupCommit.Options | boolean) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const conn = yield* sql.reserve.pipe(Effect.mapError((cause) => new StoreUnavailable({ operation: "open", cause })))
    const lock = yield* Effect.makeSemaphore(1)
    // Transactions of several Effect steps under way (0 or 1: they hold the lock).
    let open = 0
    const exclusive = lock.withPermits(1)
    /** `atomic` called while the fiber runs (in an Effect's thunk): `now` at once if no transaction is open, else under the lock. */
    const atomicNow = <A, E>(now: () => Effect.Effect<A, E>): Effect.Effect<A, E> =>
      open === 0 ? now() : exclusive(Effect.suspend(now))
    /** Runs `now` (which does its work when called) at once if no transaction is open, else under the lock. */
    const atomic = <A, E>(now: () => Effect.Effect<A, E>): Effect.Effect<A, E> => Effect.suspend(() => atomicNow(now))
    const run = (statement: string) => conn.execute(statement, [], undefined)
    // Not `sql.withTransaction`: its `BEGIN` is deferred (two processes upgrading
    // read locks deadlock into SQLITE_BUSY), and it opens a span and prepares
    // BEGIN/COMMIT afresh on every call. Spans belong to turns and operations.
    const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        Option.isSome(outer)
          ? effect
          : exclusive(Effect.uninterruptibleMask((restore) =>
            Effect.zipRight(
              Effect.zipRight(Effect.sync(() => open++), run("BEGIN IMMEDIATE")),
              Effect.onExit(
                restore(Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0] as const)),
                (exit) => Effect.orDie(run(Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK"))
              )
            ).pipe(Effect.ensuring(Effect.sync(() => open--)))
          )))
    const transact = handle === undefined ? undefined : syncTransact(handle, atomic, atomicNow, () => open === 0, group)
    if (handle !== undefined) yield* checkpoints(handle, atomic)
    return {
      placeholders: "?",
      clock: Effect.map(Clock.currentTimeMillis, boundClock),
      lockRow: "",
      transaction,
      outside: (text, params) =>
        handle === undefined
          ? exclusive(conn.execute(text, params, undefined))
          : atomic(() => runNow(handle, text, params)),
      transact
    } satisfies SqlSessionStore.Dialect
  })

/** The SQLite dialect over the `SqlClient` in context (see `dialectWith`). */
export const dialect = dialectWith(undefined)

const makeWith = (
  handle: Handle | undefined,
  group?: SqliteGroupCommit.Options | boolean,
  synchronous: Synchronous = "normal"
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // WAL with NORMAL sync survives a process crash; only power loss can drop the last commits. FULL syncs each commit.
    yield* sql.unsafe(`PRAGMA synchronous = ${SYNCHRONOUS[synchronous]}`).pipe(
      Effect.mapError((cause) => new StoreUnavailable({ operation: "open", cause }))
    )
    // Migrate before the connection is reserved: the migrator uses the client itself.
    yield* SqlSessionStore.migrate
    return yield* SqlSessionStore.make(yield* dialectWith(handle, group))
  })

/** The store over the SQLite `SqlClient` in context, which it takes for itself while the scope lasts. */
export const make = makeWith(undefined)

/** `make` with a durability other than the default (`Options.synchronous`). */
export const makeWithSync = (synchronous: Synchronous) => makeWith(undefined, undefined, synchronous)

/** The store on a SQLite database it opens (and closes with the layer). */
export const layer = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  Layer.scoped(SessionStore, Effect.map(opened(options), ({ store }) => store))

/** Opens the database (closed with the scope) and builds the store over it: the store, and the handle it runs on. */
const opened = (options: Options) =>
  Effect.gen(function*() {
    const handle = yield* open(options.filename)
    const sql = yield* clientOf(handle)
    const store = yield* Effect.provideService(makeWith(handle, options.groupCommit, options.synchronous), SqlClient.SqlClient, sql)
    return { handle, store }
  })

/**
 * The store and its `StoreSignals` on one connection: the change check reads
 * `PRAGMA data_version` on the store's own connection, which only other
 * processes' commits move (`SqliteStoreSignals.makeOn`). What `Troupe.layerSqlite`
 * and the CLI use; a private `:memory:` database has no other process: no signals.
 */
export const layerWithSignals = (
  options: Options & Pick<SqliteStoreSignals.Options, "interval">
): Layer.Layer<SessionStore | StoreSignals, StoreUnavailable> =>
  options.filename === ":memory:"
    ? Layer.merge(layer(options), layerNoop)
    : Layer.scopedContext(
      Effect.gen(function*() {
        const { handle, store } = yield* opened(options)
        // Made after the handle: its check stops before the handle closes.
        const signals = yield* SqliteStoreSignals.makeOn(handle.db, options)
        return Context.make(SessionStore, store).pipe(Context.add(StoreSignals, signals))
      })
    )

/**
 * The store on a SQLite database opened through `@effect/sql-sqlite-node`'s
 * client: every statement of a commit is its own Effect step (as `make` does).
 * The same conformance suite holds it to the same answers as `layer`, which is
 * the faster default (docs/decisions/0006-sqlite-sync-commit.md); a failure to
 * open is `StoreUnavailable` here too.
 */
export const layerSqlClient = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  Layer.scoped(SessionStore, makeWith(undefined, undefined, options.synchronous)).pipe(
    Layer.provide(
      Layer.unwrapEffect(
        // A file that cannot be opened makes the client's layer throw: open it first, as `layer` does.
        // The client's module (and better-sqlite3 under it) loads here, when the layer is built.
        Effect.zipWith(
          Effect.scoped(open(options.filename)),
          Effect.promise((): Promise<typeof import("@effect/sql-sqlite-node/SqliteClient")> => import("@effect/sql-sqlite-node/SqliteClient")),
          (_, SqliteClient) => SqliteClient.layer({ filename: options.filename })
        )
      ).pipe(Layer.mapError((cause) => (cause instanceof StoreUnavailable ? cause : new StoreUnavailable({ operation: "open", cause }))))
    )
  )

