import * as Migrator from "@effect/sql/Migrator"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, type Layer, Option, Redacted, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Migrations from "../../../src/layers/sql/Migrations.js"
import * as SqliteSessionStore from "../../../src/layers/SqliteSessionStore.js"
import * as PgSessionStore from "../../../src/layers/PgSessionStore.js"
import { Agent } from "../../../src/schema/Agent.js"
import { type CallbackId, makeCallbackId, makeSessionId } from "../../../src/schema/Ids.js"
import { CallbackAnswer, Command } from "../../../src/schema/Inbox.js"
import { canonical } from "../../../src/schema/Json.js"
import { Principal } from "../../../src/schema/Principal.js"
import { SessionStore } from "../../../src/services/SessionStore.js"
import { agent, approvalWait, commit, failure, inputId, principal, turnBatch } from "../../support/fixtures.js"
import { availability, freshSchema } from "../../support/postgres.js"

/** The migrations up to and including `last`. */
const upTo = (last: string) => {
  const names = Object.keys(Migrations.migrations)
  const kept = names.slice(0, names.indexOf(last) + 1)
  return Object.fromEntries(kept.map((name) => [name, Migrations.migrations[name as keyof typeof Migrations.migrations]]))
}

/**
 * Moves what the store wrote in `source` into `target` (a database on an older
 * schema): every column the older table has, row by row.
 */
const copyInto = (target: string, source: string) => {
  const db = new Database(target)
  try {
    db.prepare(`ATTACH DATABASE ? AS src`).run(source)
    for (const table of ["troupe_sessions", "troupe_inbox", "troupe_log", "troupe_commits", "troupe_operations", "troupe_callbacks"]) {
      const columns = (db.prepare(`PRAGMA main.table_info(${table})`).all() as Array<{ name: string }>).map((c) => c.name)
      db.exec(`INSERT INTO main.${table} (${columns.join(", ")}) SELECT ${columns.join(", ")} FROM src.${table}`)
    }
    db.exec(`DETACH DATABASE src`)
  } finally {
    db.close()
  }
}

/**
 * 5_callback_answers over callbacks that predate it: the store writes a waiting
 * session (two open callbacks, one answer admitted), then the column is dropped
 * and the migration forgotten, with a second answer to the same callback in the
 * inbox (what older stores let in). Reopened, the store migrates again: the
 * first waiting answer marks its callback, so a further one is refused, and
 * the other callback still takes one.
 */
