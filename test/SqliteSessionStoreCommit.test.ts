import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Option } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { InputId } from "../src/schema/Ids.js"
import { InputApplied } from "../src/schema/Record.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { agent, commit, principal, turnBatch } from "./support/fixtures.js"

const file = () => join(mkdtempSync(join(tmpdir(), "troupe-sync-")), "store.db")

// The layer commits synchronously on its own connection; `make` over a client of the caller's, one Effect per statement.
const paths = {
  layer: () => Effect.map(Layer.build(SqliteSessionStore.layer({ filename: file() })), Context.get(SessionStore)),
  make: () =>
    Effect.map(
      Layer.build(Layer.scoped(SessionStore, SqliteSessionStore.make).pipe(Layer.provide(SqliteClient.layer({ filename: file() })))),
      Context.get(SessionStore)
    )
}

describe("SqliteSessionStore commit paths", () => {
  for (const [name, open] of Object.entries(paths)) {
    it.scoped(`${name}: a record the store cannot write is a defect, and the commit leaves nothing behind`, () =>
      Effect.gen(function*() {
        const store = yield* open()
        const session = yield* store.create({ principal: principal(), agent: agent() })
        const lease = Option.getOrThrow(yield* store.acquire(session.id, "worker", 60_000))
        // JSON has no BigInt: writing the body throws in the store's own code, not in the driver.
        const unwritable = new InputApplied({ inputId: InputId.make("in-1"), kind: "message", detail: { text: 1n } as unknown as { text: string } }, true)
        const exit = yield* Effect.exit(store.append(yield* commit(lease, 1, [...(yield* turnBatch()), unwritable])))
        assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
        assert.strictEqual((yield* store.get(session.id)).headSeq, 1)
        assert.strictEqual((yield* store.readLog(session.id)).records.length, 1)
        const receipt = yield* store.append(yield* commit(lease, 1, yield* turnBatch()))
        assert.strictEqual(receipt.headSeq, 5)
      }))
  }
})
