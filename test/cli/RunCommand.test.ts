/**
 * `troupe run "PROMPT"` end to end: the real program against the local
 * OpenAI-compatible test server (streamed text on stdout, the outcome and
 * usage on stderr, exit 0), a failing model (exit 1), approvals answered by
 * `--approve none` for an agent from an agents file, and the offline demo
 * with `--json` (JSON lines, and nothing else, on stdout); a whole agents
 * file (subagents, an agent tool, tool metadata, a handoff) drives a tree
 * from `run`.
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { ExitCode } from "../../src/cli/ExitCode.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, hasTerminal, jsonLines, programPid, start, tempDir, troupe } from "./harness.js"

const { chunk, sse } = OpenAiServer

const AGENTS = {
  agents: [{
    name: "careful",
    instructions: "Ask before deleting.",
    model: "gpt-test",
    tools: [{ name: "delete_file", description: "Deletes a file.", parameters: { type: "object", properties: { path: { type: "string" } } } }],
    permissions: { rules: { delete_file: "ask" } }
  }]
}

/** A file that declares whole agents: subagents, an agent tool, a client tool's metadata and a handoff. */
const TREE = {
  agents: [
    {
      name: "lead",
      instructions: "You are lead.",
      model: "gpt-test",
      subagents: [{ name: "worker", description: "Does the work." }],
      tools: [
        { name: "research", description: "Researches.", agent: "researcher" },
        { name: "lookup", description: "Looks up.", sideEffect: "read", idempotency: "supported", needsApproval: true }
      ],
      handoffs: ["closer"]
    },
    { name: "worker", instructions: "You are worker.", model: "gpt-test" },
    { name: "researcher", instructions: "You are researcher.", model: "gpt-test" },
    { name: "closer", instructions: "You are closer.", model: "gpt-test" }
  ]
}

type WireMessage = { readonly role: string; readonly content?: string | null }
const replyText = (words: string) => sse([chunk.role(), chunk.text(words), chunk.finish("stop"), chunk.usage(5, 1)])
const replyCall = (name: string, args: unknown) =>
  sse([chunk.role(), chunk.toolCall(0, { id: `call_${name}`, name, arguments: JSON.stringify(args) }), chunk.finish("tool_calls"), chunk.usage(5, 1)])

/** Each agent by its instructions (children call concurrently with their parent); lead by the tool results it has. */
const treeReply = (body: unknown): OpenAiServer.Reply => {
  const messages = (body as { messages: ReadonlyArray<WireMessage> }).messages
  const system = messages[0]?.content ?? ""
  if (system.includes("You are worker.")) return replyText("worked")
  if (system.includes("You are researcher.")) return replyText("researched")
  if (system.includes("You are closer.")) return replyText("closed")
  const steps = [
    replyCall("agents_spawn", { agent: "worker", message: "work" }),
    replyCall("agents_wait", {}),
    replyCall("research", { input: "what?" }),
    replyCall("lookup", {}),
    replyCall("transfer_to_closer", {})
  ]
  return steps[messages.filter((m) => m.role === "tool").length] ?? replyText("lead again")
}

