import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, TestClock } from "effect"
import { mkdtempSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { agent, commit, principal, turnBatch } from "./support/fixtures.js"

describe("SqliteSessionStore WAL", () => {
  it.scoped("commits stay in the WAL until the layer's own checkpoint copies them into the database file", () =>
    Effect.gen(function*() {
      const filename = join(mkdtempSync(join(tmpdir(), "troupe-wal-")), "store.db")
      const store = Context.get(yield* Layer.build(SqliteSessionStore.layer({ filename })), SessionStore)
      const session = yield* store.create({ principal: principal(), agent: agent() })
      const lease = Option.getOrThrow(yield* store.acquire(session.id, "worker", 60_000))
      let head = 1
      for (let i = 0; i < 50; i++) {
        head = (yield* store.append(yield* commit(lease, head, yield* turnBatch({ text: "x".repeat(2_000) })))).headSeq
      }
      // ~100 KiB of log: far below the autocheckpoint backstop, so nothing was copied yet.
      const before = statSync(filename).size
      assert.isAbove(statSync(`${filename}-wal`).size, 100_000)
      yield* TestClock.adjust("1 second")
      yield* Effect.yieldNow()
      assert.isAbove(statSync(filename).size, before + 100_000)
      assert.strictEqual((yield* store.readLog(session.id, { limit: 1_000 })).records.length, head)
    }))
})
