/**
 * Handoffs end to end through `Sessions`: a `transfer_to_<name>` call moves
 * the turn to the target agent (its instructions, model name and tools, the
 * transcript going on), recorded as a `handoff`; only the first transfer of a
 * reply is taken; `maxHandoffs` bounds a turn; and a turn stopped after a
 * handoff resumes, on a fresh host over the same store, on the agent it was
 * handed to without handing off twice.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Handoffs from "../src/actors/Handoffs.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { eventually, logOf } from "./support/actors.js"
import { call, calls, ended, recording, recordsOf, start, toolMessages } from "./support/agentLoop.js"
import { failure, principal } from "./support/fixtures.js"

const lookup = Tool.make({
  name: "lookup",
  description: "Looks an order up.",
  parameters: Schema.Struct({ order: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "read", idempotency: "supported" },
  handler: ({ order }) => Effect.succeed(`order ${order}: paid`)
})

/** A client tool: the turn parks on its callback, so what came before is durable. */
const confirm = Tool.make({
  name: "confirm",
  description: "Asks the user to confirm.",
  parameters: Schema.Struct({}),
  success: Schema.String
})

const billing = new Agent({
  name: "billing",
  description: "Refunds and invoices.",
  instructions: "You are billing.",
  model: new ModelRef({ name: "billing-model" }),
  tools: [lookup.spec, confirm.spec]
})

const triage = new Agent({
  name: "triage",
  instructions: "You are triage.",
  model: new ModelRef({ name: "triage-model" }),
  handoffs: [billing]
})

const toolNames = (request: { readonly tools: ReadonlyArray<{ readonly name: string }> }) => request.tools.map((t) => t.name)

