/**
 * Stopping `troupe serve` mid-turn, end to end. The daemon runs an agent from
 * an agents file with a client tool, on an OpenAI-compatible model (the local
 * test server). One session's turn is parked on the client tool's callback;
 * another's is busy, its model reply still streaming, when SIGTERM arrives.
 * The daemon stops accepting, lets the busy turn finish within the grace
 * period, and exits 0. Restarted on the same SQLite file, it resumes the
 * parked turn; `troupe sessions answer` gives the tool's result and the turn
 * completes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option, Schedule, Stream } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import type { SessionId } from "../../src/schema/Ids.js"
import type { RecordBody } from "../../src/schema/Record.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, jsonLines, ok, serve, tempDir } from "./harness.js"

const { chunk, sse } = OpenAiServer

const AGENTS = {
  agents: [{
    name: "helper",
    instructions: "Look words up with lookup.",
    model: "gpt-test",
    tools: [{
      name: "lookup",
      description: "Looks a word up in the client's dictionary.",
      parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] }
    }]
  }]
}

/** The first record of `tag` in a session's events (following live ones until it comes). */
const firstRecord = <T extends RecordBody["_tag"]>(client: SessionClient.SessionClient, id: SessionId, tag: T) =>
  client.events(id).pipe(
    Stream.map((frame) => frame.event),
    Stream.filterMap((event) =>
      event._tag === "durable" && event.record._tag === tag
        ? Option.some(event.record as Extract<RecordBody, { readonly _tag: T }>)
        : Option.none()
    ),
    Stream.runHead,
    Effect.map(Option.getOrThrow),
    Effect.timeout("20 seconds"),
    Effect.orDie
  )

describe("troupe serve, stopped mid-turn", () => {
  it.scopedLive("drains a busy turn, keeps a parked one, exits 0; after a restart the parked turn finishes", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const model = yield* OpenAiServer.make
      yield* model.enqueue(
        // Session A: the model asks for the client tool.
        sse([chunk.role(), chunk.toolCall(0, { id: "call_1", name: "lookup", arguments: "{\"word\":\"troupe\"}" }), chunk.finish("tool_calls"), chunk.usage(20, 5)]),
        // Session B: a slow reply, still streaming when SIGTERM arrives.
        sse([chunk.role(), chunk.text("slow "), chunk.text("and "), chunk.text("steady"), chunk.finish("stop"), chunk.usage(10, 3)], { delayMs: 300 }),
        // Session A again, after the restart and the tool's result.
        sse([chunk.role(), chunk.text("A troupe is a company of actors."), chunk.finish("stop"), chunk.usage(30, 8)])
      )
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const socket = join(home, "d.sock")
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test" })
      const args = ["--socket", socket, "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "--grace", "10s"]

      const first = yield* serve(args, env)
      assert.include(first.stderr(), "agents helper")
      const { a, b, callbackId } = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* SessionClient.connect(socket)
        const a = yield* client.create({ agent: "helper", title: "parked" })
        yield* client.send(a.id, { text: "What is a troupe?" })
        const opened = yield* firstRecord(client, a.id, "callback_opened")
        assert.strictEqual(opened.kind, "client_tool")
        const b = yield* client.create({ agent: "helper", title: "busy" })
        yield* client.send(b.id, { text: "Take your time." })
        // B's model call is in flight once the server has its request.
        yield* Effect.repeat(model.requests, {
          until: (requests) => requests.length >= 2,
          schedule: Schedule.spaced("20 millis")
        })
        return { a: a.id, b: b.id, callbackId: opened.callbackId }
      })).pipe(Effect.orDie)

      const stopped = yield* first.stop("SIGTERM")
      assert.strictEqual(stopped.code, 0, stopped.stderr)
      assert.include(stopped.stderr, "troupe: stopping (SIGTERM)")
      assert.notInclude(stopped.stderr, "grace period over")
      // It waited for B's reply (about 1.5 s of it was still to come), not for the grace period.
      assert.isAbove(Duration.toMillis(stopped.elapsed), 800)
      assert.isBelow(Duration.toMillis(stopped.elapsed), 10_000)

      // Restarted on the same file: B finished before the exit, A waits for its tool.
      const second = yield* serve(args, env)
      const [busy, parked] = yield* Effect.all([
        ok(["sessions", "events", "--socket", socket, b, "--json"], env),
        ok(["sessions", "show", "--socket", socket, a], env)
      ], { concurrency: "unbounded" })
      const ended = jsonLines(busy.stdout).map((event) => (event as { record: RecordBody }).record).filter((r) => r._tag === "turn_ended")
      assert.deepStrictEqual(ended.map((r) => r._tag === "turn_ended" && [r.outcome, r.output]), [["completed", "slow and steady"]])
      assert.match(parked.stdout, /status +waiting/)
      assert.include(parked.stdout, `${callbackId}  client_tool  → lookup({"word":"troupe"})`)

      yield* ok(["sessions", "answer", "--socket", socket, a, callbackId, "--output", "{\"meaning\":\"a company of actors\"}"], env)
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* SessionClient.connect(socket)
        return yield* firstRecord(client, a, "turn_ended")
      })).pipe(Effect.orDie)
      assert.strictEqual(result.outcome, "completed")
      assert.strictEqual(result.output, "A troupe is a company of actors.")
      // The model got the client's result as the tool message.
      const requests = yield* model.requests
      assert.strictEqual(requests.length, 3)
      const messages = (requests[2]!.body as { messages: ReadonlyArray<Record<string, unknown>> }).messages
      assert.deepInclude(messages, { role: "tool", tool_call_id: "call_1", content: "{\"meaning\":\"a company of actors\"}" })

      assert.strictEqual((yield* second.stop("SIGTERM")).code, 0)
    }), 90_000)
})
