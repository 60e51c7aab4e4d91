/**
 * The whole conversation carried across turns: a later turn's model request
 * holds every earlier turn's steps in order (user text, each assistant reply
 * with its tool calls, each tool result, denials, client-tool answers), on
 * the real runtime with a model that checks what it is sent; and the
 * transcript an actor rebuilds from the log after a restart is the one it had.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Ref, Schema } from "effect"
import * as SessionActor from "../src/actors/SessionActor.js"
import * as Transcript from "../src/actors/Transcript.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef, PermissionPolicy, ToolSpec } from "../src/schema/Agent.js"
import * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { principal } from "./support/fixtures.js"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const lookup = Tool.make({
  name: "lookup",
  description: "Looks a record up.",
  parameters: Schema.Struct({ id: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ id }) => Effect.succeed(`record ${id} ok`)
})
const pick = new ToolSpec({
  name: "pick",
  description: "The client picks a file.",
  parameters: { type: "object" },
  sideEffect: "none",
  idempotency: "unknown",
  client: true
})
const agent = new Agent({
  name: "remembers",
  instructions: "Answer from the conversation.",
  model: new ModelRef({ name: "scripted" }),
  tools: [lookup.spec, pick],
  permissions: new PermissionPolicy({ default: "allow", rules: { pick: "allow", lookup: "ask" } })
})
const call = (id: string, name: string, args: object) => ({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] })

/** A scripted model that also keeps every request it is sent. */
const recording = (script: ReadonlyArray<ScriptedModel.ScriptedReply>) =>
  Effect.gen(function*() {
    const requests = yield* Ref.make<ReadonlyArray<Model.Request>>([])
    const scripted = yield* ScriptedModel.make({ agents: { remembers: script } })
    const model = Model.Model.of({
      stream: (request) => scripted.stream(request),
      whole: (request) => Effect.zipRight(Ref.update(requests, (all) => [...all, request]), scripted.whole!(request))
    })
    return { requests, layer: Layer.succeed(Model.Model, model) }
  })

const rendered = (request: Model.Request) =>
  request.messages.map((m) =>
    m.role === "assistant" && m.toolCalls !== undefined
      ? `assistant:${m.content}[${m.toolCalls.map((c) => `${c.name}#${c.id}`).join(",")}]`
      : m.role === "tool"
      ? `tool#${m.toolCallId}:${m.content}`
      : `${m.role}:${m.content}`
  )

describe("the conversation across turns", () => {
  it.scoped("turn 2's model request holds turn 1's tool calls and results, a denial and a client's answer included", () =>
    Effect.gen(function*() {
      const model = yield* recording([
        { text: "looking", toolCalls: [...call("c1", "lookup", { id: "a" }).toolCalls, ...call("c2", "lookup", { id: "b" }).toolCalls] },
        call("c3", "pick", {}),
        "a was found, b was refused, you picked /tmp/x",
        "the lookup returned: record a ok"
      ])
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent })
        // The first lookup is approved, the second denied, then the client answers `pick`.
        yield* Effect.forkScoped(sessions.provideCallbacks(me, session.id, ["approval", "client_tool"], (callback) =>
          Effect.succeed(Option.some(
            callback.kind === "client_tool"
              ? { output: { path: "/tmp/x" } }
              : JSON.parse(callback.request.arguments).id === "a"
              ? { decision: "approve" }
              : { decision: "deny", reason: "not b" }
          ))))
        const first = yield* sessions.send(me, session.id, { text: "find a and b, then pick" })
        yield* sessions.awaitTurn(me, session.id, first.turnId!)
        const second = yield* sessions.send(me, session.id, { text: "what did the lookup return?" })
        const result = yield* sessions.awaitTurn(me, session.id, second.turnId!)
        assert.strictEqual(result.output, "the lookup returned: record a ok")

        const requests = yield* Ref.get(model.requests)
        assert.strictEqual(requests.length, 4)
        assert.deepStrictEqual(rendered(requests[3]!), [
          "user:find a and b, then pick",
          "assistant:looking[lookup#c1,lookup#c2]",
          "tool#c1:record a ok",
          `tool#c2:{"error":"denied by the user: not b"}`,
          "assistant:[pick#c3]",
          `tool#c3:{"path":"/tmp/x"}`,
          "assistant:a was found, b was refused, you picked /tmp/x",
          "user:what did the lookup return?"
        ])
        // Each call of a turn is sent what the turn did so far, and nothing is repeated.
        assert.deepStrictEqual(rendered(requests[1]!), rendered(requests[3]!).slice(0, 4))
        assert.deepStrictEqual(rendered(requests[2]!), rendered(requests[3]!).slice(0, 6))
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([lookup]) })))
    }))

  it.scoped("a failed turn keeps the steps it took, and the next turn sees them", () =>
    Effect.gen(function*() {
      const model = yield* recording([call("c1", "lookup", { id: "a" }), { fail: "the model is down" }, "recovered"])
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, {
          agent: new Agent({ ...agent, permissions: new PermissionPolicy({ default: "allow", rules: {} }) })
        })
        const first = yield* sessions.send(me, session.id, { text: "find a" })
        yield* Effect.flip(sessions.awaitTurn(me, session.id, first.turnId!))
        const second = yield* sessions.send(me, session.id, { text: "again" })
        yield* sessions.awaitTurn(me, session.id, second.turnId!)
        const requests = yield* Ref.get(model.requests)
        assert.deepStrictEqual(rendered(requests[2]!), [
          "user:find a",
          "assistant:[lookup#c1]",
          "tool#c1:record a ok",
          "user:again"
        ])
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([lookup]) })))
    }))

  it.scoped("after a restart on the same file, the transcript folded from the log is the one the model was sent", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-conversation-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "troupe.db")
      const model = yield* recording([call("c1", "lookup", { id: "a" }), "found a", call("c2", "lookup", { id: "b" }), "found b"])
      const open = { agent: new Agent({ ...agent, permissions: new PermissionPolicy({ default: "allow", rules: {} }) }) }
      const me = principal()
      const sessionId = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const session = yield* sessions.create(me, open)
        for (const text of ["find a", "find b"]) {
          const accepted = yield* sessions.send(me, session.id, { text })
          yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        }
        return session.id
      }).pipe(Effect.provide(Troupe.layer(SqliteSessionStore.layer({ filename }), { model: model.layer, tools: Toolkit.layer([lookup]) })))
      // A fresh store on the same file: what a restarted actor folds.
      const state = yield* SessionActor.foldLog(sessionId).pipe(Effect.provide(SqliteSessionStore.layer({ filename })))
      const requests = yield* Ref.get(model.requests)
      const last = requests[requests.length - 1]!
      // The last request plus the reply it got is the whole conversation.
      assert.deepStrictEqual(Transcript.toArray(state.transcript), [...last.messages, { role: "assistant", content: "found b", toolCalls: undefined }])
    }))
})
