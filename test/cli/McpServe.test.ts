/**
 * MCP toolsets through the front doors, with real processes: `troupe serve
 * --agents FILE` whose file declares `mcpServers` (the test's own SDK server,
 * test/support/mcpServer.mjs, over stdio), driven over the socket and over
 * HTTP, and `troupe run --agents FILE`; the model is the OpenAI-compatible
 * one against the local test server, so tool names cross the wire in its
 * alphabet (`kit_echo`) and come back as `kit.echo`.
 *
 * Then the daemon is SIGKILLed between MCP calls and their receipts: the next
 * daemon on the same store records the non-idempotent call's outcome as
 * unknown without calling it again, and runs the idempotent one again. What
 * reached the server is counted in the server's own log.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schedule, Stream } from "effect"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as SessionClient from "../../src/client/SessionClient.js"
import type { SessionId } from "../../src/schema/Ids.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, start, tempDir, troupe } from "./harness.js"

const { textReply: text, toolCallsReply: calls } = OpenAiServer
const serverScript = fileURLToPath(new URL("../support/mcpServer.mjs", import.meta.url))

/** A message of a Chat Completions request body. */
interface Message {
  readonly role: string
  readonly content?: string | null
}

/** The five calls `helper` makes at once: plain text, structured content, an image, `isError`, a destructive tool. */
const HELPER_CALLS = [
  ["kit_echo", { text: "hi" }],
  ["kit_add", { a: 2, b: 3 }],
  ["kit_picture", {}],
  ["kit_fail", {}],
  ["kit_delete_all", {}]
] as const

/**
 * Each agent's model, by its instructions: a first reply with tool calls, then
 * a text naming what the tools returned (so the test sees it reached the model).
 */
const respond = (body: unknown): OpenAiServer.Reply => {
  const messages = (body as { messages: ReadonlyArray<Message> }).messages
  const system = messages[0]?.content ?? ""
  const lastUser = messages.length - 1 - [...messages].reverse().findIndex((m) => m.role === "user")
  const asked = messages[lastUser]?.content ?? ""
  const results = messages.slice(lastUser).filter((m) => m.role === "tool").map((m) => m.content ?? "")
  if (system.includes("You are helper.")) return results.length === 0 ? calls(...HELPER_CALLS) : text("helper done")
  if (system.includes("You are reader.")) return results.length === 0 ? calls(["kit_echo", { text: asked }]) : text(`reader: ${results[0]}`)
  // recorder
  if (results.length > 0) return text(`recorder: ${results[0]}`)
  return calls([asked === "once" ? "kit_record" : "kit_record_idempotent", { note: asked }])
}

/** The agents file: one stdio server, three agents using it. */
const agentsFile = (log: string, hold: string) => ({
  mcpServers: { kit: { command: process.execPath, args: [serverScript], env: { MCP_LOG: log, MCP_HOLD: hold } } },
  agents: [
    {
      name: "helper",
      instructions: "You are helper.",
      model: "gpt-test",
      toolsets: ["kit"],
      permissions: { capabilities: { destructive: "ask" } }
    },
    { name: "reader", instructions: "You are reader.", model: "gpt-test", toolsets: [{ name: "kit", tools: ["echo"] }] },
    { name: "recorder", instructions: "You are recorder.", model: "gpt-test", toolsets: ["kit"] },
    // Declares no toolset: what it gets is what its session's create binds (decision 0048).
    { name: "plain", instructions: "You are reader. Bound at create.", model: "gpt-test" }
  ]
})

/** A daemon's home: the agents file, the server's log, the model. */
const setup = Effect.gen(function*() {
  const home = yield* tempDir
  const model = yield* OpenAiServer.make
  yield* model.respondWith(respond)
  const log = join(home, "mcp.log")
  const hold = join(home, "hold")
  const file = join(home, "agents.json")
  writeFileSync(file, JSON.stringify(agentsFile(log, hold)))
  const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "sk-test" })
  const serveArgs = ["--socket", join(home, "d.sock"), "--store", `sqlite:${join(home, "t.db")}`, "--agents", file]
  /** What reached the server: `pid call <tool> <args>` lines, as [pid, tool, args]. */
  const called = () =>
    (existsSync(log) ? readFileSync(log, "utf8").split("\n") : []).flatMap((line) => {
      const [pid, word, tool, ...args] = line.split(" ")
      return word === "call" ? [[pid!, tool!, args.join(" ")] as const] : []
    })
  return { home, model, log, hold, file, env, serveArgs, socket: join(home, "d.sock"), called }
})

/** Starts `troupe serve ARGS` and waits until it listens (generously: from sources, on a loaded machine). */
const serve = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.tap(start(["serve", ...args], env), (daemon) => daemon.waitFor("troupe: store ", "stderr", "90 seconds"))

/** The turn_ended record of a session's first (or next after `after`) turn. */
const turnEnded = (client: SessionClient.SessionClient, id: SessionId) =>
  client.events(id).pipe(
    Stream.filterMap((frame) =>
      frame.event._tag === "durable" && frame.event.record._tag === "turn_ended" ? Option.some(frame.event.record) : Option.none()
    ),
    Stream.runHead,
    Effect.map(Option.getOrThrow),
    Effect.timeout("90 seconds")
  )

