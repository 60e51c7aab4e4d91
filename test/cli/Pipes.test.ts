/**
 * Output into a closed pipe (`troupe … | head -1`) ends the program quietly:
 * exit 0, no EPIPE stack trace. Each command runs with its stdout's reading
 * end closed before it writes, against a daemon holding a session with a
 * finished turn.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import { envFor, ok, serve, start, tempDir } from "./harness.js"

describe("output into a closed pipe", () => {
  it.scopedLive("ends run --json, sessions list --json, sessions show and sessions events quietly with exit 0", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const env = envFor(home)
      const socket = join(home, "d.sock")
      yield* serve(["--socket", socket, "--store", `sqlite:${join(home, "t.db")}`], env)
      const at = ["--socket", socket]
      const id = (yield* ok(["sessions", "create", ...at], env)).stdout.trim()
      yield* ok(["sessions", "send", ...at, "--wait", id, "count these words"], env)

      const commands = [
        ["run", "--json", "--store", "memory", "hello"],
        ["sessions", "list", "--json", ...at],
        ["sessions", "show", ...at, id],
        ["sessions", "events", ...at, id]
      ]
      const results = yield* Effect.forEach(commands, (args) =>
        Effect.gen(function*() {
          const child = yield* start(args, env)
          // The reader goes away before the program writes a line.
          child.proc.stdout!.destroy()
          return { args, result: yield* child.exit }
        }), { concurrency: "unbounded" })
      for (const { args, result } of results) {
        const what = `troupe ${args.join(" ")}`
        assert.strictEqual(result.code, 0, `${what}\n${result.stderr}`)
        assert.notMatch(result.stderr, /EPIPE|Error|internal error/, what)
      }
    }), 60_000)
})
