/**
 * The store's statement runner on a real SQLite `SqlClient`: placeholder
 * lists, `?` kept or numbered `$n` for PostgreSQL's style, and a statement run
 * on the current transaction's connection when there is one. On PostgreSQL, a
 * statement whose caller is interrupted while it waits for a pool connection
 * does not leak that connection.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Redacted } from "effect"
import * as SqliteConnection from "../../../src/layers/sql/sqlite/SqliteConnection.js"
import * as SqlStatements from "../../../src/layers/sql/SqlStatements.js"
import { availability, baseUrl } from "../../support/postgres.js"

const withClient = <A, E>(use: (sql: SqlClient.SqlClient) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const sql = yield* SqliteConnection.clientOf(yield* SqliteConnection.open(":memory:"))
    return yield* Effect.provideService(use(sql), SqlClient.SqlClient, sql)
  })

describe("SqlStatements", () => {
  it("writes placeholder lists", () => {
    assert.strictEqual(SqlStatements.rows(2, 3), "(?, ?, ?), (?, ?, ?)")
    assert.strictEqual(SqlStatements.rows(1, 1), "(?)")
    assert.strictEqual(SqlStatements.list(3), "?, ?, ?")
  })

  it("keeps a statement's text by shape: built once per shape, the same string after", () => {
    const built: Array<string> = []
    const text = SqlStatements.shaped((clause: string, count: number) => {
      built.push(`${clause}/${count}`)
      return `SELECT x FROM t WHERE x IN (${SqlStatements.list(count)}) ${clause}`
    })
    const first = text("FOR UPDATE", 2)
    assert.strictEqual(first, "SELECT x FROM t WHERE x IN (?, ?) FOR UPDATE")
    assert.strictEqual(text("FOR UPDATE", 2), first)
    assert.strictEqual(text("", 2), "SELECT x FROM t WHERE x IN (?, ?) ")
    assert.strictEqual(text("FOR UPDATE", 3), "SELECT x FROM t WHERE x IN (?, ?, ?) FOR UPDATE")
    assert.strictEqual(text("", 2), "SELECT x FROM t WHERE x IN (?, ?) ")
    assert.deepStrictEqual(built, ["FOR UPDATE/2", "/2", "FOR UPDATE/3"])
    // A shape past the largest kept is built each time, and still right.
    assert.strictEqual(text("", 300).split("?").length - 1, 300)
    assert.strictEqual(text("", 300).split("?").length - 1, 300)
    assert.deepStrictEqual(built.slice(3), ["/300", "/300"])
  })

  it.scoped("runs ?-placeholder SQL, inside a transaction on its connection", () =>
    withClient((sql) =>
      Effect.gen(function*() {
        const statements = yield* SqlStatements.make("?")
        yield* statements.query("CREATE TABLE t (x INTEGER, y TEXT)", [])
        yield* statements.query(`INSERT INTO t (x, y) VALUES ${SqlStatements.rows(2, 2)}`, [1, "a", 2, "b"])
        assert.deepStrictEqual(
          yield* statements.query(`SELECT x, y FROM t WHERE x IN (${SqlStatements.list(2)}) ORDER BY x`, [1, 2]),
          [{ x: 1, y: "a" }, { x: 2, y: "b" }]
        )
        // Rolled back with the transaction: the statement ran on its connection, not on another.
        yield* Effect.ignore(sql.withTransaction(
          Effect.andThen(statements.query("INSERT INTO t (x, y) VALUES (?, ?)", [3, "c"]), Effect.fail("undo"))
        ))
        assert.deepStrictEqual(yield* statements.query("SELECT count(*) AS n FROM t", []), [{ n: 2 }])
      })
    ))

  it.scoped("numbers placeholders for $n databases, and runs outside a transaction on the given executor", () =>
    withClient(() =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const statements = yield* SqlStatements.make("$n", (text, params) =>
          Effect.sync(() => {
            seen.push(`${text} ${JSON.stringify(params)}`)
            return []
          }))
        yield* statements.query("SELECT ? + ?, ?", [1, 2, 3])
        yield* statements.query("SELECT ? + ?, ?", [4, 5, 6])
        assert.deepStrictEqual(seen, ["SELECT $1 + $2, $3 [1,2,3]", "SELECT $1 + $2, $3 [4,5,6]"])
      })
    ))
})

const pg = await availability()

describe.skipIf(!pg.run)("SqlStatements on PostgreSQL", () => {
  const onePool = PgClient.layer({ url: Redacted.make(baseUrl), maxConnections: 1 })

  it.scopedLive("a statement interrupted while it waits for the pool's connection does not leak it", () =>
    Effect.gen(function*() {
      const statements = yield* SqlStatements.make("$n")
      // The pool's one connection is busy for 300 ms; meanwhile a statement queues for it and is interrupted.
      const busy = yield* Effect.fork(statements.query("SELECT pg_sleep(0.3)", []))
      yield* Effect.sleep("50 millis")
      const waiting = yield* Effect.fork(statements.query("SELECT 1 AS one", []))
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(waiting)
      yield* Fiber.join(busy)
      const after = yield* Effect.exit(Effect.timeout(statements.query("SELECT 2 AS two", []), "3 seconds"))
      assert.isTrue(Exit.isSuccess(after), "the connection came back to the pool")
    }).pipe(Effect.provide(Layer.orDie(onePool))), 10_000)
})
