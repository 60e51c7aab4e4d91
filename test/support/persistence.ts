/**
 * "Written by one process, read back by a fresh one": writes a session with an
 * inbox item and a turn through `layer`, then reads it back in a separate
 * Node process (test/support/read-store.ts) and compares.
 */
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { LogRecord } from "../../src/schema/Record.js"
import { Session } from "../../src/schema/Session.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { agent, commit, message, principal, turnBatch } from "./fixtures.js"

const run = promisify(execFile)
const reader = fileURLToPath(new URL("./read-store.ts", import.meta.url))

/** Registers the test for a store whose data a fresh process can open with `target`. */
export const persistsAcrossProcesses = (target: string, layer: Layer.Layer<SessionStore, unknown>) =>
  it.live("data written by one process is read back by a fresh process", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const session = yield* store.create({ principal: principal(), agent: agent("persisted"), title: "kept" })
      const first = message("first")
      const second = message("second")
      yield* store.push(session.id, first)
      yield* store.push(session.id, second)
      const lease = Option.getOrThrow(yield* store.acquire(session.id, "writer", 60_000))
      yield* store.append(yield* commit(lease, 1, yield* turnBatch({ inputId: first.inputId }), [first.inputId]))
      yield* store.release(lease)
      const written = yield* store.get(session.id)
      const log = yield* store.readLog(session.id)

      const { stdout } = yield* Effect.promise(() =>
        run(process.execPath, ["--import", "tsx", reader, target, session.id], { timeout: 60_000 })
      )
      const read = JSON.parse(stdout) as { session: unknown; records: Array<unknown>; inbox: Array<string> }
      assert.deepStrictEqual(read.session, Schema.encodeSync(Session)(written))
      assert.deepStrictEqual(read.records, log.records.map((record) => Schema.encodeSync(LogRecord)(record)))
      assert.strictEqual(read.records.length, 5)
      assert.deepStrictEqual(read.inbox, [second.inputId])
    }).pipe(Effect.provide(layer)), { timeout: 60_000 })
