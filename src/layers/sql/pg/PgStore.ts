/**
 * The `SessionStore` on PostgreSQL (`@effect/sql-pg`). The session row is
 * locked with `SELECT … FOR UPDATE`, and lease time is the database's clock,
 * so every worker sharing the database agrees on expiry.
 *
 * The public module is `PgSessionStore`, which loads this one (and
 * @effect/sql under it) when a store is built (decision 0049).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { StoreUnavailable } from "../../../schema/Errors.js"
import { SessionStore } from "../../../services/SessionStore.js"
import * as PgAppend from "./PgAppend.js"
import * as PgGroupCommit from "./PgGroupCommit.js"
import * as PgNamed from "./PgNamed.js"
import * as PgPush from "./PgPush.js"
import type * as SqlStatements from "../SqlStatements.js"
import * as SqlSessionStore from "../SqlSessionStore.js"

/** How to reach the database. */
export interface Options {
  /** A `postgres://` URL; `?options=-c%20search_path%3Dname` selects a schema. */
  readonly url: string
  /** Pool size (default 10). */
  readonly maxConnections?: number | undefined
  /**
   * Group commit (decision 0021, on by default): appends and pushes of
   * several sessions that meet a busy store go to the database together, in
   * one round trip and one transaction, each still fenced and refused on its
   * own. `false` sends every one alone.
   */
  readonly groupCommit?: boolean | PgGroupCommit.Options | undefined
}

// clock_timestamp(), not now(): now() is frozen at transaction start, before the row lock.
const clock: SqlSessionStore.Clock = {
  text: "(extract(epoch from clock_timestamp()) * 1000)::bigint",
  params: []
}

/** Runs each statement text as a named prepared statement (`troupe_q_` and a hash of the text): parsed and planned once per connection. */
const preparedOutside = (execute: PgNamed.Named): SqlStatements.Executor => {
  const names = new Map<string, string>()
  return (text, params) => {
    let name = names.get(text)
    if (name === undefined) {
      name = PgNamed.statementName("q", text, 16)
      names.set(text, name)
    }
    return execute(name, text, params)
  }
}

/** The dialect; `execute` runs a lone statement, `writes` the one-statement append and push (alone, or through group commit). */
const dialectOf = (sql: SqlClient.SqlClient, execute: PgNamed.Named, writes: PgNamed.Named) => {
  return {
    placeholders: "$n",
    // Reads and one-statement writes outside a transaction (readInbox, get, readLog, acquire, …), prepared too.
    outside: preparedOutside(execute),
    clock: Effect.succeed(clock),
    lockRow: "FOR UPDATE",
    transaction: sql.withTransaction,
    // One statement per commit and per push: every round trip costs ~150–250 µs of CPU here.
    append: PgAppend.strategy(clock.text, { execute: writes }),
    push: PgPush.strategy(clock.text, writes)
  } satisfies SqlSessionStore.Dialect
}

/**
 * The node-postgres pool under the `SqlClient` when the store opened it
 * (`layer`): its lone statements then take a connection from it directly,
 * as `@effect/sql-pg` does outside a transaction, instead of reserving one.
 */
class Pool extends Context.Tag("troupe/PgStore/Pool")<Pool, PgNamed.Pool>() {}

const dialectOn = (pool: PgNamed.Pool | undefined) =>
  Effect.map(SqlClient.SqlClient, (sql) => {
    const execute = PgNamed.named(sql, pool)
    return dialectOf(sql, execute, execute)
  })

const groupedDialectOn = (pool: PgNamed.Pool | undefined, options: PgGroupCommit.Options) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const execute = PgNamed.named(sql, pool)
    return dialectOf(sql, execute, yield* PgGroupCommit.make(PgNamed.alone(sql, pool), options))
  })

/** The PostgreSQL dialect over the `SqlClient` in context. */
export const dialect = dialectOn(undefined)

/** The dialect with group commit: its batches run on fibers of the scope. */
export const groupedDialect = (options: PgGroupCommit.Options = {}) => groupedDialectOn(undefined, options)

/** The store over the PostgreSQL `SqlClient` in context, every write sent alone. */
export const make = Effect.zipRight(SqlSessionStore.migrate, Effect.flatMap(dialect, SqlSessionStore.make))

/** The store with group commit, over the `SqlClient` in context (what `layer` builds by default). */
export const makeGrouped = (options: PgGroupCommit.Options = {}) =>
  Effect.zipRight(SqlSessionStore.migrate, Effect.flatMap(groupedDialect(options), SqlSessionStore.make))

/** The pool's connections answer (`PgClient.make`'s check, and its time limit). */
const connectTimeout = Duration.seconds(5)

/**
 * The driver `layer` runs on: a node-postgres pool it opens (and ends with
 * the layer), checked with `SELECT 1` as `@effect/sql-pg` checks its own, the
 * `SqlClient` over it, and the pool itself (`Pool`).
 */
const driver = (options: Options) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    // The client's module (and pg under it) loads when the layer is built, not when troupe is imported.
    const [PgClient, pg] = yield* Effect.promise(() => Promise.all([import("@effect/sql-pg/PgClient"), import("pg")]))
    const PgPool = (pg.default ?? pg).Pool
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new PgPool({ connectionString: options.url, max: options.maxConnections ?? 10, application_name: "troupe" })
        // A failing idle connection leaves the pool; nobody else is told.
        pool.on("error", () => undefined)
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(Effect.timeoutFail({
      duration: connectTimeout,
      onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
    }))
    return Layer.merge(
      PgClient.layerFromPool({ acquire: Effect.succeed(pool), applicationName: "troupe" }),
      Layer.succeed(Pool, pool as unknown as PgNamed.Pool)
    )
  }))

/** The store on a PostgreSQL database it connects to (and disconnects from with the layer). */
export const layer = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  Layer.scoped(
    SessionStore,
    Effect.flatMap(Pool, (pool) =>
      Effect.zipRight(
        SqlSessionStore.migrate,
        Effect.flatMap(
          options.groupCommit === false
            ? dialectOn(pool)
            : groupedDialectOn(pool, options.groupCommit === true || options.groupCommit === undefined ? {} : options.groupCommit),
          SqlSessionStore.make
        )
      ))
  ).pipe(
    Layer.provide(
      driver(options).pipe(
        Layer.catchAllCause((cause) =>
          Layer.fail(new StoreUnavailable({ operation: "connect", cause: Cause.squash(cause) }))
        )
      )
    )
  )
