import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { sessionStoreSuite, type StoreBackend } from "./conformance/SessionStoreSuite.js"
import { sessionTreeSuite } from "./conformance/SessionTreeSuite.js"
import { persistsAcrossProcesses } from "./support/persistence.js"

const filename = join(mkdtempSync(join(tmpdir(), "troupe-sqlite-")), "store.db")

// Two layers over one file are two connections: the suite's "second store". Group commit off: every write alone.
const sqlite: StoreBackend = {
  name: "sqlite",
  layer: SqliteSessionStore.layer({ filename, groupCommit: false }),
  second: SqliteSessionStore.layer({ filename, groupCommit: false }),
  advance: (millis) => TestClock.adjust(millis),
  ttl: 1_000
}
sessionStoreSuite(sqlite)
sessionTreeSuite(sqlite)

// The same store with group commit on (the default): several sessions' writes in one transaction (decisions 0018, 0024).
const grouped = join(mkdtempSync(join(tmpdir(), "troupe-sqlite-group-")), "store.db")
const sqliteGrouped: StoreBackend = {
  name: "sqlite with group commit",
  layer: SqliteSessionStore.layer({ filename: grouped, groupCommit: true }),
  second: SqliteSessionStore.layer({ filename: grouped, groupCommit: true }),
  advance: (millis) => TestClock.adjust(millis),
  ttl: 1_000
}
sessionStoreSuite(sqliteGrouped)
sessionTreeSuite(sqliteGrouped)

// The same store through @effect/sql-sqlite-node's client, one Effect per statement (decision 0006).
const viaClient = join(mkdtempSync(join(tmpdir(), "troupe-sqlite-client-")), "store.db")
const sqliteClient: StoreBackend = {
  name: "sqlite through @effect/sql-sqlite-node",
  layer: SqliteSessionStore.layerSqlClient({ filename: viaClient }),
  second: SqliteSessionStore.layerSqlClient({ filename: viaClient }),
  advance: (millis) => TestClock.adjust(millis),
  ttl: 1_000
}
sessionStoreSuite(sqliteClient)
sessionTreeSuite(sqliteClient)

describe("SqliteSessionStore file", () => {
  persistsAcrossProcesses(`sqlite:${filename}`, SqliteSessionStore.layer({ filename }))
})

describe("SqliteSessionStore opening", () => {
  for (const [name, layer] of [["layer", SqliteSessionStore.layer], ["layerSqlClient", SqliteSessionStore.layerSqlClient]] as const) {
    it.effect(`${name}: a file that is not a database is StoreUnavailable, not a crash`, () =>
      Effect.gen(function*() {
        const bogus = join(mkdtempSync(join(tmpdir(), "troupe-sqlite-")), "not-a-db")
        writeFileSync(bogus, "this is not a SQLite database, just text that is long enough to have a header")
        const error = yield* Effect.flip(Layer.build(layer({ filename: bogus })).pipe(Effect.scoped))
        assert.strictEqual(error._tag, "StoreUnavailable")
      }))

    it.effect(`${name}: a path in a missing directory is StoreUnavailable, not a crash`, () =>
      Effect.gen(function*() {
        const missing = join(tmpdir(), `troupe-missing-${Date.now()}`, "deeper", "store.db")
        const error = yield* Effect.flip(Layer.build(layer({ filename: missing })).pipe(Effect.scoped))
        assert.strictEqual(error._tag, "StoreUnavailable")
        assert.strictEqual(error.operation, "open")
      }))
  }
})
