/**
 * The `SessionStore` on SQLite (`@effect/sql-sqlite-node`, better-sqlite3):
 * a file in WAL mode, or `:memory:`. Writes run in `BEGIN IMMEDIATE`
 * transactions so several processes on one file serialise instead of failing
 * on lock upgrades; lease time is the Effect `Clock` of the process (one
 * machine, one clock).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Cause, Clock, Effect, Exit, Layer, Option } from "effect"
import { StoreUnavailable } from "../schema/Errors.js"
import { SessionStore } from "../services/SessionStore.js"
import * as SqlSessionStore from "./SqlSessionStore.js"

/** Where the SQLite database lives. */
export interface Options {
  /** A file path, or `:memory:` for a private in-process database. */
  readonly filename: string
}

/**
 * The SQLite dialect over the `SqlClient` in context. It reserves the client's
 * one connection for as long as the scope lasts and serialises its own use of
 * it: reserving per statement costs more than the statement (see
 * docs/decisions/0001-sql-hot-path.md). The client must not serve anyone else
 * meanwhile, which is why `layer` opens a client of its own.
 */
export const dialect = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const conn = yield* sql.reserve.pipe(Effect.mapError((cause) => new StoreUnavailable({ operation: "open", cause })))
  const lock = yield* Effect.makeSemaphore(1)
  const run = (statement: string) => conn.execute(statement, [], undefined)
  // Not `sql.withTransaction`: its `BEGIN` is deferred (two processes upgrading
  // read locks deadlock into SQLITE_BUSY), and it opens a span and prepares
  // BEGIN/COMMIT afresh on every call. Spans belong to turns and operations.
  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
      Option.isSome(outer)
        ? effect
        : lock.withPermits(1)(Effect.uninterruptibleMask((restore) =>
          Effect.zipRight(
            run("BEGIN IMMEDIATE"),
            Effect.onExit(
              restore(Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0] as const)),
              (exit) => Effect.orDie(run(Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK"))
            )
          )
        )))
  return {
    placeholders: "?",
    clock: Effect.map(Clock.currentTimeMillis, (ms): SqlSessionStore.Clock => ({ text: "?", params: [ms] })),
    lockRow: "",
    transaction,
    outside: (text, params) => lock.withPermits(1)(conn.execute(text, params, undefined))
  } satisfies SqlSessionStore.Dialect
})

/** The store over the SQLite `SqlClient` in context, which it takes for itself while the scope lasts. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // WAL with NORMAL sync survives a process crash; only power loss can drop the last commits.
  yield* sql`PRAGMA synchronous = NORMAL`.pipe(
    Effect.mapError((cause) => new StoreUnavailable({ operation: "open", cause }))
  )
  // Migrate before the connection is reserved: the migrator uses the client itself.
  yield* SqlSessionStore.migrate
  return yield* SqlSessionStore.make(yield* dialect)
})

/** The store on a SQLite database it opens (and closes with the layer). */
export const layer = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  Layer.scoped(SessionStore, make).pipe(
    Layer.provide(
      SqliteClient.layer({ filename: options.filename }).pipe(
        // better-sqlite3 throws while opening (not a database, no such directory): a typed failure, not a crash.
        Layer.catchAllCause((cause) => Layer.fail(new StoreUnavailable({ operation: "open", cause: Cause.squash(cause) })))
      )
    )
  )
