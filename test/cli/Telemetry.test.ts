/**
 * Product telemetry of the program, read from the log layer's file: a daemon
 * and its clients emit exactly `daemon.started`, `session.started` and
 * `turn.ended` with their bounded dimensions; a client run with telemetry
 * disabled has its events marked excluded; a daemon that cannot start emits
 * `daemon.failed`; an embedded `troupe run` emits `session.started` and
 * `turn.ended`. (With `TROUPE_TELEMETRY_ENABLED=false` nothing is written:
 * see Serve.test.ts.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import { ExitCode } from "../../src/cli/ExitCode.js"
import { readEvents } from "../support/telemetryFile.js"
import { envFor, ok, serve, tempDir, troupe } from "./harness.js"

/** The lines of a telemetry file without their timestamps. */
const events = (file: string) =>
  readEvents(file).map((line) => {
    const { at, ...event } = line as { at: string }
    assert.match(at, /^\d{4}-\d\d-\d\dT/)
    return event
  })

describe("telemetry of the troupe program", () => {
  it.scopedLive("a daemon and its clients emit exactly daemon.started, session.started and turn.ended", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const file = join(home, "telemetry.jsonl")
      const failedFile = join(home, "failed.jsonl")
      const runFile = join(home, "run.jsonl")
      const socket = join(home, "d.sock")
      const on = (path: string) => envFor(home, { TROUPE_TELEMETRY_ENABLED: "true", TROUPE_TELEMETRY: "log", TROUPE_TELEMETRY_FILE: path })
      const daemon = yield* serve(["--socket", socket, "--store", `sqlite:${join(home, "t.db")}`], on(file))
      const at = ["--socket", socket]

      const created = yield* ok(["sessions", "create", ...at], on(file))
      const id = created.stdout.trim()
      const [, excluded, second, embedded] = yield* Effect.all([
        ok(["sessions", "send", ...at, id, "one two three", "--wait"], on(file)),
        // A client with telemetry off asks the daemon to keep its events out of analytics.
        ok(["sessions", "create", ...at], { ...on(file), TROUPE_TELEMETRY_ENABLED: "false" }),
        troupe(["serve", ...at, "--store", "memory"], on(failedFile)),
        ok(["run", "--store", `sqlite:${join(home, "run.db")}`, "four five"], on(runFile))
      ], { concurrency: "unbounded" })
      assert.match(excluded.stdout, /^ses_/)
      assert.strictEqual(second.code, ExitCode.StartFailed)
      assert.include(embedded.stdout, "You said: four five (2 words)")
      assert.strictEqual((yield* daemon.stop("SIGTERM")).code, 0)

      const lines = events(file)
      const turn = lines.find((line) => (line as { event: string }).event === "turn.ended") as {
        usage: Record<string, number>
      }
      assert.deepStrictEqual(lines.map((line) => (line as { event: string }).event).sort(), [
        "daemon.started",
        "session.started",
        "session.started",
        "turn.ended"
      ])
      assert.deepStrictEqual(lines[0], {
        event: "daemon.started",
        listeners: { unix: true, tcp: false, stdio: false },
        store: "sqlite",
        model: "scripted",
        excluded: false
      })
      assert.deepInclude(lines, { event: "session.started", kind: "root", excluded: false })
      assert.deepInclude(lines, { event: "session.started", kind: "root", excluded: true })
      assert.deepStrictEqual(Object.keys(turn.usage).sort(), [
        "costMicros", "inputTokens", "modelCalls", "outputTokens", "toolCalls", "totalTokens", "wallTimeMs"
      ])
      assert.deepInclude(lines, {
        event: "turn.ended",
        kind: "root",
        status: "completed",
        usage: { ...turn.usage, modelCalls: 2, toolCalls: 1, costMicros: 0 },
        excluded: false
      })

      assert.deepStrictEqual(events(failedFile), [{ event: "daemon.failed", category: "conflict", status: 409, excluded: false }])

      const run = events(runFile)
      assert.deepStrictEqual(run.map((line) => (line as { event: string }).event), ["session.started", "turn.ended"])
      assert.deepInclude(run, { event: "session.started", kind: "root", excluded: false })
    }), 60_000)
})
