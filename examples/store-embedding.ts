import { Effect, type Layer } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import type { StoreUnavailable } from "../src/schema/Errors.js"
import { Principal } from "../src/schema/Principal.js"
import { SessionStore } from "../src/services/SessionStore.js"

// All three layers provide the same SessionStore service; pick one at the edge of the program.
const storeLayer = (target: string): Layer.Layer<SessionStore, StoreUnavailable> =>
  target === "memory" ? MemorySessionStore.layer
  : target.startsWith("postgres://") ? PgSessionStore.layer({ url: target, maxConnections: 10 })
  : SqliteSessionStore.layer({ filename: target }) // a file path, or ":memory:"

// Program code sees only the port: here, the newest root sessions of one principal's workspace.
const newestRoots = (principal: Principal) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const page = yield* store.list({ principal, scope: "roots", limit: 10 })
    return page.items.map((session) => `${session.id}  ${session.status}  ${session.title ?? ""}`)
  })

// The workspace examples/quickstart.ts writes to; try `npx tsx examples/store-embedding.ts ~/.troupe/troupe.db`.
const program = newestRoots(new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})).pipe(
  Effect.provide(storeLayer(process.argv[2] ?? "memory"))
)
Effect.runPromise(program).then(
  (lines) => console.log(lines.join("\n") || "(no sessions)"),
  (error: Error) => { console.error(error.message); process.exitCode = 1 }
)
