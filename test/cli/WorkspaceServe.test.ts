/**
 * The built-in `bash` and `process.*` tools through `troupe serve --agents
 * FILE --workspace DIR` on a SQLite store, driven over the socket only, on
 * the OpenAI-compatible model against the local test server (each user
 * message names the one tool call the model makes; a tool result comes back
 * as the answer). Approvals are answered by the client. One session's process
 * is invisible to another and stops when its session closes; then the daemon
 * is SIGKILLed while a `bash` call runs (after its side effect, before its
 * receipt): nothing it started survives it, and the daemon started again
 * reports that call's outcome as unknown without running it twice, and the
 * session's process as lost.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schedule, Stream } from "effect"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import type { SessionId, TurnId } from "../../src/schema/Ids.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { alive, allGone } from "../support/pids.js"
import { envFor, start, tempDir } from "./harness.js"

interface Message {
  readonly role: string
  readonly content?: string | null
}

/** The user's message is `{ tool, args }`: the model calls it (by its wire name), then answers with its result. */
const respond = (body: unknown): OpenAiServer.Reply => {
  const last = (body as { messages: ReadonlyArray<Message> }).messages.at(-1)!
  if (last.role === "tool") return OpenAiServer.textReply(`result: ${last.content}`)
  const { args, tool } = JSON.parse(last.content ?? "{}") as { tool: string; args: unknown }
  return OpenAiServer.toolCallsReply([tool.replace(".", "_"), args])
}

/** The output of the turn `turnId`, once it ends. */
const endOf = (client: SessionClient.SessionClient, id: SessionId, turnId: TurnId) =>
  client.events(id).pipe(
    Stream.filterMap((frame) =>
      frame.event._tag === "durable" && frame.event.record._tag === "turn_ended" && frame.event.record.turnId === turnId
        ? Option.some(frame.event.record)
        : Option.none()
    ),
    Stream.runHead,
    Effect.map(Option.getOrThrow)
  )

/** Sends a tool call for the model to make and waits for the turn's answer. */
const run = (client: SessionClient.SessionClient, id: SessionId, tool: string, args: unknown = {}) =>
  Effect.flatMap(client.send(id, { text: JSON.stringify({ tool, args }) }), (accepted) =>
    Effect.map(endOf(client, id, accepted.turnId!), (ended) => String(ended.output)))

/** Approves every approval of `id`'s tree, noting the tool names. */
const approveAll = (client: SessionClient.SessionClient, id: SessionId, asked: Array<string>) =>
  Effect.fork(client.provideCallbacks(id, ["approval"], (callback) =>
    Effect.sync(() => {
      asked.push((callback.request as { readonly toolName: string }).toolName)
      return Option.some({ decision: "approve" })
    })))

const pidIn = (file: string) => Number(readFileSync(file, "utf8"))

describe("troupe serve --workspace: bash and process.*", () => {
  it.scopedLive("approved by the client, owned by their session, stopped on close; a SIGKILL mid-bash: unknown outcome, run once, process lost", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const model = yield* OpenAiServer.make
      yield* model.respondWith(respond)
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify({ agents: [{ name: "ops", instructions: "Run things.", model: "gpt-test", builtins: ["bash", "process"] }] }))
      const workspace = join(home, "ws")
      mkdirSync(workspace)
      const socket = join(home, "d.sock")
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "sk-test" })
      const args = ["serve", "--socket", socket, "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "--workspace", workspace, "--lease-ttl", "1s"]
      const serve = Effect.gen(function*() {
        const daemon = yield* start(args, env)
        // Generous: from sources (tsx) on a loaded machine, start-up alone can take seconds.
        yield* daemon.waitFor("troupe: store ", "stderr", "90 seconds")
        return daemon
      })

      const first = yield* serve
      const client = yield* SessionClient.connect(socket)
      const a = yield* client.create({ agent: "ops" })
      const b = yield* client.create({ agent: "ops" })
      const asked: Array<string> = []
      const providers = [yield* approveAll(client, a.id, asked), yield* approveAll(client, b.id, asked)]

      // A's process runs; B sees none of it; A's close stops it.
      assert.include(yield* run(client, a.id, "process.start", { command: "echo $$ > a.pid; exec sleep 300" }), "\"status\":\"running\"")
      assert.deepStrictEqual(asked, ["process.start"])
      yield* Effect.retry(Effect.try(() => pidIn(join(workspace, "a.pid"))), Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
      const aPid = pidIn(join(workspace, "a.pid"))
      assert.isTrue(alive(aPid))
      assert.include(yield* run(client, b.id, "process.list"), "\"processes\":[]")
      assert.include(yield* run(client, b.id, "process.signal", { id: "p1", signal: "SIGKILL" }), "started no process")
      assert.isTrue(alive(aPid))
      yield* client.close(a.id)
      yield* allGone([aPid])

      // B starts a process, then a bash call that is cut short by SIGKILL after its side effect.
      assert.include(yield* run(client, b.id, "process.start", { command: "echo $$ > b.pid; exec sleep 300" }), "\"id\":\"p1\"")
      const sideEffects = join(workspace, "side-effects.txt")
      const accepted = yield* client.send(b.id, {
        text: JSON.stringify({ tool: "bash", args: { command: `echo ran >> ${sideEffects}; echo $$ > bash.pid; exec sleep 300` } })
      })
      yield* Effect.retry(
        Effect.filterOrFail(Effect.sync(() => existsSync(join(workspace, "bash.pid")) && existsSync(sideEffects)), (ran) => ran),
        Schedule.spaced("50 millis").pipe(Schedule.upTo("20 seconds"))
      )
      const orphans = [pidIn(join(workspace, "b.pid")), pidIn(join(workspace, "bash.pid"))]
      assert.isTrue(orphans.every(alive))
      yield* Effect.forEach(providers, Fiber.interrupt)
      first.proc.kill("SIGKILL")
      yield* first.exit
      // Nothing the dead daemon started outlives it.
      yield* allGone(orphans)

      // The daemon again: the cut call is reported unknown, not run again; the process is lost.
      yield* serve
      const again = yield* SessionClient.connect(socket)
      const ended = yield* endOf(again, b.id, accepted.turnId!)
      assert.include(String(ended.output), "the outcome of this call is unknown")
      assert.strictEqual(readFileSync(sideEffects, "utf8"), "ran\n")
      const listed = yield* run(again, b.id, "process.list")
      assert.include(listed, "\"id\":\"p1\"")
      assert.include(listed, "\"status\":\"lost\"")
      assert.include(yield* run(again, b.id, "process.read", { id: "p1" }), "lost")
      assert.deepStrictEqual(asked, ["process.start", "process.start", "bash"])
    }), { timeout: 180_000 })
})
