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
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { StoreUnavailable } from "../../../schema/Errors.js"
import { SessionStore } from "../../../services/SessionStore.js"
import * as PgAppend from "./PgAppend.js"
import * as PgGroupCommit from "./PgGroupCommit.js"
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
const preparedOutside = (execute: PgAppend.Named): SqlStatements.Executor => {
  const names = new Map<string, string>()
  return (text, params) => {
    let name = names.get(text)
    if (name === undefined) {
      name = PgAppend.statementName("q", text, 16)
      names.set(text, name)
    }
    return execute(name, text, params)
  }
}

/** The dialect; `writes` runs the one-statement append and push (alone, or through group commit). */
const dialectOf = (sql: SqlClient.SqlClient, writes: PgAppend.Named) => {
  const execute = PgAppend.named(sql)
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

/** The PostgreSQL dialect over the `SqlClient` in context. */
export const dialect = Effect.map(SqlClient.SqlClient, (sql) => dialectOf(sql, PgAppend.named(sql)))

/** The dialect with group commit: its batches run on fibers of the scope. */
export const groupedDialect = (options: PgGroupCommit.Options = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return dialectOf(sql, yield* PgGroupCommit.make(PgAppend.named(sql), options))
  })

/** The store over the PostgreSQL `SqlClient` in context, every write sent alone. */
export const make = Effect.zipRight(SqlSessionStore.migrate, Effect.flatMap(dialect, SqlSessionStore.make))

/** The store with group commit, over the `SqlClient` in context (what `layer` builds by default). */
export const makeGrouped = (options: PgGroupCommit.Options = {}) =>
  Effect.zipRight(SqlSessionStore.migrate, Effect.flatMap(groupedDialect(options), SqlSessionStore.make))

/** The store on a PostgreSQL database it connects to (and disconnects from with the layer). */
export const layer = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  (options.groupCommit === false
    ? Layer.effect(SessionStore, make)
    : Layer.scoped(SessionStore, makeGrouped(options.groupCommit === true ? {} : options.groupCommit))).pipe(
    Layer.provide(
      // The client's module (and pg under it) loads when the layer is built, not when troupe is imported.
      Layer.unwrapEffect(Effect.map(
        Effect.promise((): Promise<typeof import("@effect/sql-pg/PgClient")> => import("@effect/sql-pg/PgClient")),
        (PgClient) =>
          PgClient.layer({
            url: Redacted.make(options.url),
            maxConnections: options.maxConnections ?? 10,
            applicationName: "troupe"
          })
      )).pipe(
        Layer.catchAllCause((cause) =>
          Layer.fail(new StoreUnavailable({ operation: "connect", cause: Cause.squash(cause) }))
        )
      )
    )
  )
