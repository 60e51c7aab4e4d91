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
import type { Connection } from "@effect/sql/SqlConnection"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Clock, Effect, Layer, Scope } from "effect"
import { StoreUnavailable } from "../schema/Errors.js"
import { SessionStore } from "../services/SessionStore.js"
import * as SqlSessionStore from "./SqlSessionStore.js"

/** Where the SQLite database lives. */
export interface Options {
  /** A file path, or `:memory:` for a private in-process database. */
  readonly filename: string
}

/** The SQLite dialect over the `SqlClient` in context. */
export const dialect = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const run = (statement: string) => (conn: Connection) =>
    Effect.asVoid(conn.executeUnprepared(statement, [], undefined))
  return {
    now: Effect.map(Clock.currentTimeMillis, (ms) => sql`${ms}`),
    lockRow: sql.literal(""),
    transaction: SqlClient.makeWithTransaction({
      transactionTag: SqlClient.TransactionConnection,
      spanAttributes: [["db.system.name", "sqlite"]],
      acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
        Effect.map(Scope.extend(sql.reserve, scope), (conn) => [scope, conn] as const)),
      begin: run("BEGIN IMMEDIATE"),
      savepoint: (conn, id) => run(`SAVEPOINT troupe_${id}`)(conn),
      commit: run("COMMIT"),
      rollback: run("ROLLBACK"),
      rollbackSavepoint: (conn, id) => run(`ROLLBACK TO SAVEPOINT troupe_${id}`)(conn)
    })
  } satisfies SqlSessionStore.Dialect
})

/** The store over the SQLite `SqlClient` in context. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // WAL with NORMAL sync survives a process crash; only power loss can drop the last commits.
  yield* sql`PRAGMA synchronous = NORMAL`.pipe(
    Effect.mapError((cause) => new StoreUnavailable({ operation: "open", cause }))
  )
  return yield* SqlSessionStore.make(yield* dialect)
})

/** The store on a SQLite database it opens (and closes with the layer). */
export const layer = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  Layer.effect(SessionStore, make).pipe(
    Layer.provide(
      SqliteClient.layer({ filename: options.filename }).pipe(
        Layer.catchAll((cause) => Layer.fail(new StoreUnavailable({ operation: "open", cause })))
      )
    )
  )
