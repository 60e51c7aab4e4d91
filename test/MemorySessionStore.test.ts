import { TestClock } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import { sessionStoreSuite, type StoreBackend } from "./conformance/SessionStoreSuite.js"
import { sessionTreeSuite } from "./conformance/SessionTreeSuite.js"

// One store for the whole suite: tests isolate themselves by workspace, and the
// memory store's clock is Effect's, so TestClock drives lease expiry.
const memory: StoreBackend = {
  name: "memory",
  layer: MemorySessionStore.layer,
  advance: (millis) => TestClock.adjust(millis),
  ttl: 1_000
}
sessionStoreSuite(memory)
sessionTreeSuite(memory)
