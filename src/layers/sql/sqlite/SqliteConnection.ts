/**
 * The better-sqlite3 connection under the SQLite store: the database opened in
 * WAL mode, its prepared statements, and an `@effect/sql` `SqlClient` on its
 * one connection (for migrations and the statements that are not commits;
 * commits run on the handle itself, see `SqliteSessionStore`).
 *
 * @since 0.1.0
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import type Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { StoreUnavailable } from "../../../schema/Errors.js"

/** An open better-sqlite3 database and the statements prepared on it. */
export interface Handle {
  readonly db: Database.Database
  /** Runs one statement: its rows when it returns any (a query, `RETURNING`), else none. Throws as better-sqlite3 does. */
  readonly run: (text: string, params: ReadonlyArray<unknown>) => ReadonlyArray<unknown>
  readonly prepare: (text: string) => Database.Statement
}

/** The handle on an open database: statements are prepared once and kept (a few dozen texts). */
const handleOf = (db: Database.Database): Handle => {
  const statements = new Map<string, Database.Statement>()
  const prepare = (text: string) => {
    let statement = statements.get(text)
    if (statement === undefined) {
      statement = db.prepare(text)
      // The store's texts are a few dozen; anything else (migrations) is prepared once.
      if (statements.size >= 256) statements.clear()
      statements.set(text, statement)
    }
    return statement
  }
  return {
    db,
    prepare,
    run: (text, params) => {
      const statement = prepare(text)
      if (statement.reader) return statement.all(...params)
      statement.run(...params)
      return []
    }
  }
}

/**
 * better-sqlite3, loaded when a database is first opened: a program that
 * imports troupe and never opens SQLite does not load the native driver
 * (docs/decisions/0044-drivers-load-when-used.md). Failing to load it is
 * `StoreUnavailable`, as failing to open is.
 */
export const driver: Effect.Effect<typeof Database, StoreUnavailable> = Effect.tryPromise({
  try: () => import("better-sqlite3").then((module) => module.default),
  catch: (cause) => new StoreUnavailable({ operation: "open", cause })
})

/** Opens `filename` in WAL mode (closed with the scope); failing to open is `StoreUnavailable`. */
export const open = (filename: string) =>
  Effect.acquireRelease(
    Effect.flatMap(driver, (Database) => Effect.try({
      try: () => {
        const db = new Database(filename)
        try {
          // The first read of the file: a file that is not a database fails here.
          db.pragma("journal_mode = WAL")
          // Statement journals (the savepoint of each write in a group commit) in memory, not in a
          // temporary file: they only serve to roll a write back inside its open transaction, so
          // durability is the WAL's alone (its `synchronous` the store sets), and a file costs a few
          // syscalls per savepoint.
          db.pragma("temp_store = MEMORY")
        } catch (cause) {
          db.close()
          throw cause
        }
        return db
      },
      // Which file, and why: "unable to open database file" alone does not say where.
      catch: (cause) => new StoreUnavailable({ operation: "open", store: `sqlite:${filename}`, cause })
    })),
    (db) => Effect.sync(() => db.close())
  ).pipe(Effect.map(handleOf))

/** A statement's failure as `@effect/sql` reports it. */
export const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

/** An `@effect/sql` connection on the handle, for migrations and the statements that are not commits. */
const connectionOf = (handle: Handle): Connection => {
  const attempt = <A>(f: () => A) => Effect.try({ try: f, catch: failed })
  const rows = (
    params: ReadonlyArray<unknown>,
    transform: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined,
    statement: () => Database.Statement
  ) =>
    attempt(() => {
      const prepared = statement()
      const out = prepared.reader ? prepared.all(...params) as Array<object> : (prepared.run(...params), [])
      return transform === undefined ? out : transform(out)
    })
  return {
    execute: (text, params, transform) => rows(params, transform, () => handle.prepare(text)),
    executeUnprepared: (text, params, transform) => rows(params, transform, () => handle.db.prepare(text)),
    executeRaw: (text, params) => attempt(() => handle.prepare(text).run(...params)),
    executeValues: (text, params) =>
      attempt(() => {
        const prepared = handle.prepare(text)
        if (!prepared.reader) {
          prepared.run(...params)
          return []
        }
        try {
          return prepared.raw(true).all(...params) as Array<Array<unknown>>
        } finally {
          prepared.raw(false)
        }
      }),
    executeStream: () => Stream.dieMessage("executeStream is not supported by troupe's SQLite connection")
  }
}

/**
 * A `SqlClient` on the handle's one connection: one user at a time, a
 * transaction holding it until it ends (as `@effect/sql-sqlite-node` does).
 */
export const clientOf = (handle: Handle) =>
  Effect.gen(function*() {
    const connection = connectionOf(handle)
    const semaphore = yield* Effect.makeSemaphore(1)
    return yield* SqlClient.make({
      acquirer: semaphore.withPermits(1)(Effect.succeed(connection)),
      transactionAcquirer: Effect.uninterruptibleMask((restore) =>
        Effect.as(
          Effect.zipRight(
            restore(semaphore.take(1)),
            Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
          ),
          connection
        )
      ),
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]]
    })
  }).pipe(Effect.provide(Reactivity.layer))