describe("troupe run", () => {
  it.scopedLive("streams a model's answer, shows tool calls and approvals, prints usage; fails with exit 1", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const store = ["--store", `sqlite:${join(home, "t.db")}`]
      // One server per run, so the order in which concurrent runs call their model does not matter.
      const answering = yield* OpenAiServer.make
      yield* answering.enqueue(
        sse([chunk.role(), chunk.text("Hello"), chunk.text(", "), chunk.text("world."), chunk.finish("stop"), chunk.usage(12, 3)])
      )
      const failing = yield* OpenAiServer.make
      yield* failing.enqueue(OpenAiServer.error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
      const asking = yield* OpenAiServer.make
      yield* asking.enqueue(
        sse([chunk.role(), chunk.toolCall(0, { id: "call_1", name: "delete_file", arguments: "{\"path\":\"a.txt\"}" }), chunk.finish("tool_calls"), chunk.usage(20, 6)]),
        sse([chunk.role(), chunk.text("I did not delete it."), chunk.finish("stop"), chunk.usage(30, 6)])
      )
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const envOf = (server: OpenAiServer.OpenAiServer) =>
        envFor(home, { TROUPE_MODEL_BASE_URL: server.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "sk-test" })

      const [answered, failed, denied, offline, unopenable] = yield* Effect.all([
        troupe(["run", ...store, "Say hello."], envOf(answering)),
        troupe(["run", ...store, "Say hello."], envOf(failing)),
        troupe(["run", ...store, "--agents", agentsFile, "--approve", "none", "Delete a.txt"], envOf(asking)),
        troupe(["run", "--store", `sqlite:${join(home, "offline.db")}`, "--json", "count my words"], envFor(home)),
        // A store it cannot create (Node's recursive mkdir never returns under /proc): a clear error, not a hang.
        troupe(["run", "--store", "sqlite:/proc/nope/x.db", "hi"], envFor(home))
      ], { concurrency: "unbounded" })

      assert.strictEqual(unopenable.code, ExitCode.StartFailed, unopenable.stderr)
      assert.include(unopenable.stderr, "cannot open the store sqlite:/proc/nope/x.db")

      assert.strictEqual(answered.code, 0, answered.stderr)
      assert.strictEqual(answered.stdout, "Hello, world.\n")
      assert.include(answered.stderr, "✓ completed · 1 model call · 0 tool calls · 15 tokens (12 in, 3 out)")
      const [request] = yield* answering.requests
      const body = request!.body as { model: string; messages: ReadonlyArray<{ role: string; content: string }> }
      assert.strictEqual(body.model, "gpt-test")
      assert.deepStrictEqual(body.messages.at(-1), { role: "user", content: "Say hello." })
      assert.strictEqual(request!.headers.authorization, "Bearer sk-test")

      assert.strictEqual(failed.code, ExitCode.TurnFailed)
      assert.strictEqual(failed.stdout, "")
      assert.include(failed.stderr, "✗ failed (model_error): HTTP 401: Incorrect API key provided")

      assert.strictEqual(denied.code, 0, denied.stderr)
      assert.strictEqual(denied.stdout, "I did not delete it.\n")
      assert.include(denied.stderr, "→ delete_file({\"path\":\"a.txt\"})")
      assert.include(denied.stderr, "← error: ")
      const second = (yield* asking.requests)[1]!.body as { messages: ReadonlyArray<{ role: string; content: string }> }
      const toolMessage = second.messages.find((message) => message.role === "tool")
      assert.include(toolMessage?.content, "denied by the user: denied by --approve none")

      // Offline, the built-in demo agent; --json keeps stdout to JSON lines only.
      assert.strictEqual(offline.code, 0, offline.stderr)
      const events = jsonLines(offline.stdout) as ReadonlyArray<{ _tag: string; record?: { _tag: string; output?: string } }>
      assert.strictEqual(events[0]?.record?._tag, "session_created")
      assert.isTrue(events.some((event) => event._tag === "assistant_delta"))
      const last = events.at(-1)!
      assert.deepStrictEqual([last.record?._tag, last.record?.output], ["turn_ended", "You said: count my words (3 words)"])
    }), 60_000)

  it.scopedLive("--agents takes a whole file: a spawn, an agent tool, a tool's needsApproval and a handoff, in one run", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const tree = yield* OpenAiServer.make
      yield* tree.respondWith(treeReply)
      const treeFile = join(home, "tree.json")
      writeFileSync(treeFile, JSON.stringify(TREE))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: tree.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const wholeFile = yield* troupe(["run", "--store", `sqlite:${join(home, "t.db")}`, "--agents", treeFile, "--approve", "none", "go"], env, {
        timeout: "60 seconds"
      })
      assert.strictEqual(wholeFile.code, 0, wholeFile.stderr)
      assert.strictEqual(wholeFile.stdout, "closed\n")
      const bodies = (yield* tree.requests).map((r) =>
        r.body as { messages: ReadonlyArray<WireMessage>; tools?: ReadonlyArray<{ function: { name: string } }> }
      )
      const lead = bodies.filter((b) => b.messages[0]?.content?.includes("You are lead."))
      assert.includeMembers((lead[0]!.tools ?? []).map((t) => t.function.name), ["agents_spawn", "agents_wait", "research", "lookup", "transfer_to_closer"])
      // The spawned worker's result came back through agents.wait, the researcher's as the agent tool's result.
      const results = lead.at(-1)!.messages.filter((m) => m.role === "tool").map((m) => m.content ?? "")
      assert.lengthOf(results, 4)
      assert.include(results[1], "worked")
      assert.strictEqual(results[2], "researched")
      // needsApproval made the client tool ask, and --approve none denied it.
      assert.include(results[3], "denied by --approve none")
      assert.lengthOf(bodies.filter((b) => b.messages[0]?.content?.includes("You are closer.")), 1)
    }), 90_000)

  it.scopedLive.skipIf(!hasTerminal)("on a terminal, approvals are asked: 'a' approves the tool for the rest of the session", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const model = yield* OpenAiServer.make
      const deleting = (id: string, path: string) =>
        sse([chunk.role(), chunk.toolCall(0, { id, name: "delete_file", arguments: JSON.stringify({ path }) }), chunk.finish("tool_calls"), chunk.usage(20, 6)])
      yield* model.enqueue(
        deleting("call_1", "a.txt"),
        deleting("call_2", "b.txt"),
        sse([chunk.role(), chunk.text("Both gone."), chunk.finish("stop"), chunk.usage(30, 3)])
      )
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const child = yield* start(
        ["run", "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "Delete a.txt and b.txt"],
        env,
        { terminal: true }
      )
      yield* child.waitFor("for this session: ", "stdout")
      assert.include(child.stdout(), "allow delete_file({\"path\":\"a.txt\"})?")
      child.proc.stdin!.write("a\n")
      const result = yield* child.exit
      assert.strictEqual(result.code, 0, result.stdout)
      assert.include(result.stdout, "Both gone.")
      // Asked once: the second call was approved by the first answer.
      assert.strictEqual(result.stdout.split("for this session").length - 1, 1, result.stdout)
      // The client tool has no client here: each call reached the model as a tool error (the approval let it through).
      const requests = yield* model.requests
      assert.strictEqual(requests.length, 3)
      const tools = (requests[2]!.body as { messages: ReadonlyArray<{ role: string; content: string }> }).messages
        .filter((message) => message.role === "tool")
      assert.strictEqual(tools.length, 2)
      for (const tool of tools) assert.notInclude(tool.content, "denied")
    }), 60_000)

  it.scopedLive.skipIf(!hasTerminal)(
    "on a terminal: client tools are named before the turn; the approval prompt stays on screen; SIGINT from outside there ends the turn and the program",
    () =>
      Effect.gen(function*() {
        const home = yield* tempDir
        const agentsFile = join(home, "agents.json")
        writeFileSync(agentsFile, JSON.stringify(AGENTS))
        const model = yield* OpenAiServer.make
        yield* model.enqueue(
          sse([chunk.role(), chunk.toolCall(0, { id: "call_1", name: "delete_file", arguments: "{\"path\":\"a.txt\"}" }), chunk.finish("tool_calls"), chunk.usage(20, 6)])
        )
        const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
        const db = join(home, "t.db")
        const child = yield* start(["run", "--store", `sqlite:${db}`, "--agents", agentsFile, "Delete a.txt"], env, { terminal: true })
        yield* child.waitFor("for this session: ", "stdout", "60 seconds")
        const screen = child.stdout()
        const prompt = screen.lastIndexOf("allow delete_file")
        // Said before the turn started, not at the call.
        const note = screen.indexOf("delete_file is a client tool of careful")
        assert.isTrue(note >= 0 && note < prompt, screen)
        // The spinner ticks every 80 ms: given several ticks, nothing after the prompt erases its line or says a tool runs.
        yield* Effect.sleep("500 millis")
        const after = child.stdout().slice(prompt)
        assert.notInclude(after, "\x1b[2K", JSON.stringify(after))
        assert.notInclude(after, "running delete_file", JSON.stringify(after))

        process.kill(programPid(child)!, "SIGINT")
        const result = yield* child.exit.pipe(Effect.timeout("4 seconds"), Effect.orDie)
        assert.strictEqual(result.code, 130, result.stdout)
        const ends = new Database(db, { readonly: true }).prepare("SELECT body FROM troupe_log").all()
          .map((row) => JSON.parse((row as { body: string }).body) as { _tag: string; outcome?: string })
          .filter((body) => body._tag === "turn_ended")
        assert.deepStrictEqual(ends.map((end) => end.outcome), ["interrupted"])
      }),
    60_000
  )
})