describe("handoffs", () => {
  it.effect("a transfer moves the turn to the target: its instructions, model and tools; the transcript goes on", () => {
    const model = recording({
      agents: {
        triage: [calls(call("t1", "transfer_to_billing", { reason: "a refund" }))],
        billing: [calls(call("b1", "lookup", { order: "42" })), "refunded order 42"]
      }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: triage })
      const turnId = yield* start(who, session.id, "I want my money back")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "completed")
      assert.strictEqual(end.output, "refunded order 42")

      const [first, second, third] = model.requests
      assert.lengthOf(model.requests, 3)
      assert.strictEqual(first!.agentName, "triage")
      assert.strictEqual(first!.model, "triage-model")
      assert.deepStrictEqual(toolNames(first!), ["transfer_to_billing"])
      assert.include(first!.tools[0]!.description, "Refunds and invoices.")
      assert.strictEqual(second!.agentName, "billing")
      assert.strictEqual(second!.instructions, "You are billing.")
      assert.strictEqual(second!.model, "billing-model")
      assert.deepStrictEqual(toolNames(second!), ["lookup", "confirm"])
      // The transcript goes on: the user's message, triage's transfer and its result.
      assert.deepStrictEqual(second!.messages[0], { role: "user", content: "I want my money back" })
      assert.deepStrictEqual(toolMessages(second!), [{ toolCallId: "t1", content: JSON.stringify({ assistant: "billing" }) }])
      assert.strictEqual(third!.agentName, "billing")
      // billing's own tool ran (its plan, not triage's, knows it).
      assert.deepStrictEqual(toolMessages(third!).at(-1), { toolCallId: "b1", content: "order 42: paid" })

      const log = yield* logOf(session.id)
      const handoffs = recordsOf(log, "handoff")
      assert.lengthOf(handoffs, 1)
      assert.strictEqual(handoffs[0]!.from, "triage")
      assert.strictEqual(handoffs[0]!.to, "billing")
      assert.strictEqual(handoffs[0]!.reason, "a refund")
      // The handoff record follows the transfer call's receipt.
      const completed = log.findIndex((r) => r.body._tag === "operation_completed" && r.body.operationId === handoffs[0]!.operationId)
      const handoff = log.findIndex((r) => r.body._tag === "handoff")
      assert.isTrue(completed >= 0 && completed < handoff)

      // The next turn starts on the session's agent again.
      const next = yield* start(who, session.id, "thanks")
      yield* ended(session.id, next)
      assert.strictEqual(model.requests[3]!.agentName, "triage")
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([lookup]) })))
  })

  it.effect("long agent names give transfer tools within 64 characters, unique and the same every time; a call of one hands off", () => {
    const stem = `refunds_and_invoices_for_enterprise_customers_in_the_region`
    const east = new Agent({ ...billing, name: `${stem}_east` })
    const west = new Agent({ ...billing, name: `${stem}_west` })
    const router = new Agent({ ...triage, name: "router", handoffs: [east, west, billing] })
    const [eastTool, westTool] = [Handoffs.toolName(east), Handoffs.toolName(west)]
    const model = recording({
      agents: {
        router: [calls(call("t1", westTool, { reason: "west" }))],
        [west.name]: ["refunded in the west"]
      }
    })
    return Effect.gen(function*() {
      assert.isAtMost(eastTool.length, 64)
      assert.isAtMost(westTool.length, 64)
      assert.notStrictEqual(eastTool, westTool)
      assert.match(westTool, /^transfer_to_refunds_and_invoices_for_enterprise_\w+_[0-9a-f]{8}$/)
      assert.strictEqual(westTool.length, 64)
      // A function of the name alone: a resumed turn (another process, another version) finds the same tool.
      assert.strictEqual(Handoffs.toolName(new Agent({ ...west })), westTool)
      assert.strictEqual(Handoffs.toolName(billing), "transfer_to_billing")
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: router })
      const end = yield* ended(session.id, yield* start(who, session.id, "refund"))
      assert.strictEqual(end.output, "refunded in the west")
      assert.deepStrictEqual(toolNames(model.requests[0]!), [eastTool, westTool, "transfer_to_billing"])
      assert.strictEqual(recordsOf(yield* logOf(session.id), "handoff")[0]!.to, west.name)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([lookup]) })))
  })

  it.effect("only the first transfer of a reply is taken; the reply's other calls run first", () => {
    const auditor = new Agent({ name: "auditor", instructions: "You audit.", model: new ModelRef({ name: "m" }) })
    const agent = new Agent({ ...triage, tools: [lookup.spec], handoffs: [billing, auditor] }, true)
    const model = recording({
      agents: {
        triage: [calls(call("t1", "transfer_to_auditor"), call("t2", "lookup", { order: "7" }), call("t3", "transfer_to_billing"))],
        auditor: ["audited"],
        billing: ["wrong agent"]
      }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent })
      const turnId = yield* start(who, session.id, "check order 7")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.output, "audited")
      const second = model.requests[1]!
      assert.strictEqual(second.agentName, "auditor")
      // Every call of the reply has its answer before the next model call, in the model's order of running.
      const answers = new Map(toolMessages(second).map((m) => [m.toolCallId, m.content]))
      assert.strictEqual(answers.get("t1"), JSON.stringify({ assistant: "auditor" }))
      assert.strictEqual(answers.get("t2"), "order 7: paid")
      assert.include(answers.get("t3")!, "ignored: only the first handoff of a reply is taken")
      const log = yield* logOf(session.id)
      assert.deepStrictEqual(recordsOf(log, "handoff").map((h) => h.to), ["auditor"])
      const started = recordsOf(log, "operation_started").filter((s) => s.kind === "tool").map((s) => s.name)
      assert.deepStrictEqual(started, ["lookup", "transfer_to_auditor", "transfer_to_billing"])
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([lookup]) })))
  })

  it.effect("maxHandoffs (default 10) bounds a turn: the handoff past it fails the turn with max_handoffs", () => {
    // A chain of 12 agents, each handing to the next.
    let chain = new Agent({ name: "a11", instructions: "Last.", model: new ModelRef({ name: "m" }) })
    for (let i = 10; i >= 0; i--) {
      chain = new Agent({ name: `a${i}`, instructions: `Agent ${i}.`, model: new ModelRef({ name: "m" }), handoffs: [chain] })
    }
    const agents: Record<string, ReadonlyArray<ReturnType<typeof calls>>> = {}
    for (let i = 0; i <= 10; i++) agents[`a${i}`] = [calls(call(`h${i}`, `transfer_to_a${i + 1}`))]
    const model = recording({ agents })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: chain })
      const turnId = yield* start(who, session.id, "go")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "failed")
      assert.strictEqual(end.failureCode, "max_handoffs")
      assert.deepStrictEqual(end.failure, { _tag: "MaxHandoffs", maxHandoffs: 10, agentName: "a10" })
      const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
      assert.strictEqual(error.failureCode, "max_handoffs")
      assert.lengthOf(recordsOf(yield* logOf(session.id), "handoff"), 10)
      assert.strictEqual(model.requests.at(-1)!.agentName, "a10")
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("maxHandoffs is the turn's first agent's: 0 allows none", () => {
    const agent = new Agent({ ...triage, maxHandoffs: 0 }, true)
    const model = recording({ agents: { triage: [calls(call("t1", "transfer_to_billing"))] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent })
      const turnId = yield* start(who, session.id, "go")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.failureCode, "max_handoffs")
      assert.lengthOf(recordsOf(yield* logOf(session.id), "handoff"), 0)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("a turn stopped after a handoff resumes on a fresh host on the agent it was handed to, without handing off again", () =>
    Effect.gen(function*() {
      const store = yield* MemorySessionStore.make
      const storeLayer = Layer.succeed(SessionStore, store)
      const who = principal()
      const first = recording({
        agents: { triage: [calls(call("t1", "transfer_to_billing"))], billing: [calls(call("b1", "confirm"))] }
      })
      // Host 1: triage hands off, billing asks the client to confirm; the host goes away while the turn waits.
      const { sessionId, turnId } = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const session = yield* sessions.create(who, { agent: triage })
        const turnId = yield* start(who, session.id, "refund please")
        yield* eventually(Effect.map(sessions.callbacks(who, session.id), (open) => open.length === 1), "the confirm callback")
        return { sessionId: session.id, turnId }
      }).pipe(Effect.provide(Troupe.layer(storeLayer, { model: first.layer })))
      assert.deepStrictEqual(first.requests.map((r) => r.agentName), ["triage", "billing"])
      assert.lengthOf(recordsOf(yield* logOf(sessionId).pipe(Effect.provideService(SessionStore, store)), "handoff"), 1)

      // Host 2: the answer resumes the turn; billing's next reply ends it.
      const second = recording({ agents: { triage: ["triage must not be asked again"], billing: ["refund confirmed"] } })
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const [pending] = yield* sessions.callbacks(who, sessionId)
        yield* sessions.answerCallback(who, sessionId, { callbackId: pending!.callbackId, result: { output: "yes" } })
        const end = yield* ended(sessionId, turnId)
        assert.strictEqual(end.outcome, "completed")
        assert.strictEqual(end.output, "refund confirmed")
        assert.lengthOf(second.requests, 1)
        const request = second.requests[0]!
        assert.strictEqual(request.agentName, "billing")
        assert.strictEqual(request.instructions, "You are billing.")
        assert.deepStrictEqual(toolMessages(request), [
          { toolCallId: "t1", content: JSON.stringify({ assistant: "billing" }) },
          { toolCallId: "b1", content: "yes" }
        ])
        const log = yield* logOf(sessionId)
        assert.lengthOf(recordsOf(log, "handoff"), 1)
      }).pipe(Effect.provide(Troupe.layer(storeLayer, { model: second.layer })))
    }))
})
