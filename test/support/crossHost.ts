/**
 * Run as a child process by test/CrossProcess.test.ts: a troupe host on a
 * SQLite file that drives one session. It creates the session, sends it a
 * message whose turn waits on a client tool, prints `SESSION <sessionId>
 * <turnId>`, and keeps running (holding the session's lease) until killed.
 * Its inbox is polled only once a minute: whatever the other process sends
 * reaches it through the file's change check.
 *
 *   crossHost.ts FILE
 */
import { Context, Effect, Layer } from "effect"
import { writeSync } from "node:fs"
import { Sessions } from "../../src/services/Sessions.js"
import * as Troupe from "../../src/Troupe.js"
import { crossAgent, crossScripts, owner } from "./crossScripts.js"

const program = Effect.gen(function*() {
  const context = yield* Layer.build(Troupe.layerSqlite({ filename: process.argv[2]! }, {
    scripts: crossScripts,
    host: { owner: "child-process", idleTimeout: "1 minute", inboxPoll: "1 minute" }
  }))
  const sessions = Context.get(context, Sessions)
  const session = yield* sessions.create(owner, { agent: crossAgent })
  const accepted = yield* sessions.send(owner, session.id, { text: "pick one" })
  writeSync(1, `SESSION ${session.id} ${accepted.turnId}\n`)
  return yield* Effect.never
})

Effect.runFork(Effect.scoped(program))
