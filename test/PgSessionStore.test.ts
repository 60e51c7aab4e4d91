import { afterAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import { sessionStoreSuite, type StoreBackend } from "./conformance/SessionStoreSuite.js"
import { sessionTreeSuite } from "./conformance/SessionTreeSuite.js"
import { persistsAcrossProcesses } from "./support/persistence.js"
import { availability, freshSchema } from "./support/postgres.js"

const pg = await availability()

if (pg.run) {
  // A schema of its own per run, so runs (and files) never see each other's rows.
  const { drop, url } = await freshSchema()
  afterAll(drop)

  const postgres: StoreBackend = {
    name: "postgres",
    // Every write alone; the default, group commit, runs the suite below.
    layer: PgSessionStore.layer({ url, maxConnections: 8, groupCommit: false }),
    second: PgSessionStore.layer({ url, maxConnections: 2, groupCommit: false }),
    // The store's clock is the database's, so only real time moves it; a plain
    // timer, because the suite runs under TestClock, where Effect.sleep never fires.
    advance: (millis) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis))),
    ttl: 300
  }
  sessionStoreSuite(postgres)
  sessionTreeSuite(postgres)

  // The same store with group commit (the default), one write round trip at a time so that concurrent writes batch (decision 0021).
  const grouped: StoreBackend = {
    ...postgres,
    name: "postgres with group commit",
    layer: PgSessionStore.layer({ url, maxConnections: 8, groupCommit: { inFlight: 1 } }),
    second: PgSessionStore.layer({ url, maxConnections: 2, groupCommit: { inFlight: 1 } })
  }
  sessionStoreSuite(grouped)
  sessionTreeSuite(grouped)

  describe("PgSessionStore database", () => {
    persistsAcrossProcesses(`postgres:${url}`, PgSessionStore.layer({ url, maxConnections: 2 }))
  })
} else {
  describe.skip(`SessionStore conformance: postgres (${pg.reason})`, () => {
    it("needs a PostgreSQL server", () => {})
  })
}
