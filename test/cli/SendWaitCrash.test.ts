/**
 * `troupe sessions send --wait` across a daemon SIGKILLed in the middle of a
 * streamed reply (issue 34, item 10). The next daemon on the same store makes
 * the model call again from its start; the client, resumed on the restarted
 * daemon, prints the reply once (not the lost call's words followed by the new
 * call's) and says on stderr that the call was made again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import { afterResume } from "../../src/cli/TurnView.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, serve, start, tempDir } from "./harness.js"

const { chunk, sse } = OpenAiServer
const WORDS = Array.from({ length: 20 }, (_, i) => `word${i}`)

describe("sessions send --wait and a daemon that crashes mid-reply", () => {
  it.scopedLive("prints the reply once, and says the call was made again", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify({ agents: [{ name: "talker", instructions: "Talk.", model: "gpt-test" }] }))
      const model = yield* OpenAiServer.make
      let calls = 0
      // The first call streams slowly (the daemon dies in it); the one made again streams over a second,
      // as a model does, while the client is back on the restarted daemon.
      yield* model.respondWith(() => {
        calls++
        return sse(
          [chunk.role(), ...WORDS.map((word, i) => chunk.text(i === 0 ? word : ` ${word}`)), chunk.finish("stop"), chunk.usage(5, 20)],
          { delayMs: calls === 1 ? 200 : 60 }
        )
      })
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const socket = join(home, "d.sock")
      const args = ["--socket", socket, "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "--lease-ttl", "1s"]
      const first = yield* serve(args, env)
      const id = yield* Effect.scoped(Effect.flatMap(SessionClient.connect(socket), (client) => client.create({ agent: "talker" })))
      const send = yield* start(["sessions", "send", "--socket", socket, id.id, "Say twenty words.", "--wait"], env)
      yield* send.waitFor("word6", "stdout", "60 seconds")
      first.proc.kill("SIGKILL")
      yield* first.exit
      yield* serve(args, env)
      const sent = yield* send.exit.pipe(Effect.timeout("60 seconds"))
      assert.strictEqual(sent.code, 0, sent.stderr)
      assert.strictEqual(sent.stdout, `${WORDS.join(" ")}\n`)
      assert.match(sent.stderr, /(made|makes) the call again|call was made again/, sent.stderr)
      assert.strictEqual(calls, 2)
    }), 120_000)
})

describe("what a resumed view prints of a model call (TurnView.afterResume)", () => {
  it("the call made again with the same reply: the rest of it, once, and it says so", () => {
    assert.deepStrictEqual(afterResume("a b c d", "a b ", "a b c d"), { text: "c d", newLine: false, remade: true })
  })
  it("a dropped connection, the call going on: the rest of the reply, nothing said", () => {
    assert.deepStrictEqual(afterResume("a b c d", "a b ", " d"), { text: "c d", newLine: false, remade: false })
    assert.deepStrictEqual(afterResume("a b", "a", ""), { text: " b", newLine: false, remade: false })
  })
  it("the call made again with another reply: the whole new reply on a line of its own", () => {
    assert.deepStrictEqual(afterResume("p q", "x y", "p q"), { text: "p q", newLine: true, remade: true })
  })
})
