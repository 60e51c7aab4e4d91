/**
 * The built-ins' policy through real sessions (a runtime on a local
 * workspace, the scripted model): `bash` and `process.start` ask by default,
 * and an approval provider's denial keeps the command from running while its
 * approval lets it run; an agent policy denying `capability:process.execute`
 * refuses `bash` without asking; closing the session that started a process
 * stops it (the actor tells the toolkit), checked by pid.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as LocalWorkspace from "../../src/layers/LocalWorkspace.js"
import { Agent, ModelRef, PermissionPolicy } from "../../src/schema/Agent.js"
import type * as Model from "../../src/services/Model.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Builtins from "../../src/tools/Builtins.js"
import * as Troupe from "../../src/Troupe.js"
import { principal } from "../support/fixtures.js"
import { alive, allGone } from "../support/pids.js"

const tools = Builtins.specsOrThrow(["bash", "process"])
const guarded = new Agent({ name: "guarded", instructions: "Run what is asked.", model: new ModelRef({ name: "scripted" }), tools })
const fenced = new Agent({
  name: "fenced",
  instructions: "Run what is asked.",
  model: new ModelRef({ name: "scripted" }),
  tools,
  permissions: new PermissionPolicy({ capabilities: { "process.execute": "deny" } })
})

/** The asked command as the one tool call of the turn (`bash: …` or `process.start: …`), then the tool's output as the answer. */
const fallback = (request: Model.Request) => {
  const last = request.messages.at(-1)!
  if (last.role === "tool") return `result: ${last.content}`
  const [name, command] = last.content.split(": ")
  return { toolCalls: [{ id: "c1", name: name!, arguments: JSON.stringify({ command }) }] }
}

describe("built-ins under the policy", () => {
  it.live("bash and process.start ask; a denial keeps the command from running; a capability denial asks nobody; close stops processes", () => {
    const root = mkdtempSync(join(tmpdir(), "tpol-"))
    const layer = Troupe.layerTest({
      agents: [guarded, fenced],
      tools: Builtins.layer.pipe(Layer.provide(LocalWorkspace.layerWith({ root }))),
      scripts: { fallback }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const asked: Array<string> = []
      const session = yield* sessions.create(me, { agent: guarded })
      const provider = yield* Effect.fork(sessions.provideCallbacks(me, session.id, ["approval"], (callback) =>
        Effect.sync(() => {
          const request = callback.request as { readonly toolName: string }
          asked.push(request.toolName)
          return Option.some({ decision: request.toolName === "bash" ? "deny" : "approve", reason: "not this one" })
        })))

      const refused = yield* sessions.prompt(me, session.id, "bash: touch refused.txt")
      assert.include(refused.text, "not this one")
      assert.isFalse(existsSync(join(root, "refused.txt")))
      const started = yield* sessions.prompt(me, session.id, "process.start: echo $$ > started.pid; exec sleep 300")
      assert.include(started.text, "\"status\":\"running\"")
      assert.deepStrictEqual(asked, ["bash", "process.start"])

      const other = yield* sessions.create(me, { agent: fenced })
      const denied = yield* sessions.prompt(me, other.id, "bash: touch denied.txt")
      assert.include(denied.text, "capability:process.execute")
      assert.isFalse(existsSync(join(root, "denied.txt")))
      assert.deepStrictEqual(asked, ["bash", "process.start"], "a denial by the policy asks nobody")

      const pid = Number(readFileSync(join(root, "started.pid"), "utf8"))
      assert.isTrue(alive(pid))
      yield* sessions.close(me, session.id)
      yield* allGone([pid])
      yield* Fiber.interrupt(provider)
    }).pipe(Effect.provide(layer), Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true, force: true }))))
  }, 30_000)
})
