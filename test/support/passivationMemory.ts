/**
 * Run as a child process (with `--expose-gc`) by test/Passivation.test.ts:
 * what a session's actor holds, and whether passivating gives it all back.
 *
 *   passivationMemory.ts FILE
 *
 * On a SQLite file (so the log is on disk, not in the heap) with a host whose
 * actors passivate after 300 ms idle: warm-up turns on one session, then the
 * heap after GC once the actor passivated (the baseline); then `TURNS` turns
 * whose messages are `TEXT_SIZE` characters each (the scripted model echoes
 * them, so each turn adds two such messages to the conversation), the heap
 * after GC right after the last (the actor live), and again once it
 * passivated. Prints `MEMORY <json>` with the three figures in bytes.
 */
import { Effect } from "effect"
import { writeSync } from "node:fs"
import { runInNewContext } from "node:vm"
import { setFlagsFromString } from "node:v8"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import { CompactionSettings } from "../../src/schema/Compaction.js"
import { Principal } from "../../src/schema/Principal.js"
import type { SessionId } from "../../src/schema/Ids.js"
import { SessionHost } from "../../src/services/SessionHost.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Troupe from "../../src/Troupe.js"

/** How many large turns the measured phase runs. */
export const TURNS = 16
/** The length of each of their messages: a conversation of 2 × TURNS × TEXT_SIZE characters. */
export const TEXT_SIZE = 512 * 1024
/** The prefix of the line the figures are printed on. */
export const MEMORY = "MEMORY "

/** Heap after GC, in bytes, at the three points. */
export interface Figures {
  readonly baseline: number
  readonly live: number
  readonly passivated: number
}

const me = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
// Compaction off: this measures what the actor holds of a whole conversation, not what compaction leaves of it.
const agent = new Agent({
  name: "echo",
  instructions: "Echo.",
  model: new ModelRef({ name: "scripted" }),
  compaction: new CompactionSettings({ enabled: false })
})

const heapAfterGc = Effect.sync(() => {
  setFlagsFromString("--expose-gc")
  const gc = runInNewContext("gc") as () => void
  // Twice: the first pass may only queue finalizers that free more on the second.
  gc()
  gc()
  return process.memoryUsage().heapUsed
})

const program = Effect.gen(function*() {
  const sessions = yield* Sessions
  const host = yield* SessionHost
  const turn = (sessionId: SessionId, text: string) =>
    Effect.flatMap(sessions.send(me, sessionId, { text }), (accepted) =>
      sessions.awaitTurn(me, sessionId, accepted.turnId!, { after: accepted.cursor! - 1 }))
  const passivated = Effect.gen(function*() {
    while ((yield* host.running).length > 0) yield* Effect.sleep("50 millis")
  })
  const session = yield* sessions.create(me, { agent, title: "memory" })
  // Warm-up at the measured size, so code and caches the turns need are in the baseline.
  for (let i = 0; i < 4; i++) yield* turn(session.id, `${i}`.padEnd(TEXT_SIZE, "w"))
  yield* passivated
  const baseline = yield* heapAfterGc
  for (let i = 0; i < TURNS; i++) yield* turn(session.id, `${i}`.padEnd(TEXT_SIZE, "x"))
  const live = yield* heapAfterGc
  yield* passivated
  const figures: Figures = { baseline, live, passivated: yield* heapAfterGc }
  writeSync(1, `${MEMORY}${JSON.stringify(figures)}\n`)
})

const file = process.argv[2]
if (file !== undefined) {
  Effect.runPromise(
    program.pipe(Effect.provide(Troupe.layerSqlite({ filename: file }, { host: { idleTimeout: "300 millis" } })))
  ).then(
    () => process.exit(0),
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}