/** A session's durable records so far. */
const recordsOf = (client: SessionClient.SessionClient, id: SessionId) =>
  client.events(id, { follow: false }).pipe(
    Stream.filterMap((frame) => (frame.event._tag === "durable" ? Option.some(frame.event.record as unknown as Record<string, unknown>) : Option.none())),
    Stream.runCollect,
    Effect.map((chunk) => [...chunk])
  )

/** The tool messages of the model's last request of an agent. */
const toolResults = (requests: ReadonlyArray<OpenAiServer.RecordedRequest>, agent: string) => {
  const last = requests.filter((r) => ((r.body as { messages: ReadonlyArray<Message> }).messages[0]?.content ?? "").includes(`You are ${agent}.`)).at(-1)
  return (last!.body as { messages: ReadonlyArray<Message> }).messages.filter((m) => m.role === "tool").map((m) => m.content ?? "")
}

describe("MCP toolsets through troupe serve --agents and troupe run --agents", () => {
  it.scopedLive("over the socket (results, an approval answered by the client), over HTTP, and in troupe run", () =>
    Effect.gen(function*() {
      const { called, env, file, model, serveArgs, socket } = yield* setup
      const daemon = yield* serve([...serveArgs, "--http", "127.0.0.1:0", "--http-trust-local"], env)
      const http = /troupe: listening on (http:\/\/\S+)/.exec(daemon.stderr())![1]!
      // `troupe run` meanwhile, on its own store: MCP tools run on the host, so they need no client.
      const run = yield* Effect.fork(troupe(["run", "--store", "memory", "--agents", file, "--agent", "reader", "from run"], env, { timeout: "120 seconds" }))

      // Over the socket: the client answers the destructive tool's approval.
      const client = yield* SessionClient.connect(socket)
      const session = yield* client.create({ agent: "helper" })
      const asked: Array<unknown> = []
      yield* Effect.forkScoped(client.provideCallbacks(session.id, ["approval"], (callback) =>
        Effect.sync(() => {
          asked.push((callback.request as { toolName: string }).toolName)
          return Option.some({ decision: "approve" })
        })))
      yield* client.send(session.id, { text: "go" })
      const ended = yield* turnEnded(client, session.id)
      assert.deepStrictEqual([ended.outcome, ended.output], ["completed", "helper done"])
      assert.deepStrictEqual(asked, ["kit.delete_all"])

      // The model was offered the tools in its alphabet, and its calls ran as <server>.<tool>.
      const requests = yield* model.requests
      const offered = ((requests[0]!.body as { tools: ReadonlyArray<{ function: { name: string } }> }).tools).map((t) => t.function.name)
      assert.includeMembers(offered, ["kit_echo", "kit_add", "kit_picture", "kit_fail", "kit_delete_all"])
      const started = (yield* recordsOf(client, session.id)).filter((r) => r._tag === "operation_started" && r.kind === "tool")
      assert.deepStrictEqual(started.map((r) => r.name), ["kit.echo", "kit.add", "kit.picture", "kit.fail", "kit.delete_all"])

      // What the model read back: text as text; structured content and an image (a reference, not its bytes) as JSON; isError's text.
      const [echo, add, picture, fail, deleted] = toolResults(yield* model.requests, "helper")
      assert.strictEqual(echo, "hi")
      assert.deepStrictEqual(JSON.parse(add!), { text: "5", structuredContent: { sum: 5 } })
      const image = JSON.parse(picture!) as { text: string; content: ReadonlyArray<Record<string, unknown>> }
      assert.strictEqual(image.text, "a pixel")
      assert.deepStrictEqual({ ...image.content[1], sha256: undefined }, { type: "image", mimeType: "image/png", bytes: 70, sha256: undefined })
      assert.match(String(image.content[1]!.sha256), /^[0-9a-f]{64}$/)
      assert.notInclude(picture!, "iVBOR")
      assert.deepStrictEqual(JSON.parse(fail!), { error: "the widget is broken" })
      assert.strictEqual(deleted, "deleted")

      // Over HTTP: one session of the file's reader (an allow-list of echo), one message, its turn.
      const post = (path: string, body: unknown) =>
        Effect.promise(() => fetch(`${http}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>))
      const { session: remote } = yield* post("/v1/sessions", { agent: "reader" })
      const { turnId } = yield* post(`/v1/sessions/${remote.id}/messages`, { text: "over http" })
      const { turn } = yield* Effect.promise(() => fetch(`${http}/v1/sessions/${remote.id}/turns/${turnId}?wait=60`).then((r) => r.json() as Promise<any>))
      assert.deepStrictEqual([turn.outcome, turn.output], ["completed", "reader: over http"])
      const readerTools = (yield* model.requests).filter((r) => ((r.body as { messages: ReadonlyArray<Message> }).messages[0]?.content ?? "") === "You are reader.")
      assert.deepStrictEqual((readerTools[0]!.body as { tools: ReadonlyArray<{ function: { name: string } }> }).tools.map((t) => t.function.name).filter((n) => n.startsWith("kit_")), ["kit_echo"])

      // Bound at create (decision 0048): `plain` declares no toolset, and a binding gives it kit's echo, on both doors.
      const bound = yield* client.create({ agent: "plain", toolsets: [{ name: "kit", tools: ["echo"] }] })
      yield* client.send(bound.id, { text: "bound" })
      const boundEnded = yield* turnEnded(client, bound.id)
      assert.deepStrictEqual([boundEnded.outcome, boundEnded.output], ["completed", "reader: bound"])
      const { session: boundRemote } = yield* post("/v1/sessions", { agent: "plain", toolsets: [{ name: "kit", tools: ["echo"] }] })
      const { turnId: boundTurn } = yield* post(`/v1/sessions/${boundRemote.id}/messages`, { text: "bound over http" })
      const { turn: boundOver } = yield* Effect.promise(() => fetch(`${http}/v1/sessions/${boundRemote.id}/turns/${boundTurn}?wait=60`).then((r) => r.json() as Promise<any>))
      assert.deepStrictEqual([boundOver.outcome, boundOver.output], ["completed", "reader: bound over http"])
      // A toolset the daemon does not serve is refused on both doors, naming it, and makes no session.
      const before = (yield* client.list({ scope: "roots", limit: 100 })).items.length
      const refused = yield* Effect.flip(client.create({ agent: "plain", toolsets: [{ name: "nope" }] }))
      assert.strictEqual(refused._tag, "ServerError")
      assert.deepStrictEqual([(refused as { kind?: string }).kind, /nope/.test(refused.message)], ["invalid_payload", true])
      const problem = yield* Effect.promise(() =>
        fetch(`${http}/v1/sessions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent: "plain", toolsets: [{ name: "nope" }] }) })
          .then(async (r) => ({ status: r.status, body: await r.json() as any })))
      assert.deepStrictEqual([problem.status, problem.body.kind, /nope/.test(problem.body.message)], [400, "invalid_payload", true])
      assert.strictEqual((yield* client.list({ scope: "roots", limit: 100 })).items.length, before)

      const ran = yield* run.await.pipe(Effect.flatten)
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.strictEqual(ran.stdout, "reader: from run\n")
      assert.include(ran.stderr, "kit.echo")

      // Every call reached the server once: the socket's five (delete_all after its approval), HTTP's and run's echo.
      assert.deepStrictEqual(called().map(([, tool, args]) => `${tool} ${args}`).sort(), [
        "add {\"a\":2,\"b\":3}",
        "delete_all {}",
        "echo {\"text\":\"bound over http\"}",
        "echo {\"text\":\"bound\"}",
        "echo {\"text\":\"from run\"}",
        "echo {\"text\":\"hi\"}",
        "echo {\"text\":\"over http\"}",
        "fail {}",
        "picture {}"
      ])
    }), { timeout: 180_000 })

  it.scopedLive("SIGKILL between MCP calls and their receipts: the next daemon records unknown (not called again), and runs the idempotent tool again", () =>
    Effect.gen(function*() {
      const { called, env, hold, serveArgs, socket } = yield* setup
      const args = [...serveArgs, "--lease-ttl", "1s"]
      writeFileSync(hold, "")
      const first = yield* serve(args, env)
      const ids = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* SessionClient.connect(socket)
        const once = yield* client.create({ agent: "recorder" })
        const again = yield* client.create({ agent: "recorder" })
        yield* client.send(once.id, { text: "once" })
        yield* client.send(again.id, { text: "again" })
        return { once: once.id, again: again.id }
      }))
      // Both calls reached the server and are held there: no receipt yet.
      yield* Effect.suspend(() => (called().length === 2 ? Effect.void : Effect.fail("not called yet"))).pipe(
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("60 seconds")))
      )
      first.proc.kill("SIGKILL")
      assert.strictEqual((yield* first.exit).signal, "SIGKILL")
      rmSync(hold)

      yield* serve(args, env)
      const client = yield* SessionClient.connect(socket)
      const once = yield* turnEnded(client, ids.once)
      assert.deepStrictEqual([once.outcome, once.output], [
        "completed",
        "recorder: {\"error\":\"the outcome of this call is unknown: the host stopped while it ran, and the tool does not declare that it may safely run again\"}"
      ])
      const onceTags = (yield* recordsOf(client, ids.once)).map((r) => r._tag).filter((tag) => String(tag).startsWith("operation_"))
      assert.include(onceTags, "operation_unknown")
      const again = yield* turnEnded(client, ids.again)
      assert.deepStrictEqual([again.outcome, again.output], ["completed", "recorder: recorded again"])

      // The server's log: record once (by the killed daemon's server), record_idempotent twice (once by each daemon's).
      const lines = called()
      assert.deepStrictEqual(lines.filter(([, tool]) => tool === "record").length, 1)
      const idempotent = lines.filter(([, tool]) => tool === "record_idempotent")
      assert.strictEqual(idempotent.length, 2)
      assert.notStrictEqual(idempotent[0]![0], idempotent[1]![0])
    }), { timeout: 180_000 })
})
