/**
 * `Sessions.prompt` and `promptStream` on every backend (memory, SQLite,
 * PostgreSQL when it answers): one call gets the turn's answer, typed when
 * given the agent's output schema; a message queued behind a running turn
 * gets its own turn's answer; the stream carries that turn's events, then its
 * result. Also `sessions.as`, `Principal.local`, `Agent.make` and the tools
 * an agent carries (`ToolNotProvided` at layer construction).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, Layer, Queue, Schema, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Principal, Sessions, Tool, Troupe } from "troupe"
import { gatedModel } from "./support/actors.js"
import { principal } from "./support/fixtures.js"
import { availability, freshSchema } from "./support/postgres.js"

const Invoice = Schema.Struct({ customer: Schema.String, total: Schema.Number })

const scripts = {
  agents: { invoicer: [JSON.stringify({ customer: "ACME", total: 7.5 })] }
}

const pg = await availability()
const schema = pg.run ? await freshSchema() : undefined
afterAll(() => schema?.drop())

type Backend = { readonly name: string; readonly runtime: (options: Troupe.RuntimeOptions) => Layer.Layer<Troupe.Services, unknown> }
const backends: ReadonlyArray<Backend> = [
  { name: "memory", runtime: (options) => Troupe.layerTest(options) },
  {
    name: "sqlite",
    runtime: (options) => Troupe.layerSqlite({ filename: join(mkdtempSync(join(tmpdir(), "troupe-prompt-")), "s.db") }, options)
  },
  ...(schema === undefined ? [] : [{ name: "postgres", runtime: (options: Troupe.RuntimeOptions) => Troupe.layerPg({ url: schema.url }, options) }])
]

for (const backend of backends) {
  describe(`prompt on ${backend.name}`, () => {
    it.live("answers in one call, with usage; typed with the output schema", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions.Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: Agent.make({ name: "echo", instructions: "Echo." }) })
        const answer = yield* sessions.prompt(me, session.id, "hello")
        assert.strictEqual(answer.output, "You said: hello")
        assert.isTrue(answer.usage.totalTokens > 0)
        assert.match(answer.turnId, /^turn_/)

        const invoicer = Agent.make({ name: "invoicer", instructions: "Invoice.", output: Agent.outputOf(Invoice) })
        const other = yield* sessions.create(me, { agent: invoicer })
        const typed = yield* sessions.prompt(me, other.id, "bill ACME", { output: Invoice })
        const total: number = typed.output.total
        assert.strictEqual(total, 7.5)
        assert.strictEqual(typed.output.customer, "ACME")

        // Another workspace sees no such session.
        const stranger = yield* Effect.exit(sessions.as(principal()).prompt(session.id, "hi"))
        assert.isTrue(Exit.isFailure(stranger) && JSON.stringify(stranger.cause).includes("SessionNotFound"))
      }).pipe(Effect.provide(backend.runtime({ scripts }))))

    it.live("a message queued behind a running turn gets its own turn's answer", () =>
      Effect.gen(function*() {
        const gated = yield* gatedModel((request) => request.messages.filter((m) => m.role === "user").at(-1)?.content === "first")
        yield* Effect.gen(function*() {
          const sessions = (yield* Sessions.Sessions).as(principal())
          const session = yield* sessions.create({ agent: Agent.make({ name: "echo", instructions: "Echo." }) })
          const first = yield* Effect.fork(sessions.prompt(session.id, "first"))
          const held = yield* Queue.take(gated.held)
          const second = yield* Effect.fork(sessions.prompt(session.id, "second"))
          yield* Effect.sleep("100 millis")
          assert.isNull(second.unsafePoll())
          yield* held.release("first answer")
          const a = yield* Fiber.join(first)
          const b = yield* Fiber.join(second)
          assert.strictEqual(a.output, "first answer")
          assert.strictEqual(b.output, "You said: second")
          assert.notStrictEqual(a.turnId, b.turnId)
        }).pipe(Effect.provide(backend.runtime({ model: gated.layer })))
      }))

    it.live("promptStream yields the turn's events, its streamed text, then its result", () =>
      Effect.gen(function*() {
        const sessions = (yield* Sessions.Sessions).as(principal())
        const session = yield* sessions.create({ agent: Agent.make({ name: "echo", instructions: "Echo." }) })
        yield* sessions.prompt(session.id, "before")
        const items = Chunk.toReadonlyArray(yield* Stream.runCollect(sessions.promptStream(session.id, "stream me")))
        const last = items[items.length - 1]!
        assert.strictEqual(last._tag, "prompt_result")
        if (last._tag !== "prompt_result") return
        assert.strictEqual(last.output, "You said: stream me")
        const durable = items.flatMap((item) => (item._tag === "durable" ? [item.record] : []))
        assert.strictEqual(durable[0]?._tag, "turn_started")
        assert.strictEqual(durable[durable.length - 1]?._tag, "turn_ended")
        // Only this turn's records: the earlier turn's are not replayed.
        assert.isFalse(durable.some((r) => r._tag === "turn_started" && r.text === "before"))
        const text = items.flatMap((item) => (item._tag === "assistant_delta" ? [item.text] : [])).join("")
        assert.strictEqual(text, "You said: stream me")
      }).pipe(Effect.provide(backend.runtime({}))))

    it.live("a failed turn is the prompt's error", () =>
      Effect.gen(function*() {
        const sessions = (yield* Sessions.Sessions).as(principal())
        const session = yield* sessions.create({ agent: Agent.make({ name: "broken", instructions: "Fail." }) })
        const exit = yield* Effect.exit(sessions.prompt(session.id, "hi"))
        assert.isTrue(Exit.isFailure(exit))
        assert.include(JSON.stringify(exit), "TurnFailed")
      }).pipe(Effect.provide(backend.runtime({ scripts: { agents: { broken: [{ fail: "down" }] } } }))))
  })
}

describe("principals, agents and their tools", () => {
  it("Principal.local is the CLI's principal of this user, stable", () => {
    assert.deepStrictEqual(Principal.local, Principal.forUser(Principal.userName()))
    assert.strictEqual(Principal.local.userId, Principal.userName())
  })

  it("Agent.make takes no model (the runtime's default) and freezes only a carried tool's spec", () => {
    const count = Tool.make({
      name: "count",
      description: "Counts words.",
      parameters: Schema.Struct({ text: Schema.String }),
      success: Schema.Number,
      handler: ({ text }) => Effect.succeed(text.split(" ").length)
    })
    const agent = Agent.make({ name: "counter", instructions: "Count.", tools: [count] })
    assert.strictEqual(agent.model.name, "default")
    assert.deepStrictEqual(agent.tools, [count.spec])
    const encoded = Schema.encodeSync(Agent.Agent)(agent)
    assert.notInclude(JSON.stringify(encoded), "handler")
  })

  it.live("a tool declared once on the agent runs on the host", () =>
    Effect.gen(function*() {
      const count = Tool.make({
        name: "count",
        description: "Counts words.",
        parameters: Schema.Struct({ text: Schema.String }),
        success: Schema.Number,
        metadata: { sideEffect: "none" },
        handler: ({ text }) => Effect.succeed(text.split(" ").length)
      })
      const agent = Agent.make({ name: "counter", instructions: "Count.", tools: [count] })
      const sessions = (yield* Sessions.Sessions).as(principal())
      const session = yield* sessions.create({ agent })
      const answer = yield* sessions.prompt(session.id, "one two three")
      assert.strictEqual(answer.output, "3 words")
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [
        Agent.make({
          name: "counter",
          instructions: "Count.",
          tools: [Tool.make({
            name: "count",
            description: "Counts words.",
            parameters: Schema.Struct({ text: Schema.String }),
            success: Schema.Number,
            handler: ({ text }) => Effect.succeed(text.split(" ").length)
          })]
        })
      ],
      scripts: {
        agents: {
          counter: [{ toolCalls: [{ id: "c1", name: "count", arguments: JSON.stringify({ text: "one two three" }) }] }, "3 words"]
        }
      }
    }))))

  it.effect("a runtime given an agent naming a host tool no layer provides does not build: ToolNotProvided", () =>
    Effect.gen(function*() {
      const spec = Tool.make({
        name: "deploy",
        description: "Deploys.",
        parameters: Schema.Struct({}),
        success: Schema.String,
        handler: () => Effect.succeed("ok")
      }).spec
      const agent = Agent.make({ name: "ops", instructions: "Deploy.", tools: [spec] })
      const exit = yield* Effect.exit(Layer.build(Troupe.layerTest({ agents: [agent] })).pipe(Effect.scoped))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(JSON.stringify(exit), `"agent":"ops","tool":"deploy","_tag":"ToolNotProvided"`)
      // A client tool needs no handler here.
      const client = Tool.make({ name: "ask", description: "Asks.", parameters: Schema.Struct({}), success: Schema.String })
      const ok = yield* Effect.exit(
        Layer.build(Troupe.layerTest({ agents: [Agent.make({ name: "asker", instructions: "Ask.", tools: [client] })] })).pipe(Effect.scoped)
      )
      assert.isTrue(Exit.isSuccess(ok))
    }))
})
