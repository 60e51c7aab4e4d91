/**
 * `troupe serve` end to end: the real program on a temporary socket, driven
 * by `troupe sessions …` (also real processes) and by `SessionClient`. The
 * daemon runs with telemetry disabled but a log file configured: nothing may
 * be written. Unreachable daemons and malformed ids are documented exits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Stream } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import { type SessionId } from "../../src/schema/Ids.js"
import { ExitCode } from "../../src/cli/ExitCode.js"
import * as SqliteSessionStore from "../../src/layers/SqliteSessionStore.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as H from "../server/harness.js"
import { envFor, jsonLines, ok, serve, tempDir, troupe } from "./harness.js"

describe("troupe serve", () => {
  it.scopedLive("serves sessions to `troupe sessions …` and to SessionClient, and stops on SIGTERM with exit 0", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const socket = join(home, "d.sock")
      const telemetryFile = join(home, "telemetry.jsonl")
      // Disabled wins over a configured log layer: nothing may be written.
      const env = envFor(home, { TROUPE_TELEMETRY: "log", TROUPE_TELEMETRY_FILE: telemetryFile })
      const daemon = yield* serve(["--socket", socket, "--store", `sqlite:${join(home, "t.db")}`], env)
      assert.include(daemon.stderr(), `troupe: listening on unix:${socket}`)
      assert.include(daemon.stderr(), "no model configured")
      const at = ["--socket", socket]

      const [agents, created] = yield* Effect.all([
        ok(["agents", ...at, "--json"], env),
        ok(["sessions", "create", ...at, "--title", "first"], env)
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual(jsonLines(agents.stdout).map((agent) => (agent as { name: string }).name), ["demo", "assistant"])
      const id = created.stdout.trim() as SessionId
      assert.match(id, /^ses_[0-9A-Z]{26}$/)

      // A message and its turn, shown until it ends.
      const sent = yield* ok(["sessions", "send", ...at, id, "count these four words", "--wait"], env)
      assert.strictEqual(sent.stdout.trim(), "You said: count these four words (4 words)")
      assert.include(sent.stderr, "→ word_count(")
      assert.include(sent.stderr, "✓ completed · 2 model calls · 1 tool call")

      // The typed client sees the same daemon: the session the CLI made, and one of its own.
      const typed = Effect.scoped(Effect.gen(function*() {
        const client = yield* SessionClient.connect(socket)
        assert.strictEqual((yield* client.get(id)).title, "first")
        const session = yield* client.create({ agent: "demo" })
        const accepted = yield* client.send(session.id, { text: "two words" })
        assert.strictEqual(accepted.disposition, "started")
        const end = yield* client.events(session.id).pipe(
          Stream.map((frame) => frame.event),
          Stream.filterMap((event) =>
            event._tag === "durable" && event.record._tag === "turn_ended" ? Option.some(event.record) : Option.none()
          ),
          Stream.runHead
        )
        assert.strictEqual(Option.getOrThrow(end).output, "You said: two words (2 words)")
        return session.id
      })).pipe(Effect.orDie)
      const [list, show, events, other] = yield* Effect.all([
        ok(["sessions", "list", ...at], env),
        ok(["sessions", "show", ...at, id], env),
        ok(["sessions", "events", ...at, id, "--json"], env),
        typed
      ], { concurrency: "unbounded" })
      // The typed client's session may be listed too (it is created meanwhile).
      assert.match(list.stdout, /^ID +STATUS +UPDATED +AGENT +TITLE\n/)
      assert.match(list.stdout, new RegExp(`^${id} +idle +[0-9: -]+ +demo +first$`, "m"))
      assert.match(show.stdout, new RegExp(`session +${id}`))
      assert.match(show.stdout, /status +idle/)
      const tags = jsonLines(events.stdout).map((event) => (event as { record: { _tag: string } }).record._tag)
      assert.deepStrictEqual(tags, [
        "session_created",
        "turn_started",
        "operation_started",
        "operation_completed",
        "operation_started",
        "operation_completed",
        "operation_started",
        "operation_completed",
        "turn_ended"
      ])

      // Children written into the daemon's store (another process on the same SQLite file), then listed by the CLI.
      const tree = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const parent = yield* store.get(id)
        const kid = (alias: string, parentId: SessionId) =>
          store.create({ principal: parent.principal, agent: parent.agent, parentId, alias, title: `kid ${alias}` })
        const a = yield* kid("a", id)
        const b = yield* kid("b", id)
        const g = yield* kid("g", a.id)
        return { a, b, g }
      }).pipe(Effect.provide(SqliteSessionStore.layer({ filename: join(home, "t.db") })), Effect.orDie)
      // Two processes, run together: a page of one child, and the tree. (That a child refuses a
      // message is the daemon's answer, `forbidden`, tested through SessionClient; every refusal is exit 4.)
      const [childrenJson, treeText] = yield* Effect.all([
        ok(["sessions", "children", ...at, id, "--json", "--limit", "1"], env),
        ok(["sessions", "tree", ...at, id], env)
      ], { concurrency: "unbounded" })
      const [newest] = jsonLines(childrenJson.stdout) as ReadonlyArray<{ alias: string; agentPath: ReadonlyArray<string> }>
      assert.deepStrictEqual([jsonLines(childrenJson.stdout).length, newest?.alias, newest?.agentPath], [1, "b", ["demo", "demo"]])
      assert.match(treeText.stdout, /^ALIAS +ID +STATUS +UPDATED +AGENT +TITLE\n/)
      assert.match(treeText.stdout, new RegExp(`^- +${id} .*\n  a +${tree.a.id} .*kid a\n    g +${tree.g.id} .*\n  b +${tree.b.id} .*kid b$`, "m"))

      const [renamed, closed] = yield* Effect.all([
        ok(["sessions", "rename", ...at, other, "renamed"], env),
        ok(["sessions", "close", ...at, id, "--json"], env)
      ], { concurrency: "unbounded" })
      assert.match(renamed.stdout, new RegExp(`^${other} +idle +[0-9: -]+ +demo +renamed\\n$`))
      assert.strictEqual((jsonLines(closed.stdout)[0] as { status: string }).status, "closed")
      const refused = yield* troupe(["sessions", "send", ...at, id, "again"], env)
      assert.strictEqual(refused.code, ExitCode.Refused)
      assert.include(refused.stderr, "troupe: session_closed")

      const stopped = yield* daemon.stop("SIGTERM")
      assert.strictEqual(stopped.code, 0, stopped.stderr)
      assert.include(stopped.stderr, "troupe: stopping (SIGTERM)")
      assert.isFalse(existsSync(socket), "the socket file is removed")
      assert.isFalse(existsSync(telemetryFile), "telemetry disabled writes nothing")
    }), 90_000)

  it.scopedLive("refuses a second daemon on a live socket (exit 5); unreachable daemons and malformed ids are documented exits", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const socket = join(home, "d.sock")
      const env = envFor(home)
      const first = yield* serve(["--socket", socket, "--store", "memory"], env)
      const [second, badId, unreachable] = yield* Effect.all([
        troupe(["serve", "--socket", socket, "--store", "memory"], env),
        troupe(["sessions", "show", "--socket", socket, "ses_nope"], env),
        troupe(["sessions", "list", "--socket", join(home, "none.sock")], env)
      ], { concurrency: "unbounded" })
      assert.strictEqual(unreachable.code, ExitCode.Unreachable)
      assert.match(unreachable.stderr, /^troupe: no daemon is listening on unix:.*none\.sock \(ENOENT\); start one with `troupe serve`\n$/)
      assert.strictEqual(second.code, ExitCode.StartFailed)
      assert.strictEqual(second.stderr.trim().split("\n").at(-1), `troupe: unix:${socket} is in use by a running daemon`)
      assert.strictEqual(badId.code, ExitCode.Usage)
      assert.include(badId.stderr, "is not a valid id")
      assert.strictEqual((yield* first.stop("SIGINT")).code, 0)
    }))

  it.scopedLive("--auth-timeout and --idle-timeout reach the listeners: a silent TCP peer and an idle local one are closed", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const socket = join(home, "d.sock")
      const daemon = yield* serve(
        ["--socket", socket, "--tcp", "127.0.0.1:0", "--store", "memory", "--auth-timeout", "300ms", "--idle-timeout", "600ms"],
        envFor(home)
      )
      const port = Number(/listening on tcp:127\.0\.0\.1:(\d+)/.exec(daemon.stderr())![1])
      const [silent, idle] = yield* Effect.all([
        Effect.flatMap(H.rawConnect({ host: "127.0.0.1", port }), H.expectClosedAfter),
        Effect.flatMap(H.rawConnect({ path: socket }), H.expectClosedAfter)
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual([silent.error.t, (silent.error.payload as { kind: string }).kind, silent.closed], ["core.error", "unauthenticated", true])
      assert.deepStrictEqual([idle.error.t, idle.closed], ["core.shutdown", true])
      assert.strictEqual((yield* daemon.stop()).code, 0)
    }))
})
