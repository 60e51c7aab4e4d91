/**
 * An agent used as a tool (`Agent.asTool`) end to end through `Sessions`:
 * the call runs the agent as a child session with `input` as its message,
 * the child's final output is the tool's result and the parent goes on (the
 * result is not repeated to the parent's model), the tree's subagent policy
 * counts and refuses it, and a failed child is a tool error.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import { Agent, asTool, ModelRef } from "../src/schema/Agent.js"
import { SubagentPolicy } from "../src/schema/Policy.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Troupe from "../src/Troupe.js"
import { eventually, logOf } from "./support/actors.js"
import { call, calls, ended, recording, recordsOf, start, toolMessages, userMessages } from "./support/agentLoop.js"
import { principal } from "./support/fixtures.js"

const researcher = new Agent({
  name: "researcher",
  instructions: "You research.",
  model: new ModelRef({ name: "m" })
})

const research = asTool(researcher, { name: "research", description: "Researches a question and answers it." })

const lead = new Agent({
  name: "lead",
  instructions: "You lead.",
  model: new ModelRef({ name: "m" }),
  tools: [research]
})

describe("agent as tool", () => {
  it.effect("the call runs the agent as a child session; its final output is the tool result; the parent goes on", () => {
    const model = recording({
      agents: {
        lead: [calls(call("c1", "research", { input: "how tall is the tower?" })), "The tower is 330 m tall."],
        researcher: ["330 metres"]
      }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: lead })
      // A root whose agent runs agents as tools gets the default subagent policy.
      assert.isNotNull(session.subagentPolicy)
      const turnId = yield* start(who, session.id, "tower?")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "completed")
      assert.strictEqual(end.output, "The tower is 330 m tall.")

      const children = yield* sessions.children(who, session.id)
      assert.lengthOf(children.items, 1)
      const child = children.items[0]!
      assert.strictEqual(child.agent, "researcher")
      const childLog = yield* logOf(child.session.id)
      assert.deepStrictEqual(recordsOf(childLog, "turn_started").map((s) => s.text), ["how tall is the tower?"])

      // The tool's receipt is the child's output, and the parent's model sees it once, as the tool result.
      const log = yield* logOf(session.id)
      const receipts = recordsOf(log, "operation_completed").filter((c) => c.output === "330 metres")
      assert.lengthOf(receipts, 1)
      assert.strictEqual(recordsOf(log, "child_spawned")[0]!.operationId, receipts[0]!.operationId)
      const parentRequests = model.requests.filter((r) => r.agentName === "lead")
      assert.lengthOf(parentRequests, 2)
      assert.deepStrictEqual(toolMessages(parentRequests[1]!), [{ toolCallId: "c1", content: "330 metres" }])
      assert.deepStrictEqual(userMessages(parentRequests[1]!), ["tower?"])
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("counted against the subagent policy: a call past maxChildTurns is a retryable tool error naming the limit", () => {
    const model = recording({
      agents: {
        lead: [
          calls(call("c1", "research", { input: "one" })),
          calls(call("c2", "research", { input: "two" })),
          "done"
        ],
        researcher: ["an answer"]
      }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: lead, subagentPolicy: new SubagentPolicy({ maxDepth: 2, maxChildTurns: 1 }) })
      const turnId = yield* start(who, session.id, "go")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "completed")
      const log = yield* logOf(session.id)
      const tools = new Set(recordsOf(log, "operation_started").filter((s) => s.kind === "tool").map((s) => s.operationId))
      const outputs = recordsOf(log, "operation_completed").filter((c) => tools.has(c.operationId))
      assert.deepStrictEqual(outputs.map((c) => c.isError), [false, true])
      assert.include(outputs[1]!.output as object, { limit: "max_child_turns", retryable: true })
      assert.lengthOf(recordsOf(log, "child_spawned"), 1)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("an explicit allowedAgents that does not name the tool's agent refuses it (agent_not_allowed)", () => {
    const model = recording({ agents: { lead: [calls(call("c1", "research", { input: "x" })), "done"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, {
        agent: lead,
        subagentPolicy: new SubagentPolicy({ maxDepth: 2, allowedAgents: ["someone_else"] })
      })
      const turnId = yield* start(who, session.id, "go")
      yield* ended(session.id, turnId)
      const refused = recordsOf(yield* logOf(session.id), "operation_completed").find((c) => c.isError)
      assert.include(refused!.output as object, { limit: "agent_not_allowed" })
      assert.lengthOf((yield* sessions.children(who, session.id)).items, 0)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("a child that fails is a tool error naming its failure code; the parent goes on", () => {
    const flaky = new Agent({ ...researcher, noToolPolicy: "continue", maxCycles: 1 }, true)
    const agent = new Agent({ ...lead, tools: [asTool(flaky, { name: "research", description: "Researches." })] }, true)
    const model = recording({
      agents: { lead: [calls(call("c1", "research", { input: "x" })), "gave up"], researcher: ["thinking…"] }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent })
      const turnId = yield* start(who, session.id, "go")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.output, "gave up")
      const last = model.requests.filter((r) => r.agentName === "lead").at(-1)!
      assert.deepStrictEqual(toolMessages(last), [
        { toolCallId: "c1", content: JSON.stringify({ error: "the agent researcher failed (max_cycles)" }) }
      ])
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("arguments without input are a tool error and spawn nothing", () => {
    const model = recording({ agents: { lead: [calls(call("c1", "research", { question: "x" })), "ok"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: lead })
      const turnId = yield* start(who, session.id, "go")
      yield* ended(session.id, turnId)
      const refused = recordsOf(yield* logOf(session.id), "operation_completed").find((c) => c.isError)
      assert.include(JSON.stringify(refused!.output), "invalid arguments")
      assert.lengthOf((yield* sessions.children(who, session.id)).items, 0)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("interrupting the parent's turn interrupts the child turn it waits on, with the same reason", () => {
    // The child asks its client before answering, so it is still working when the parent is interrupted.
    const ask = Tool.make({ name: "ask", description: "Asks the user.", parameters: Schema.Struct({}), success: Schema.String })
    const asking = new Agent({ ...researcher, tools: [ask.spec] }, true)
    const agent = new Agent({ ...lead, tools: [asTool(asking, { name: "research", description: "Researches." })] }, true)
    const model = recording({ agents: { lead: [calls(call("c1", "research", { input: "x" }))], researcher: [calls(call("a1", "ask"))] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent })
      const turnId = yield* start(who, session.id, "go")
      yield* eventually(Effect.map(sessions.children(who, session.id), (page) => page.items.length === 1), "the child")
      const childId = (yield* sessions.children(who, session.id)).items[0]!.session.id
      yield* eventually(Effect.map(sessions.callbacks(who, childId), (open) => open.length === 1), "the child's question")
      const childTurn = recordsOf(yield* logOf(childId), "turn_started")[0]!.turnId

      const outcome = yield* sessions.interrupt(who, session.id, turnId, "the user changed their mind")
      assert.strictEqual(outcome.outcome, "interrupted")
      const childEnd = yield* ended(childId, childTurn)
      assert.strictEqual(childEnd.outcome, "interrupted")
      assert.strictEqual(childEnd.reason, "the user changed their mind")
      const applied = recordsOf(yield* logOf(childId), "input_applied").filter((a) => a.kind === "interrupt")
      assert.deepStrictEqual(applied.map((a) => a.detail), [{ outcome: "interrupted" }])
      // The child's interrupted result reaches the parent, whose next turn reads it.
      yield* eventually(
        Effect.map(logOf(session.id), (log) => recordsOf(log, "child_result").some((r) => r.reason === "the user changed their mind")),
        "the child's result at the parent"
      )
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("a call resumed on a fresh host waits for the child it spawned instead of spawning another", () =>
    Effect.gen(function*() {
      // The child asks its client before answering, so it is still working when the first host goes away.
      const ask = Tool.make({ name: "ask", description: "Asks the user.", parameters: Schema.Struct({}), success: Schema.String })
      const asking = new Agent({ ...researcher, tools: [ask.spec] }, true)
      const agent = new Agent({ ...lead, tools: [asTool(asking, { name: "research", description: "Researches." })] }, true)
      const store = yield* MemorySessionStore.make
      const storeLayer = Layer.succeed(SessionStore, store)
      const who = principal()
      const first = recording({ agents: { lead: [calls(call("c1", "research", { input: "x" }))], researcher: [calls(call("a1", "ask"))] } })
      const { childId, sessionId, turnId } = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const session = yield* sessions.create(who, { agent })
        const turnId = yield* start(who, session.id, "go")
        const children = yield* Effect.gen(function*() {
          yield* eventually(Effect.map(sessions.children(who, session.id), (page) => page.items.length === 1), "the child")
          return yield* sessions.children(who, session.id)
        })
        const childId = children.items[0]!.session.id
        yield* eventually(Effect.map(sessions.callbacks(who, childId), (open) => open.length === 1), "the child's question")
        return { childId, sessionId: session.id, turnId }
      }).pipe(Effect.provide(Troupe.layer(storeLayer, { model: first.layer })))

      const second = recording({ agents: { lead: ["the answer was 7"], researcher: ["7"] } })
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        // The child's answer ends its turn; its result wakes the parent, whose resumed call waits for that child.
        const [question] = yield* sessions.callbacks(who, childId)
        yield* sessions.answerCallback(who, childId, { callbackId: question!.callbackId, result: { output: "seven" } })
        const end = yield* ended(sessionId, turnId)
        assert.strictEqual(end.output, "the answer was 7")
        assert.lengthOf((yield* sessions.children(who, sessionId)).items, 1)
        const log = yield* logOf(sessionId)
        assert.lengthOf(recordsOf(log, "child_spawned"), 1)
        const research = recordsOf(log, "operation_started").filter((s) => s.name === "research")
        assert.lengthOf(research, 1)
        const receipt = recordsOf(log, "operation_completed").filter((c) => c.operationId === research[0]!.operationId)
        assert.deepStrictEqual(receipt.map((c) => c.output), ["7"])
      }).pipe(Effect.provide(Troupe.layer(storeLayer, { model: second.layer })))
    }))
})
