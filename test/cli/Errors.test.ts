/**
 * One error format: every failure of the program is one `troupe: <what> —
 * <what to do>` line (no schema trees, no `[time] WARN (#16)` log lines, no
 * protocol words), warnings at start-up say what will not work, and what the
 * program suggests to type can be typed as it is (the `answer:` hints carry
 * the connection options they need).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { chmodSync, existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { ExitCode } from "../../src/cli/ExitCode.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, ok, serve, tempDir, troupe } from "./harness.js"

const { chunk, sse } = OpenAiServer

/** Every line of stderr is one `troupe:` line. */
const oneLineEach = (stderr: string, what: string) => {
  for (const line of stderr.trim().split("\n")) assert.match(line, /^troupe: /, `${what}: ${stderr}`)
  assert.notMatch(stderr, /└─|WARN \(#|ERROR \(#|auth\.hello/, what)
}

const PRINCIPAL = {
  customerId: "8d1c2a4e-0000-4000-8000-000000000001",
  organizationId: "8d1c2a4e-0000-4000-8000-000000000002",
  workspaceId: "8d1c2a4e-0000-4000-8000-000000000003"
}

describe("one error format", () => {
  it.scopedLive("bad configuration files and addresses are one line each, with a hint where one helps; the demo note only for the demo agent", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const env = envFor(home)
      const file = (name: string, value: unknown, mode = 0o600) => {
        const path = join(home, name)
        writeFileSync(path, JSON.stringify(value))
        chmodSync(path, mode)
        return path
      }
      const badTokens = file("tokens.json", { tokens: { "a-token": { ...PRINCIPAL, customerId: "x" } } }, 0o644)
      const noAgents = file("none.json", { agents: [] })
      const unknownTool = file("rules.json", {
        agents: [{ name: "a", instructions: "", tools: [{ name: "read_file" }], permissions: { rules: { rm: "allow" } } }]
      })
      const notAList = file("list.json", { agents: [{ name: "a", instructions: "", tools: "read_file" }] })
      const [tokens, empty, rules, list, socket, demo, assistant] = yield* Effect.all([
        troupe(["serve", "--store", "memory", "--socket", join(home, "a.sock"), "--tokens", badTokens], env),
        troupe(["serve", "--store", "memory", "--socket", join(home, "b.sock"), "--agents", noAgents], env),
        troupe(["run", "--store", "memory", "--agents", unknownTool, "hi"], env),
        troupe(["run", "--store", "memory", "--agents", notAList, "hi"], env),
        troupe(["serve", "--store", "memory", "--socket", join(home, "missing", "c.sock")], env),
        troupe(["run", "--store", "memory", "hello"], env),
        troupe(["run", "--store", "memory", "--agent", "assistant", "hello"], env)
      ], { concurrency: 3 })

      assert.strictEqual(tokens.code, ExitCode.Usage)
      oneLineEach(tokens.stderr, "tokens file")
      assert.include(tokens.stderr, "troupe: warning: token file")
      assert.include(tokens.stderr, "customerId: expected a UUID")

      assert.strictEqual(empty.code, ExitCode.Usage)
      oneLineEach(empty.stderr, "empty agents list")
      assert.include(empty.stderr, "agents: expected at least one agent")

      assert.strictEqual(rules.code, ExitCode.Usage)
      oneLineEach(rules.stderr, "a rule for a tool the agent does not have")
      assert.include(rules.stderr, "agents.0.permissions.rules.rm: a has no tool named rm (its tools: read_file)")

      assert.strictEqual(list.code, ExitCode.Usage)
      assert.include(list.stderr, "agents.0.tools: expected a list, got \"read_file\"")

      assert.strictEqual(socket.code, ExitCode.Usage)
      oneLineEach(socket.stderr, "--socket into a missing directory")
      assert.include(socket.stderr, `--socket: the directory ${join(home, "missing")} does not exist — create it first`)
      assert.isFalse(existsSync(join(home, "missing")), "the directory was not created")

      // The demo-agent note only when the demo agent runs.
      assert.include(demo.stderr, "using the built-in demo agent on the scripted model")
      assert.include(assistant.stderr, "troupe: no model configured")
      assert.notInclude(assistant.stderr, "demo agent")
    }), 90_000)

  it.scopedLive("TCP without tokens warns at start; a client without a token is told how to give one", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const env = envFor(home)
      const daemon = yield* serve(["--store", "memory", "--socket", join(home, "d.sock"), "--tcp", "127.0.0.1:0"], env)
      assert.include(daemon.stderr(), "troupe: warning: --tcp without --tokens: TCP clients always need a token, so none can connect")
      const port = /listening on tcp:127\.0\.0\.1:(\d+)/.exec(daemon.stderr())![1]!
      const refused = yield* troupe(["sessions", "list", "--tcp", `127.0.0.1:${port}`], env)
      assert.strictEqual(refused.code, ExitCode.Refused)
      assert.strictEqual(
        refused.stderr.trim(),
        `troupe: the daemon at tcp:127.0.0.1:${port} needs a token — pass --token TOKEN or set TROUPE_TOKEN`
      )
    }))

  it.scopedLive("answer: hints carry the connection options; turn_ended lines say why a turn failed", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const model = yield* OpenAiServer.make
      yield* model.enqueue(
        sse([chunk.role(), chunk.toolCall(0, { id: "call_1", name: "lookup", arguments: "{\"word\":\"troupe\"}" }), chunk.finish("tool_calls"), chunk.usage(20, 5)]),
        OpenAiServer.error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key")
      )
      const agents = join(home, "agents.json")
      writeFileSync(agents, JSON.stringify({
        agents: [{ name: "helper", instructions: "", model: "gpt-test", tools: [{ name: "lookup", description: "Looks a word up." }] }]
      }))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "sk-test-0123456789" })
      const socket = join(home, "d.sock")
      yield* serve(["--store", "memory", "--socket", socket, "--agents", agents], env)
      const at = ["--socket", socket]

      const parked = (yield* ok(["sessions", "create", ...at], env)).stdout.trim()
      // The turn parks on the client tool's callback (`--wait` would wait for its answer).
      yield* ok(["sessions", "send", ...at, parked, "look it up"], env)
      const shown = yield* ok(["sessions", "show", ...at, parked], env).pipe(
        Effect.filterOrFail((result) => result.stdout.includes("answer:"), () => "no callback open yet"),
        Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 50 }),
        Effect.orDie
      )
      assert.include(shown.stdout, `answer: troupe sessions answer --socket ${socket} ${parked} cb_`)

      const failing = (yield* ok(["sessions", "create", ...at], env)).stdout.trim()
      const failed = yield* troupe(["sessions", "send", ...at, "--wait", failing, "hello"], env)
      assert.strictEqual(failed.code, ExitCode.TurnFailed)
      assert.include(failed.stderr, "✗ failed (model_error): HTTP 401: Incorrect API key provided")
      assert.include(failed.stderr, "· 1 model call ·", "the call that failed was made")
      const events = yield* ok(["sessions", "events", ...at, failing], env)
      assert.match(events.stdout, /turn_ended turn_\S+ failed \(model_error\): HTTP 401: Incorrect API key provided/)
    }), 90_000)
})
