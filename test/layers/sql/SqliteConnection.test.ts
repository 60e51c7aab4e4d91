/**
 * The better-sqlite3 connection under the SQLite store: opening (WAL mode, a
 * file that is not a database refused as `StoreUnavailable`, the database
 * closed with the scope), the handle's prepared statements, and the
 * `SqlClient` on its one connection.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteConnection from "../../../src/layers/sql/sqlite/SqliteConnection.js"

const dir = () => mkdtempSync(join(tmpdir(), "troupe-sqlite-connection-"))

describe("SqliteConnection", () => {
  it.effect("opens a file in WAL mode (statement journals in memory) and closes it with the scope", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const handle = yield* Scope.extend(SqliteConnection.open(join(dir(), "a.db")), scope)
      assert.deepStrictEqual(handle.run("PRAGMA journal_mode", []), [{ journal_mode: "wal" }])
      // Statement journals, which only roll back inside a transaction, stay in memory (`synchronous` is the store's to set).
      assert.deepStrictEqual(handle.run("PRAGMA temp_store", []), [{ temp_store: 2 }])
      assert.isTrue(handle.db.open)
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(handle.db.open)
    }))

  it.effect("a file that is not a database is StoreUnavailable on open", () =>
    Effect.gen(function*() {
      const filename = join(dir(), "not.db")
      writeFileSync(filename, "this is not a database, only text long enough to be read as a header".repeat(20))
      const exit = yield* Effect.exit(Effect.scoped(SqliteConnection.open(filename)))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(error?._tag, "StoreUnavailable")
        assert.strictEqual(error?.operation, "open")
      }
    }))

  it.scoped("the handle prepares each text once, and runs readers and writers alike", () =>
    Effect.gen(function*() {
      const handle = yield* SqliteConnection.open(":memory:")
      assert.deepStrictEqual(handle.run("CREATE TABLE t (x INTEGER)", []), [])
      assert.deepStrictEqual(handle.run("INSERT INTO t (x) VALUES (?), (?)", [1, 2]), [])
      assert.deepStrictEqual(handle.run("INSERT INTO t (x) VALUES (?) RETURNING x", [3]), [{ x: 3 }])
      assert.deepStrictEqual(handle.run("SELECT x FROM t ORDER BY x", []), [{ x: 1 }, { x: 2 }, { x: 3 }])
      assert.strictEqual(handle.prepare("SELECT x FROM t ORDER BY x"), handle.prepare("SELECT x FROM t ORDER BY x"))
      assert.throws(() => handle.run("SELECT nope FROM t", []))
    }))

  it.scoped("the SqlClient runs on the handle's connection; a bad statement is a SqlError", () =>
    Effect.gen(function*() {
      const handle = yield* SqliteConnection.open(":memory:")
      const sql = yield* SqliteConnection.clientOf(handle)
      yield* sql`CREATE TABLE t (x INTEGER)`
      yield* sql.withTransaction(Effect.andThen(sql`INSERT INTO t (x) VALUES (${1})`, sql`INSERT INTO t (x) VALUES (${2})`))
      assert.deepStrictEqual(handle.run("SELECT x FROM t ORDER BY x", []), [{ x: 1 }, { x: 2 }])
      assert.deepStrictEqual(yield* sql`SELECT x FROM t WHERE x = ${2}`, [{ x: 2 }])
      const failure = yield* Effect.flip(sql`SELECT nope FROM t`)
      assert.strictEqual(failure._tag, "SqlError")
      // A transaction that fails leaves nothing behind.
      yield* Effect.ignore(sql.withTransaction(Effect.andThen(sql`INSERT INTO t (x) VALUES (${3})`, Effect.fail("no"))))
      assert.deepStrictEqual(handle.run("SELECT count(*) AS n FROM t", []), [{ n: 2 }])
    }))
})
