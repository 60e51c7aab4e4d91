import { describe } from "@effect/vitest"
import { TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { sessionStoreSuite } from "./conformance/SessionStoreSuite.js"
import { persistsAcrossProcesses } from "./support/persistence.js"

const filename = join(mkdtempSync(join(tmpdir(), "troupe-sqlite-")), "store.db")

// Two layers over one file are two connections: the suite's "second store".
sessionStoreSuite({
  name: "sqlite",
  layer: SqliteSessionStore.layer({ filename }),
  second: SqliteSessionStore.layer({ filename }),
  advance: (millis) => TestClock.adjust(millis),
  ttl: 1_000
})

describe("SqliteSessionStore file", () => {
  persistsAcrossProcesses(`sqlite:${filename}`, SqliteSessionStore.layer({ filename }))
})
