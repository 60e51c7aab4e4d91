/**
 * Run as a separate process (under `strace`) by the durability test: opens a
 * SQLite store with the `synchronous` choice it is given and makes `count`
 * writes (sessions created), each its own transaction, so the test can count
 * the fsyncs each choice costs.
 */
import { Effect } from "effect"
import * as SqliteSessionStore from "../../src/layers/SqliteSessionStore.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { randomUUID } from "node:crypto"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import { Principal } from "../../src/schema/Principal.js"

const [filename, synchronous, count] = process.argv.slice(2)
if (!filename || (synchronous !== "normal" && synchronous !== "full") || !count) {
  console.error("usage: syncWrites FILE normal|full COUNT")
  process.exit(2)
}

// Not test/support/fixtures.ts: it imports vitest, which a plain process cannot load.
const principal = new Principal({ customerId: randomUUID(), organizationId: randomUUID(), workspaceId: randomUUID() })
const agent = new Agent({ name: "durable", instructions: "You are durable.", model: new ModelRef({ name: "scripted" }) })

const program = Effect.gen(function*() {
  const store = yield* SessionStore
  for (let i = 0; i < Number(count); i++) {
    yield* store.create({ principal, agent, title: `write ${i}` })
  }
})

await Effect.runPromise(
  program.pipe(Effect.provide(SqliteSessionStore.layer({ filename, synchronous, groupCommit: false })))
)
