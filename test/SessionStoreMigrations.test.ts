import * as Migrator from "@effect/sql/Migrator"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Option } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Migrations from "../src/layers/SessionStoreMigrations.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import * as SqlSessionStore from "../src/layers/SqlSessionStore.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { agent, commit, principal, turnBatch } from "./support/fixtures.js"

/** The migrations up to and including `last`. */
const upTo = (last: string) => {
  const names = Object.keys(Migrations.migrations)
  const kept = names.slice(0, names.indexOf(last) + 1)
  return Object.fromEntries(kept.map((name) => [name, Migrations.migrations[name as keyof typeof Migrations.migrations]]))
}

describe("SessionStoreMigrations on SQLite", () => {
  it.effect("a database of the 2_inbox_ready schema moves to WITHOUT ROWID tables and keeps its data", () =>
    Effect.gen(function*() {
      const filename = join(mkdtempSync(join(tmpdir(), "troupe-migrate-")), "old.db")
      // Written by the store on the previous schema: a session, two turns, their operations and commits.
      const before = yield* Effect.gen(function*() {
        yield* Migrator.make({})({ loader: Migrator.fromRecord(upTo("2_inbox_ready")), table: Migrations.table })
        const store = yield* SqlSessionStore.make(yield* SqliteSessionStore.dialect)
        const session = yield* store.create({ principal: principal(), agent: agent() })
        const lease = Option.getOrThrow(yield* store.acquire(session.id, "worker", 60_000))
        const first = yield* commit(lease, 1, yield* turnBatch())
        yield* store.append(first)
        const second = yield* commit(lease, 5, yield* turnBatch({ text: "again" }))
        yield* store.append(second)
        return {
          session,
          lease,
          first,
          log: (yield* store.readLog(session.id)).records,
          operations: yield* store.operations(session.id),
          receipt: yield* store.append(first)
        }
      }).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename })))

      const after = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const log = (yield* store.readLog(before.session.id)).records
        const operations = yield* store.operations(before.session.id)
        // The commits table came along: the first commit is still a replay.
        const replay = yield* store.append(before.first)
        const next = yield* store.append(yield* commit(before.lease, 9, yield* turnBatch({ text: "third" })))
        return { log, operations, replay, next }
      }).pipe(Effect.provide(SqliteSessionStore.layer({ filename })))

      assert.deepStrictEqual(after.log, before.log)
      assert.strictEqual(after.log.length, 9)
      assert.deepStrictEqual(after.operations, before.operations)
      assert.deepStrictEqual(after.replay, before.receipt)
      assert.strictEqual(after.next.headSeq, 13)

      const db = new Database(filename, { readonly: true })
      try {
        const tables = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name LIKE 'troupe_%'`)
          .all() as Array<{ name: string; sql: string }>
        const withoutRowid = tables.filter((t) => /WITHOUT ROWID\s*$/.test(t.sql)).map((t) => t.name).sort()
        assert.deepStrictEqual(withoutRowid, ["troupe_commits", "troupe_log", "troupe_operations"])
        const index = db.prepare(`SELECT tbl_name FROM sqlite_master WHERE name = 'troupe_operations_session'`).get()
        assert.deepStrictEqual(index, { tbl_name: "troupe_operations" })
        assert.strictEqual(db.pragma("integrity_check", { simple: true }), "ok")
      } finally {
        db.close()
      }
    }))
})
