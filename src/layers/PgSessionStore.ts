/**
 * The `SessionStore` on PostgreSQL (`@effect/sql-pg`). The session row is
 * locked with `SELECT … FOR UPDATE`, and lease time is the database's clock,
 * so every worker sharing the database agrees on expiry.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Effect, Layer, Redacted } from "effect"
import { StoreUnavailable } from "../schema/Errors.js"
import { SessionStore } from "../services/SessionStore.js"
import * as PgAppend from "../internal/PgAppend.js"
import * as PgPush from "../internal/PgPush.js"
import * as SqlSessionStore from "./SqlSessionStore.js"

/** How to reach the database. */
export interface Options {
  /** A `postgres://` URL; `?options=-c%20search_path%3Dname` selects a schema. */
  readonly url: string
  /** Pool size (default 10). */
  readonly maxConnections?: number | undefined
}

/** The PostgreSQL dialect over the `SqlClient` in context. */
export const dialect = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // clock_timestamp(), not now(): now() is frozen at transaction start, before the row lock.
  const clock: SqlSessionStore.Clock = {
    text: "(extract(epoch from clock_timestamp()) * 1000)::bigint",
    params: []
  }
  const execute = PgAppend.named(sql)
  return {
    placeholders: "$n",
    clock: Effect.succeed(clock),
    lockRow: "FOR UPDATE",
    transaction: sql.withTransaction,
    // One statement per commit: every round trip costs ~150–250 µs of CPU here.
    append: PgAppend.strategy(clock.text, { execute }),
    push: PgPush.strategy(clock.text, execute)
  } satisfies SqlSessionStore.Dialect
})

/** The store over the PostgreSQL `SqlClient` in context. */
export const make = Effect.zipRight(SqlSessionStore.migrate, Effect.flatMap(dialect, SqlSessionStore.make))

/** The store on a PostgreSQL database it connects to (and disconnects from with the layer). */
export const layer = (options: Options): Layer.Layer<SessionStore, StoreUnavailable> =>
  Layer.effect(SessionStore, make).pipe(
    Layer.provide(
      PgClient.layer({
        url: Redacted.make(options.url),
        maxConnections: options.maxConnections ?? 10,
        applicationName: "troupe"
      }).pipe(
        Layer.catchAllCause((cause) =>
          Layer.fail(new StoreUnavailable({ operation: "connect", cause: Cause.squash(cause) }))
        )
      )
    )
  )