const callbackAnswersCarryOver = (
  store: Layer.Layer<SessionStore, unknown>,
  client: Layer.Layer<SqlClient.SqlClient, unknown>
) =>
  Effect.gen(function*() {
    const written = yield* Effect.gen(function*() {
      const store = yield* SessionStore
      const session = yield* store.create({ principal: principal(), agent: agent() })
      const lease = Option.getOrThrow(yield* store.acquire(session.id, "worker", 60_000))
      const [a, b] = [yield* makeCallbackId, yield* makeCallbackId]
      const { operationId, records, turnId } = yield* approvalWait([a, b])
      yield* store.append(yield* commit(lease, 1, records))
      const answer = (callbackId: CallbackId, decision: string) =>
        new CallbackAnswer({ inputId: inputId(), callbackId, turnId, operationId, result: { decision } })
      const first = answer(a, "approve")
      yield* store.admitAnswer(session.id, first)
      return { id: session.id, a, b, first, answer }
    }).pipe(Effect.provide(store))
    const { a, answer, b, first, id } = written
    const late = answer(a, "deny")
    yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO troupe_inbox (session_id, position, input_id, command, received_at)
        VALUES (${id}, 2, ${late.inputId}, ${canonical(Schema.encodeSync(Command)(late))}, 1)`
      yield* sql`UPDATE troupe_sessions SET inbox_head = 2, ready_count = ready_count + 1 WHERE id = ${id}`
      yield* sql`ALTER TABLE troupe_callbacks DROP COLUMN answer_input_id`
      yield* sql`DELETE FROM troupe_migrations WHERE migration_id >= 5`
    }).pipe(Effect.provide(client))

    const other = answer(b, "approve")
    const after = yield* Effect.gen(function*() {
      const store = yield* SessionStore
      const refused = yield* failure(store.admitAnswer(id, answer(a, "approve")), "StaleCallback")
      yield* store.admitAnswer(id, other)
      return { refused, inbox: (yield* store.readInbox(id)).map((item) => item.command.inputId) }
    }).pipe(Effect.provide(store))
    assert.strictEqual(after.refused.reason, "answered")
    assert.deepStrictEqual(after.inbox, [first.inputId, late.inputId, other.inputId])
    const marks = yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ callback_id: string; answer_input_id: string | null }>`SELECT callback_id, answer_input_id
        FROM troupe_callbacks WHERE session_id = ${id} ORDER BY opened_seq`
    }).pipe(Effect.provide(client))
    assert.deepStrictEqual(marks.map((m) => [m.callback_id, m.answer_input_id]), [[a, first.inputId], [b, other.inputId]])
  })

describe("Migrations on SQLite", () => {
  it.effect("5_callback_answers marks each open callback with the first answer already waiting for it", () =>
    Effect.gen(function*() {
      const filename = join(mkdtempSync(join(tmpdir(), "troupe-migrate-")), "answers.db")
      yield* callbackAnswersCarryOver(SqliteSessionStore.layer({ filename }), SqliteClient.layer({ filename }))
    }))


  it.effect("a database of the 2_inbox_ready schema moves to WITHOUT ROWID tables and keeps its data", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-migrate-"))
      const filename = join(dir, "old.db")
      const written = join(dir, "written.db")
      const owner = principal()
      // Rows the store writes (a session, two turns, their operations and commits), moved into a
      // database on the 2_inbox_ready schema: what an older store would have left there.
      const before = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const session = yield* store.create({ principal: owner, agent: agent(), idempotencyKey: "old-key" })
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
      }).pipe(Effect.provide(SqliteSessionStore.layer({ filename: written })))
      yield* Migrator.make({})({ loader: Migrator.fromRecord(upTo("2_inbox_ready")), table: Migrations.table }).pipe(
        Effect.provide(SqliteClient.layer({ filename }))
      )
      copyInto(filename, written)

      const after = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const log = (yield* store.readLog(before.session.id)).records
        const operations = yield* store.operations(before.session.id)
        // The commits table came along: the first commit is still a replay.
        const replay = yield* store.append(before.first)
        const next = yield* store.append(yield* commit(before.lease, 9, yield* turnBatch({ text: "third" })))
        // The tenancy came from the stored principal: the owner lists it, a principal of the same
        // workspace under another customer does not, and the idempotency key is the owner's.
        const listed = yield* store.list({ principal: owner, scope: "roots" })
        const neighbour = new Principal({ ...principal(), workspaceId: owner.workspaceId })
        const hidden = yield* store.list({ principal: neighbour, scope: "roots" })
        const again = yield* store.create({ principal: owner, agent: agent(), idempotencyKey: "old-key" })
        const theirs = yield* store.create({ principal: neighbour, agent: agent(), idempotencyKey: "old-key" })
        return { log, operations, replay, next, listed, hidden, again, theirs }
      }).pipe(Effect.provide(SqliteSessionStore.layer({ filename })))

      assert.deepStrictEqual(after.log, before.log)
      assert.strictEqual(after.log.length, 9)
      assert.deepStrictEqual(after.operations, before.operations)
      assert.deepStrictEqual(after.replay, before.receipt)
      assert.strictEqual(after.next.headSeq, 13)
      assert.deepStrictEqual(after.listed.items.map((s) => s.id), [before.session.id])
      assert.deepStrictEqual(after.hidden.items, [])
      assert.strictEqual(after.again.id, before.session.id)
      assert.notStrictEqual(after.theirs.id, before.session.id)

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

const pg = await availability()

describe.skipIf(!pg.run)("Migrations on PostgreSQL", () => {
  it.effect("5_callback_answers marks each open callback with the first answer already waiting for it", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(() => freshSchema())
      yield* callbackAnswersCarryOver(
        PgSessionStore.layer({ url, maxConnections: 2 }),
        PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })
      ).pipe(Effect.ensuring(Effect.promise(drop)))
    }))

  it.effect("4_tenancy_and_trees fills the tenancy of existing rows from their stored principal", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(() => freshSchema())
      const owner = principal()
      const neighbour = new Principal({ ...principal(), workspaceId: owner.workspaceId })
      const id = yield* makeSessionId
      const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })
      yield* Effect.gen(function*() {
        yield* Migrator.make({})({ loader: Migrator.fromRecord(upTo("3_without_rowid")), table: Migrations.table })
        const sql = yield* SqlClient.SqlClient
        // A row as the store wrote it before the tenancy column existed (uppercase ids: compared without case).
        const stored = { ...Schema.encodeSync(Principal)(owner), customerId: owner.customerId.toUpperCase() }
        yield* sql`INSERT INTO troupe_sessions (id, workspace_id, principal, agent, root_id, path, agent_path,
          busy_policy, metadata, idempotency_key, fingerprint, head_seq, created_at, updated_at)
          VALUES (${id}, ${owner.workspaceId.toLowerCase()}, ${JSON.stringify(stored)},
            ${JSON.stringify(Schema.encodeSync(Agent)(agent()))}, ${id}, ${`/${id}/`}, ${JSON.stringify(["assistant"])},
            'queue', '{}', 'old-key', 'x', 1, 1, 1)`
      }).pipe(Effect.provide(client))
      const after = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        return {
          mine: yield* store.list({ principal: owner, scope: "roots" }),
          theirs: yield* store.list({ principal: neighbour, scope: "roots" }),
          children: yield* Effect.flip(store.children(neighbour, id))
        }
      }).pipe(Effect.provide(PgSessionStore.layer({ url, maxConnections: 2 })), Effect.ensuring(Effect.promise(drop)))
      assert.deepStrictEqual(after.mine.items.map((s) => s.id), [id])
      assert.deepStrictEqual(after.theirs.items, [])
      assert.strictEqual(after.children._tag, "SessionNotFound")
    }))
})
