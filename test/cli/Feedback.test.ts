/**
 * Feedback while waiting: the status line shows how long the current step
 * has taken and each retry of a model call as it happens ("retrying after
 * HTTP 500, attempt 2 of 4"), and a model call that fails after its retries
 * (a hung server, past the idle timeout) says how many attempts it made.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted, Stream } from "effect"
import { statusText } from "../../src/cli/Output.js"
import * as OpenAiCompatibleModel from "../../src/layers/OpenAiCompatibleModel.js"
import { SessionId, TurnId } from "../../src/schema/Ids.js"
import * as Model from "../../src/services/Model.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, hasTerminal, start, tempDir } from "./harness.js"

const { chunk, sse } = OpenAiServer
const hello = [chunk.role(), chunk.text("Hello."), chunk.finish("stop"), chunk.usage(5, 2)]

const request: Model.Request = {
  model: "gpt-test",
  instructions: "",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  settings: undefined,
  sessionId: SessionId.make("ses_01J00000000000000000000000"),
  turnId: TurnId.make("turn_01J00000000000000000000000"),
  agentName: "assistant"
}

describe("feedback while waiting", () => {
  it("the status line shows the seconds the step has taken, and the retry note", () => {
    assert.strictEqual(statusText("thinking", 400), "thinking")
    assert.strictEqual(statusText("thinking", 3_200), "thinking · 3s")
    assert.strictEqual(
      statusText("thinking", 12_000, "retrying after HTTP 500, attempt 2 of 4"),
      "thinking · 12s · retrying after HTTP 500, attempt 2 of 4"
    )
  })

  it.scopedLive("each retry is announced; an error after the retries says how many attempts were made", () =>
    Effect.gen(function*() {
      const server = yield* OpenAiServer.make
      yield* server.enqueue(
        OpenAiServer.error(500, "boom", "server_error", null),
        OpenAiServer.error(503, "busy", "server_error", null),
        sse(hello)
      )
      const heard: Array<OpenAiCompatibleModel.Retry> = []
      const layer = OpenAiCompatibleModel.layer({
        baseUrl: server.baseUrl,
        apiKey: Redacted.make("k"),
        model: "gpt-test",
        retry: { base: "1 millis" },
        idleTimeout: "200 millis"
      })
      const stream = Effect.flatMap(Model.Model, (model) => Stream.runDrain(model.stream(request)))
      yield* stream.pipe(
        Effect.provide(layer),
        Effect.provideService(OpenAiCompatibleModel.RetryNotice, {
          onRetry: (retry) => Effect.sync(() => void heard.push(retry))
        })
      )
      assert.deepStrictEqual(heard, [
        { cause: "HTTP 500", attempt: 2, attempts: 4 },
        { cause: "HTTP 503", attempt: 3, attempts: 4 }
      ])

      // A server that never answers: four attempts, each cut off by the idle timeout.
      const hung = OpenAiServer.sse([chunk.role()], { done: false, end: "hang" })
      yield* server.enqueue(hung, hung, hung, hung)
      const error = yield* Effect.flip(stream.pipe(Effect.provide(layer)))
      assert.match(error.reason, /^no data from .* for 200ms \(4 attempts\)$/)
      assert.lengthOf(yield* server.requests, 3 + 4, "four attempts, however the schedule restarts")
    }))

  it.scopedLive.skipIf(!hasTerminal)("troupe run shows the retry on its status line", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const server = yield* OpenAiServer.make
      yield* server.enqueue(OpenAiServer.error(500, "boom", "server_error", null), sse(hello))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: server.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const child = yield* start(["run", "--store", "memory", "--agent", "assistant", "hi"], env, { terminal: true })
      yield* child.waitFor("retrying after HTTP 500, attempt 2 of 4", "stdout")
      const result = yield* child.exit
      assert.strictEqual(result.code, 0, result.stdout)
      assert.include(result.stdout, "Hello.")
    }))
})
