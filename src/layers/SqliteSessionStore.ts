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
 * The store itself is `sql/sqlite/SqliteStore`: it loads, with @effect/sql,
 * when a layer is built or `make` runs, not when troupe is imported
 * (docs/decisions/0049-a-bundled-dist.md).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as SqliteStore from "./sql/sqlite/SqliteStore.js"

export type {
  /** Where the SQLite database lives. */
  Options,
  /** The durability of a SQLite store's commits: `PRAGMA synchronous` in WAL mode. */
  Synchronous
} from "./sql/sqlite/SqliteStore.js"

const store = Effect.promise(() => import("./sql/sqlite/SqliteStore.js"))

/** The SQLite dialect over the `SqlClient` in context. */
export const dialect: typeof SqliteStore.dialect = Effect.flatMap(store, (m) => m.dialect)

/** The store over the SQLite `SqlClient` in context, which it takes for itself while the scope lasts. */
export const make: typeof SqliteStore.make = Effect.flatMap(store, (m) => m.make)

/** `make` with a durability other than the default (`Options.synchronous`). */
export const makeWithSync: typeof SqliteStore.makeWithSync = (synchronous) => Effect.flatMap(store, (m) => m.makeWithSync(synchronous))

/** The store on a SQLite database it opens (and closes with the layer). */
export const layer: typeof SqliteStore.layer = (options) => Layer.unwrapEffect(Effect.map(store, (m) => m.layer(options)))

/**
 * The store and its `StoreSignals` on one connection: the change check reads
 * `PRAGMA data_version` on the store's own connection, which only other
 * processes' commits move (`SqliteStoreSignals.makeOn`). What `Troupe.layerSqlite`
 * and the CLI use; a private `:memory:` database has no other process: no signals.
 */
export const layerWithSignals: typeof SqliteStore.layerWithSignals = (options) =>
  Layer.unwrapEffect(Effect.map(store, (m) => m.layerWithSignals(options)))

/**
 * The store on a SQLite database opened through `@effect/sql-sqlite-node`'s
 * client: every statement of a commit is its own Effect step (as `make` does).
 * The same conformance suite holds it to the same answers as `layer`, which is
 * the faster default; a failure to open is `StoreUnavailable` here too.
 */
export const layerSqlClient: typeof SqliteStore.layerSqlClient = (options) =>
  Layer.unwrapEffect(Effect.map(store, (m) => m.layerSqlClient(options)))
