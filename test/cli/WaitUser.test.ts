/**
 * An agent whose `noToolPolicy` is `wait_user` asks the user for more after a
 * reply without tool calls, and its turn goes on with the answer.
 *
 * - `troupe run` on a terminal (a pseudo terminal from `script(1)`) reads the
 *   user's replies at a `you>` prompt; the same turn goes on; an empty line
 *   ends the run with exit 0 and the turn left waiting; Ctrl-C there
 *   interrupts the turn (recorded) and exits 130.
 * - Without a terminal, `troupe run` prints the reply and ends (exit 0)
 *   instead of waiting forever; a daemon on the same store later takes the
 *   user's reply (`troupe sessions send --wait`), which goes into the waiting
 *   turn, shows the next reply and ends when the agent waits again.
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, hasTerminal, ok, programPid, serve, start, tempDir, troupe } from "./harness.js"

const { chunk, sse } = OpenAiServer

const AGENTS = {
  agents: [{ name: "asker", instructions: "Ask until you know.", model: "gpt-test", noToolPolicy: "wait_user" }]
}

const reply = (text: string) => sse([chunk.role(), chunk.text(text), chunk.finish("stop"), chunk.usage(10, 2)])

/** The user messages of a model request, in order. */
const userMessages = (request: OpenAiServer.RecordedRequest) =>
  (request.body as { messages: ReadonlyArray<{ role: string; content: string }> }).messages
    .filter((message) => message.role === "user")
    .map((message) => message.content)

describe("a wait_user agent from the command line", () => {
  it.scopedLive.skipIf(!hasTerminal)("troupe run on a terminal takes the user's replies into the same turn; an empty line ends the run", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const model = yield* OpenAiServer.make
      yield* model.enqueue(reply("Which file?"), reply("Deleting a.txt is fine. Anything else?"))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const child = yield* start(
        ["run", "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "Delete a file."],
        env,
        { terminal: true }
      )
      yield* child.waitFor("you> ", "stdout")
      assert.include(child.stdout(), "Which file?")
      child.proc.stdin!.write("a.txt\n")
      yield* child.waitFor("Anything else?", "stdout")
      yield* child.waitFor(/Anything else\?[\s\S]*you> /, "stdout")
      child.proc.stdin!.write("\n")
      const result = yield* child.exit
      assert.strictEqual(result.code, 0, result.stdout)
      assert.include(result.stdout, "the agent waits for your reply")
      const requests = yield* model.requests
      assert.strictEqual(requests.length, 2)
      // One turn: the second call carries the prompt, the first reply and the user's answer.
      assert.deepStrictEqual(userMessages(requests[1]!), ["Delete a file.", "a.txt"])
    }), 60_000)

  it.scopedLive.skipIf(!hasTerminal)("Ctrl-C at the you> prompt interrupts the turn (recorded) and exits 130", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const model = yield* OpenAiServer.make
      yield* model.enqueue(reply("Which file?"))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const store = ["--store", `sqlite:${join(home, "t.db")}`]
      const child = yield* start(["run", ...store, "--agents", agentsFile, "Delete a file."], env, { terminal: true })
      yield* child.waitFor("you> ", "stdout")
      child.proc.stdin!.write("\x03")
      const result = yield* child.exit
      assert.strictEqual(result.code, 130, result.stdout)
      assert.include(result.stdout, "interrupted")
      // The log says so: the turn ended as interrupted.
      const db = new Database(join(home, "t.db"), { readonly: true })
      const ends = db.prepare("SELECT body FROM troupe_log").all()
        .map((row) => JSON.parse((row as { body: string }).body) as { _tag: string; outcome?: string })
        .filter((body) => body._tag === "turn_ended")
      db.close()
      assert.deepStrictEqual(ends.map((end) => end.outcome), ["interrupted"])
    }), 60_000)

  it.scopedLive.skipIf(!hasTerminal)("SIGINT from outside at the you> prompt interrupts the turn (recorded) and ends the program", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const model = yield* OpenAiServer.make
      yield* model.enqueue(reply("Which file?"))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })
      const child = yield* start(["run", "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "Delete a file."], env, {
        terminal: true
      })
      yield* child.waitFor("you> ", "stdout", "60 seconds")
      process.kill(programPid(child)!, "SIGINT")
      const result = yield* child.exit.pipe(Effect.timeout("4 seconds"), Effect.orDie)
      assert.strictEqual(result.code, 130, result.stdout)
      const db = new Database(join(home, "t.db"), { readonly: true })
      const ends = db.prepare("SELECT body FROM troupe_log").all()
        .map((row) => JSON.parse((row as { body: string }).body) as { _tag: string; outcome?: string })
        .filter((body) => body._tag === "turn_ended")
      db.close()
      assert.deepStrictEqual(ends.map((end) => end.outcome), ["interrupted"])
    }), 60_000)

  it.scopedLive("without a terminal troupe run ends at the wait; a daemon on the store takes the reply into the turn", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const store = ["--store", `sqlite:${join(home, "t.db")}`]
      const model = yield* OpenAiServer.make
      yield* model.enqueue(reply("Which file?"), reply("Deleted b.txt. Anything else?"))
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "k" })

      const ran = yield* troupe(["run", ...store, "--agents", agentsFile, "Delete a file."], env, { stdin: "" })
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.strictEqual(ran.stdout, "Which file?\n")
      const id = /session (ses_[0-9A-Z]+) keeps waiting/.exec(ran.stderr)?.[1]
      assert.isDefined(id, ran.stderr)

      const socket = join(home, "d.sock")
      const daemon = yield* serve(["--socket", socket, ...store, "--agents", agentsFile], env)
      const at = ["--socket", socket]
      const shown = yield* ok(["sessions", "show", ...at, id!], env)
      assert.include(shown.stdout, "running")
      const sent = yield* ok(["sessions", "send", ...at, id!, "b.txt", "--wait"], env)
      assert.strictEqual(sent.stdout, "Deleted b.txt. Anything else?\n")
      assert.include(sent.stderr, `waiting for your reply: troupe sessions send ${id}`)
      const requests = yield* model.requests
      assert.deepStrictEqual(userMessages(requests[1]!), ["Delete a file.", "b.txt"])
      assert.strictEqual((yield* daemon.stop("SIGTERM")).code, 0)
    }), 60_000)
})
