/**
 * The `SessionStore` on PostgreSQL (`@effect/sql-pg`). The session row is
 * locked with `SELECT … FOR UPDATE`, and lease time is the database's clock,
 * so every worker sharing the database agrees on expiry.
 *
 * The store itself is `sql/pg/PgStore`: it loads, with @effect/sql, when a
 * layer is built or `make` runs, not when troupe is imported
 * (docs/decisions/0049-a-bundled-dist.md).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as PgStore from "./sql/pg/PgStore.js"

export type {
  /** How to reach the database. */
  Options
} from "./sql/pg/PgStore.js"

const store = Effect.promise(() => import("./sql/pg/PgStore.js"))

/** The PostgreSQL dialect over the `SqlClient` in context. */
export const dialect: typeof PgStore.dialect = Effect.flatMap(store, (m) => m.dialect)

/** The dialect with group commit: its batches run on fibers of the scope. */
export const groupedDialect: typeof PgStore.groupedDialect = (options) => Effect.flatMap(store, (m) => m.groupedDialect(options))

/** The store over the PostgreSQL `SqlClient` in context, every write sent alone. */
export const make: typeof PgStore.make = Effect.flatMap(store, (m) => m.make)

/** The store with group commit, over the `SqlClient` in context (what `layer` builds by default). */
export const makeGrouped: typeof PgStore.makeGrouped = (options) => Effect.flatMap(store, (m) => m.makeGrouped(options))

/** The store on a PostgreSQL database it connects to (and disconnects from with the layer). */
export const layer: typeof PgStore.layer = (options) => Layer.unwrapEffect(Effect.map(store, (m) => m.layer(options)))
