/**
 * Run as a child process by test/CompactionCrash.test.ts: the turn of
 * test/support/compactionScript.ts on a SQLite file.
 *
 *   crashCompaction.ts FILE start|resume|clean DIR
 *
 * - `start` creates the session and sends the message; when the turn makes
 *   its summary call it prints `CRASH-POINT summary` and hangs there, for the
 *   parent to SIGKILL it. (A turn that ends instead prints `NO-CRASH`, exit 3.)
 * - `resume` only runs a host: it picks the session up once the dead owner's
 *   lease expires, waits for the turn to end, and prints `RESULT <json>`.
 * - `clean` runs the same turn uninterrupted and prints `RESULT <json>`.
 *
 * Each summary call is counted in DIR/summary-calls (one line: the mode).
 */
import { Effect, Layer, Stream } from "effect"
import { appendFileSync, writeSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as SessionState from "../../src/actors/SessionState.js"
import * as Transcript from "../../src/actors/Transcript.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import type { LogRecord } from "../../src/schema/Record.js"
import * as Model from "../../src/services/Model.js"
import { Sessions } from "../../src/services/Sessions.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"
import * as Script from "./compactionScript.js"
import { Principal } from "../../src/schema/Principal.js"

/** The line a `start` process prints at its crash point. */
export const MARKER = "CRASH-POINT summary"

/** The prefix of a result line. */
export const RESULT = "RESULT "

/** What `resume` and `clean` print. */
export interface CompactionResult {
  readonly output: string
  /** The conversation folded from the log after the turn. */
  readonly transcript: ReadonlyArray<Model.Message>
  /** The modes of the log's `context_compacted` records, in order. */
  readonly compactions: ReadonlyArray<string>
  /** How many summary operations the log holds. */
  readonly summaryOperations: number
}

/** The principal of every process (the same one, so `resume` sees the session `start` made). */
export const who = new Principal({
  customerId: "00000000-0000-4000-8000-00000000d001",
  organizationId: "00000000-0000-4000-8000-00000000d002",
  workspaceId: "00000000-0000-4000-8000-00000000d003"
})

const main = () => {
  const [filename, mode, dir] = process.argv.slice(2)
  if (!filename || (mode !== "start" && mode !== "resume" && mode !== "clean") || !dir) {
    console.error("usage: crashCompaction FILE start|resume|clean DIR")
    process.exit(2)
  }
  const say = (line: string) => writeSync(1, `${line}\n`)
  const model = Layer.effect(
    Model.Model,
    Effect.map(ScriptedModel.make(Script.scripts), (inner) =>
      Model.Model.of({
        stream: (request) =>
          request.purpose !== "summary" ? inner.stream(request) : Stream.unwrap(Effect.sync(() => {
            appendFileSync(join(dir, "summary-calls"), `${mode}\n`)
            if (mode !== "start") return inner.stream(request)
            say(MARKER)
            return Stream.never
          }))
      }))
  )
  const runtime = Troupe.layerSqlite({ filename }, {
    host: { leaseTtl: "1 second", pollInterval: "200 millis", owner: `compaction-${mode}-${process.pid}` },
    tools: Toolkit.layer([Script.fetchTool, Script.recallTool]),
    model
  })

  const result = (sessionId: Parameters<SessionStore["Type"]["readLog"]>[0], output: string) =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const log: Array<LogRecord> = []
      for (let after = 0;;) {
        const page = yield* store.readLog(sessionId, { after, limit: 1_000 })
        log.push(...page.records)
        after = page.cursor
        if (!page.more) break
      }
      const state = SessionState.fold(SessionState.empty(sessionId), log)
      const printed: CompactionResult = {
        output,
        transcript: Transcript.toArray(state.transcript),
        compactions: log.flatMap((r) => (r.body._tag === "context_compacted" ? [r.body.mode] : [])),
        summaryOperations: log.filter((r) => r.body._tag === "operation_started" && r.body.kind === "compaction").length
      }
      say(`${RESULT}${JSON.stringify(printed)}`)
      return 0
    })

  const program = Effect.gen(function*() {
    const sessions = yield* Sessions
    if (mode === "resume") {
      const page = yield* sessions.list(who)
      const session = page.items[0]
      if (session === undefined || page.items.length !== 1) return yield* Effect.dieMessage("expected one session")
      const store = yield* SessionStore
      const first = (yield* store.readLog(session.id, { limit: 1_000 })).records.find((r) => r.body._tag === "turn_started")
      if (first?.body._tag !== "turn_started") return yield* Effect.dieMessage("the killed process started no turn")
      const ended = yield* sessions.awaitTurn(who, session.id, first.body.turnId, { after: 0 })
      return yield* result(session.id, ended.output)
    }
    const session = yield* sessions.create(who, { agent: Script.agent })
    const accepted = yield* sessions.send(who, session.id, { text: "read a and b" })
    const ended = yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
    if (mode === "start") {
      say("NO-CRASH")
      return 3
    }
    return yield* result(session.id, ended.output)
  })

  Effect.runPromise(program.pipe(
    Effect.timeoutFail({ duration: "40 seconds", onTimeout: () => new Error(`${mode} timed out`) }),
    Effect.provide(runtime)
  )).then(
    (code) => process.exit(code),
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}

// Run only as a script: the test imports its names.
if (process.argv[1] === fileURLToPath(import.meta.url)) main()
