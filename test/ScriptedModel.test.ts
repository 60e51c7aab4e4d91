import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import { makeSessionId, makeTurnId } from "../src/schema/Ids.js"
import * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { agent, principal } from "./support/fixtures.js"

const request = (sessionId: Model.Request["sessionId"], agentName: string, text: string) =>
  Effect.map(makeTurnId, (turnId): Model.Request => ({
    model: "scripted",
    instructions: "be brief",
    messages: [{ role: "user", content: text }],
    tools: [],
    settings: undefined,
    sessionId,
    turnId,
    agentName
  }))

const reply = (model: Model.Model["Type"], req: Model.Request) =>
  Stream.runFold(model.stream(req), Model.emptyReply, Model.gather)

describe("ScriptedModel", () => {
  it.effect("summary calls get the summarizer's answer (by default the text's head and tail) and never advance a script", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const summaryOf = (req: Model.Request): Model.Request => ({ ...req, purpose: "summary" })
      const model = yield* ScriptedModel.make({ sessions: { [sessionId]: ["s1", "s2"] } })
      const long = `${"a".repeat(300)}${"z".repeat(300)}`
      const summary = yield* reply(model, summaryOf(yield* request(sessionId, "helper", long)))
      assert.strictEqual(summary.text, `Summary: ${"a".repeat(200)} … ${"z".repeat(200)}`)
      assert.strictEqual((yield* reply(model, yield* request(sessionId, "helper", "hi"))).text, "s1", "the script did not move")
      const own = yield* ScriptedModel.make({ summarize: () => ({ fail: "no summaries today" }) })
      const failed = yield* Effect.either(reply(own, summaryOf(yield* request(sessionId, "helper", "x"))))
      assert.isTrue(failed._tag === "Left" && failed.left.reason === "no summaries today")
    }))

  it.effect("session scripts win over agent scripts, which win over the echo; each advances per call and its last reply repeats", () =>
    Effect.gen(function*() {
      const scripted = yield* makeSessionId
      const other = yield* makeSessionId
      const model = yield* ScriptedModel.make({
        sessions: { [scripted]: ["s1", "s2"] },
        agents: { helper: ["a1"] }
      })
      const texts = []
      for (let i = 0; i < 3; i++) texts.push((yield* reply(model, yield* request(scripted, "helper", "hi"))).text)
      assert.deepStrictEqual(texts, ["s1", "s2", "s2"])
      assert.strictEqual((yield* reply(model, yield* request(other, "helper", "hi"))).text, "a1")
      assert.strictEqual((yield* reply(model, yield* request(other, "someone", "hello there"))).text, "You said: hello there")
    }))

  it.effect("streams text word by word, then usage, then the finish reason; tool calls finish with tool_calls", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const model = yield* ScriptedModel.make({
        sessions: { [sessionId]: ["two words", { text: "", toolCalls: [{ id: "c1", name: "echo", arguments: "{}" }] }] }
      })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(model.stream(yield* request(sessionId, "a", "hi"))))
      assert.deepStrictEqual(events.map((e) => e._tag), ["TextDelta", "TextDelta", "UsageEvent", "Finish"])
      const second = yield* reply(model, yield* request(sessionId, "a", "hi"))
      assert.deepStrictEqual(second.toolCalls.map((c) => c.name), ["echo"])
      assert.strictEqual(second.finishReason, "tool_calls")
    }))

  it.effect("a scripted failure is a ModelError, and the turn fails with model_error", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const session = yield* sessions.create(me, { agent: agent("flaky") })
      const accepted = yield* sessions.send(me, session.id, { text: "hi" })
      const failed = yield* Effect.flip(sessions.awaitTurn(me, session.id, accepted.turnId!))
      assert.strictEqual(failed._tag, "TurnFailed")
      assert.strictEqual(failed._tag === "TurnFailed" && failed.failureCode, "model_error")
    }).pipe(Effect.provide(Troupe.layerTest({ scripts: { agents: { flaky: [{ fail: "upstream down" }] } } }))))

  it.effect("Troupe.layerTest scripts replies per agent, as the README says", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const session = yield* sessions.create(me, { agent: agent("demo") })
      const outputs = []
      for (const text of ["one", "two"]) {
        const accepted = yield* sessions.send(me, session.id, { text })
        outputs.push((yield* sessions.awaitTurn(me, session.id, accepted.turnId!)).output)
      }
      assert.deepStrictEqual(outputs, ["first reply", "second reply"])
    }).pipe(Effect.provide(Troupe.layerTest({ scripts: { agents: { demo: ["first reply", "second reply"] } } }))))

  it.effect("input usage is a quarter of the prompt's characters, whether the request is made of a history or of an array", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const { messages: _, ...base } = yield* request(sessionId, "helper", "x")
      const ofHistory = yield* ScriptedModel.make()
      const ofArray = yield* ScriptedModel.make()
      const inputOf = (model: Model.Model["Type"], req: Model.Request) => Effect.map(reply(model, req), (r) => r.inputTokens)
      const expect = (messages: ReadonlyArray<Model.Message>) =>
        Math.ceil((base.instructions.length + messages.reduce((n, m) => n + m.content.length, 0)) / 4)
      const check = (items: ReadonlyArray<Model.Message>, length: number, rest: ReadonlyArray<Model.Message>) =>
        Effect.gen(function*() {
          const messages = [...items.slice(0, length), ...rest]
          const made = Model.withHistory(base, { items, length, rest })
          assert.strictEqual(yield* inputOf(ofHistory, made), expect(messages))
          assert.deepStrictEqual(made.messages, messages, "the request's own array")
          assert.strictEqual(yield* inputOf(ofArray, { ...base, messages }), expect(messages))
        })
      // One growing history (with waiting messages after it at times), a shorter read of it, then a branch.
      const history: Array<Model.Message> = []
      for (let i = 0; i < 6; i++) {
        history.push({ role: "user", content: `message number ${i} ${"y".repeat(i * 7)}` })
        yield* check(history, history.length, i % 2 === 0 ? [{ role: "user", content: "a steer" }] : [])
      }
      yield* check(history, 3, [])
      yield* check([...history.slice(0, 4), { role: "assistant", content: "another way" }], 5, [])
      yield* check(history, history.length, [])
    }))
})
