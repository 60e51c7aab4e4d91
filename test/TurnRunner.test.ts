/**
 * The agent loop end to end through `Sessions`: tool calls, completion,
 * permissions, client tools, budgets, model settings, and interrupting a turn
 * parked on a callback. The log (`SessionStore.readLog`) and `awaitTurn` are
 * the observable truth; a recording model shows what the model was sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Queue, Ref, Schema, TestClock } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import { Agent, ModelRef, ModelSettings, PermissionPolicy } from "../src/schema/Agent.js"
import { type BudgetDimension, Budgets } from "../src/schema/Budget.js"
import type { PendingCallback } from "../src/schema/Callback.js"
import type { SessionId, TurnId } from "../src/schema/Ids.js"
import type { Principal } from "../src/schema/Principal.js"
import type { LogRecord, OperationCompleted, OperationStarted, TurnEnded } from "../src/schema/Record.js"
import * as CostMeter from "../src/services/CostMeter.js"
import * as Model from "../src/services/Model.js"
import { Sessions, type SendOptions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { endsOfTurn, eventually, gatedModel, logOf } from "./support/actors.js"
import { failure, principal } from "./support/fixtures.js"
import { call, calls, recording } from "./support/agentLoop.js"

// ---------------------------------------------------------------------------
// Tools

const shout = Tool.make({
  name: "shout",
  description: "Upper-cases a text.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ text }) => Effect.succeed(text.toUpperCase())
})

const add = Tool.make({
  name: "add",
  description: "Adds two numbers.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  success: Schema.Struct({ sum: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed({ sum: a + b })
})

/** Counts its runs in `calls`. */
const counter = (calls: Ref.Ref<number>) =>
  Tool.make({
    name: "count",
    description: "Counts.",
    parameters: Schema.Struct({}),
    success: Schema.Number,
    handler: () => Ref.updateAndGet(calls, (n) => n + 1)
  })

/** Appends its argument to `seen`, so the order of runs shows. */
const noter = (seen: Ref.Ref<ReadonlyArray<string>>) =>
  Tool.make({
    name: "note",
    description: "Notes a word.",
    parameters: Schema.Struct({ word: Schema.String }),
    success: Schema.String,
    handler: ({ word }) => Effect.as(Ref.update(seen, (all) => [...all, word]), `noted ${word}`)
  })

const failsWithString = Tool.make({
  name: "grumpy",
  description: "Always fails.",
  parameters: Schema.Struct({}),
  success: Schema.String,
  handler: () => Effect.fail("not today")
})

const failsWithError = Tool.make({
  name: "broken",
  description: "Always fails with an Error.",
  parameters: Schema.Struct({}),
  success: Schema.String,
  handler: () => Effect.fail(new Error("the disk is full"))
})

const crashy = Tool.make({
  name: "crashy",
  description: "Dies.",
  parameters: Schema.Struct({}),
  success: Schema.String,
  handler: () => Effect.die(new Error("kaput"))
})

/** Sleeps `millis` of (test) clock time, then answers. */
const slow = (millis: number) =>
  Tool.make({
    name: "slow",
    description: "Takes its time.",
    parameters: Schema.Struct({}),
    success: Schema.String,
    handler: () => Effect.as(Effect.sleep(millis), "slept")
  })

/** A client tool: no handler, the client runs it. */
const locate = Tool.make({
  name: "locate",
  description: "Where the user is.",
  parameters: Schema.Struct({ precise: Schema.Boolean }),
  success: Schema.Struct({ lat: Schema.Number })
})

// ---------------------------------------------------------------------------
// Helpers

const INSTRUCTIONS = "Work." // 5 characters: part of every prompt's input tokens

const agentWith = (fields: Partial<ConstructorParameters<typeof Agent>[0]> = {}) =>
  new Agent({
    name: "worker",
    instructions: INSTRUCTIONS,
    model: new ModelRef({ name: "scripted" }),
    tools: [shout.spec],
    ...fields
  })

const runtime = (scripts: ScriptedModel.Scripts) => Troupe.layerTest({ scripts, tools: Toolkit.layer([shout]) })


const finishCall = (id: string, output: string) => call(id, "finish", { output })

/** Long host leases and idle timeouts: tests that move the TestClock far do not race lease renewals. */
const patientHost = { leaseTtl: "1 day", idleTimeout: "1 day" } as const

const tags = (log: ReadonlyArray<LogRecord>) => log.map((r) => r.body._tag)

/** The tool calls of a log in order, each with its completion (if any). */
const toolCallsOf = (log: ReadonlyArray<LogRecord>) => {
  const completions = new Map<string, { readonly body: OperationCompleted; readonly seq: number }>()
  for (const record of log) {
    if (record.body._tag === "operation_completed") {
      completions.set(record.body.operationId, { body: record.body, seq: record.seq })
    }
  }
  const out: Array<{
    readonly started: OperationStarted
    readonly startedSeq: number
    readonly completed: OperationCompleted | undefined
    readonly completedSeq: number | undefined
  }> = []
  for (const record of log) {
    if (record.body._tag === "operation_started" && record.body.kind === "tool") {
      const completion = completions.get(record.body.operationId)
      out.push({
        started: record.body,
        startedSeq: record.seq,
        completed: completion?.body,
        completedSeq: completion?.seq
      })
    }
  }
  return out
}

/** The model calls of a log (started records). */
const modelCallsOf = (log: ReadonlyArray<LogRecord>) =>
  log.flatMap((r) => (r.body._tag === "operation_started" && r.body.kind === "model" ? [r.body] : []))

/** `[name, output, isError]` of each tool call of a log. */
const toolOutcomes = (log: ReadonlyArray<LogRecord>) =>
  toolCallsOf(log).map((c) => [c.started.name, c.completed?.output, c.completed?.isError] as const)

/** The tool messages of a model request. */
const toolMessages = (request: Model.Request) =>
  request.messages.flatMap((m) => (m.role === "tool" ? [{ toolCallId: m.toolCallId, content: m.content }] : []))

const toolNames = (request: Model.Request) => request.tools.map((t) => t.name)

/** Sends a message that must start a turn; returns the turn id. */
const start = (who: Principal, sessionId: SessionId, text: string, run?: SendOptions["run"]) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const accepted = yield* sessions.send(who, sessionId, { text, ...(run === undefined ? {} : { run }) })
    assert.strictEqual(accepted.disposition, "started")
    return accepted.turnId!
  })

/**
 * Waits (a bounded number of scheduler turns, no clock) until the turn's
 * `turn_ended` is in the log, and returns it: a turn that hangs fails the test
 * at once instead of at the suite timeout.
 */
const ended = (sessionId: SessionId, turnId: TurnId) =>
  Effect.gen(function*() {
    yield* eventually(
      Effect.map(logOf(sessionId), (log) => endsOfTurn(log, turnId).length > 0),
      `turn ${turnId} to end`
    )
    const ends = endsOfTurn(yield* logOf(sessionId), turnId)
    assert.lengthOf(ends, 1)
    return ends[0]!
  })

/** Waits until the session has `count` open callbacks and returns them. */
const openCallbacks = (who: Principal, sessionId: SessionId, count = 1) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    yield* eventually(
      Effect.map(sessions.callbacks(who, sessionId), (open) => open.length >= count),
      `${count} open callback(s)`
    )
    const open = yield* sessions.callbacks(who, sessionId)
    assert.lengthOf(open, count)
    return open
  })

/** Waits until the log holds `count` completed model calls (the turn got that far). */
const modelRepliesRecorded = (sessionId: SessionId, count: number) =>
  eventually(
    Effect.map(logOf(sessionId), (log) => {
      const models = new Set(modelCallsOf(log).map((s) => s.operationId))
      return log.filter((r) => r.body._tag === "operation_completed" && models.has(r.body.operationId)).length >=
        count
    }),
    `${count} model replies in the log`
  )

/** Lets other fibers run a little (no clock moves). */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
})

/** Expects the turn to have failed on a budget: checks awaitTurn's error and the turn_ended record. */
const expectExhausted = (
  who: Principal,
  sessionId: SessionId,
  turnId: TurnId,
  expected: {
    readonly dimension: BudgetDimension
    readonly limit: number
    readonly observed: number
    readonly toolName?: string
  }
) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const end = yield* ended(sessionId, turnId)
    const error = yield* failure(sessions.awaitTurn(who, sessionId, turnId), "BudgetExhausted")
    assert.strictEqual(error.sessionId, sessionId)
    assert.strictEqual(error.turnId, turnId)
    assert.strictEqual(error.dimension, expected.dimension)
    assert.strictEqual(error.limit, expected.limit)
    assert.strictEqual(error.observed, expected.observed)
    assert.strictEqual(error.toolName, expected.toolName)
    assert.strictEqual(end.outcome, "failed")
    assert.strictEqual(end.failureCode, "budget_exhausted")
    assert.deepStrictEqual(end.failure, { _tag: "BudgetExhausted", ...expected })
    return end
  })

const usageOf = (end: TurnEnded) => ({ ...end.usage, toolCallsByName: { ...end.usage.toolCallsByName } })

// ---------------------------------------------------------------------------

describe("agent loop", () => {
  describe("tools", () => {
    it.effect("a tool call runs as an operation and its result reaches the model", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith() })
        const accepted = yield* sessions.send(who, session.id, { text: "go" })
        const result = yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
        assert.strictEqual(result.output, "done")
        assert.strictEqual(result.usage.toolCalls, 1)
        assert.strictEqual(result.usage.modelCalls, 2)
        const log = yield* logOf(session.id)
        assert.deepStrictEqual(tags(log), [
          "session_created",
          "turn_started",
          "operation_started",
          "operation_completed",
          "operation_started",
          "operation_completed",
          "operation_started",
          "operation_completed",
          "turn_ended"
        ])
        const toolDone = log[5]!.body
        assert.strictEqual(toolDone._tag, "operation_completed")
        if (toolDone._tag === "operation_completed") assert.strictEqual(toolDone.output, "HI")
      }).pipe(Effect.provide(runtime({
        agents: {
          worker: [
            { toolCalls: [{ id: "c1", name: "shout", arguments: "{\"text\":\"hi\"}" }] },
            "done"
          ]
        }
      }))))

    it.effect("the next model request carries the assistant's tool calls and the tool results, encoded", () => {
      const model = recording({
        agents: { worker: [calls(call("c1", "shout", { text: "hi" }), call("c2", "add", { a: 2, b: 3 })), "done"] }
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ tools: [shout.spec, add.spec] }) })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "done")
        assert.lengthOf(model.requests, 2)
        const [first, second] = model.requests
        assert.deepStrictEqual(first!.messages, [{ role: "user", content: "go" }])
        assert.deepStrictEqual(second!.messages, [
          { role: "user", content: "go" },
          {
            role: "assistant",
            content: "",
            toolCalls: [call("c1", "shout", { text: "hi" }), call("c2", "add", { a: 2, b: 3 })]
          },
          { role: "tool", toolCallId: "c1", content: "HI" },
          { role: "tool", toolCallId: "c2", content: "{\"sum\":5}" }
        ])
        assert.strictEqual(second!.turnId, turnId)
        assert.strictEqual(second!.sessionId, session.id)
        const log = yield* logOf(session.id)
        assert.deepStrictEqual(toolOutcomes(log), [["shout", "HI", false], ["add", { sum: 5 }, false]])
        const [shoutCall] = toolCallsOf(log)
        const input = shoutCall!.started.input as { callId: string; arguments: string }
        assert.strictEqual(input.callId, "c1")
        assert.strictEqual(input.arguments, "{\"text\":\"hi\"}")
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout, add]) })))
    })

    it.effect("arguments that are not JSON are a tool error the model sees; the turn still completes", () => {
      const model = recording({ agents: { worker: [calls(call("c1", "shout", "{text: hi")), "sorry"] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith() })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "sorry")
        const error = { error: "the arguments of shout are not valid JSON" }
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["shout", error, true]])
        assert.deepStrictEqual(toolMessages(model.requests[1]!), [{ toolCallId: "c1", content: JSON.stringify(error) }])
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("arguments that do not match the parameters are a tool error; the handler does not run", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make<ReadonlyArray<string>>([])
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentWith({ tools: [noter(runs).spec] }) })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "sorry")
          const outcomes = toolOutcomes(yield* logOf(session.id))
          assert.lengthOf(outcomes, 1)
          const [name, output, isError] = outcomes[0]!
          assert.strictEqual(name, "note")
          assert.isTrue(isError)
          const message = (output as { error: string }).error
          assert.isTrue(message.startsWith("invalid arguments for note: "), message)
          assert.include(message, "word")
          assert.deepStrictEqual(yield* Ref.get(runs), [])
        }).pipe(Effect.provide(Troupe.layerTest({
          scripts: { agents: { worker: [calls(call("c1", "note", { word: 5 })), "sorry"] } },
          tools: Toolkit.layer([noter(runs)])
        })))
      }))

    it.effect("a handler's failure is a tool error carrying its message", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({ tools: [failsWithString.spec, failsWithError.spec] })
        })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "oh well")
        assert.strictEqual(result.usage.toolCalls, 2)
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
          ["grumpy", { error: "not today" }, true],
          ["broken", { error: "the disk is full" }, true]
        ])
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "grumpy"), call("c2", "broken")), "oh well"] } },
        tools: Toolkit.layer([failsWithString, failsWithError])
      }))))

    it.effect("a handler's defect is the tool error \"crashed\"; the actor survives and the next turn works", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ tools: [crashy.spec] }) })
        const first = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, first)
        assert.strictEqual(result.output, "it crashed")
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
          ["crashy", { error: "the tool crashy crashed" }, true]
        ])
        const second = yield* start(who, session.id, "again")
        assert.strictEqual((yield* sessions.awaitTurn(who, session.id, second)).output, "second turn")
        assert.strictEqual((yield* sessions.get(who, session.id)).status, "idle")
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "crashy")), "it crashed", "second turn"] } },
        tools: Toolkit.layer([crashy])
      }))))

    it.effect("a tool the agent does not declare is the error \"unknown tool\", even when the toolkit has it", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentWith() })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "ok")
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["nope", { error: "unknown tool: nope" }, true],
            ["count", { error: "unknown tool: count" }, true]
          ])
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(Effect.provide(Troupe.layerTest({
          scripts: { agents: { worker: [calls(call("c1", "nope"), call("c2", "count")), "ok"] } },
          tools: Toolkit.layer([shout, counter(runs)])
        })))
      }))

    it.effect("a server tool the agent declares but this host has no handler for is the error \"no handler\"", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentWith({ tools: [shout.spec, counter(runs).spec] }) })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "ok")
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["count", { error: "no handler for the tool count on this host" }, true],
            ["shout", "X", false]
          ])
        }).pipe(Effect.provide(Troupe.layerTest({
          scripts: { agents: { worker: [calls(call("c1", "count"), call("c2", "shout", { text: "x" })), "ok"] } },
          tools: Toolkit.layer([shout])
        })))
      }))

    it.effect("several tool calls of one reply run one after another, in the model's order", () =>
      Effect.gen(function*() {
        const seen = yield* Ref.make<ReadonlyArray<string>>([])
        const model = recording({
          agents: {
            worker: [
              calls(call("c1", "note", { word: "alpha" }), call("c2", "note", { word: "beta" }), call("c3", "note", { word: "gamma" })),
              "noted"
            ]
          }
        })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentWith({ tools: [noter(seen).spec] }) })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "noted")
          assert.deepStrictEqual(yield* Ref.get(seen), ["alpha", "beta", "gamma"])
          const toolCalls = toolCallsOf(yield* logOf(session.id))
          assert.deepStrictEqual(toolCalls.map((c) => (c.started.input as { callId: string }).callId), ["c1", "c2", "c3"])
          // Each call is completed before the next one starts.
          for (let i = 0; i < toolCalls.length; i++) {
            assert.isTrue(toolCalls[i]!.completedSeq! > toolCalls[i]!.startedSeq)
            if (i > 0) assert.isTrue(toolCalls[i]!.startedSeq > toolCalls[i - 1]!.completedSeq!)
          }
          assert.deepStrictEqual(toolMessages(model.requests[1]!), [
            { toolCallId: "c1", content: "noted alpha" },
            { toolCallId: "c2", content: "noted beta" },
            { toolCallId: "c3", content: "noted gamma" }
          ])
          assert.deepStrictEqual(result.usage.toolCallsByName, { note: 3 })
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([noter(seen)]) })))
      }))
  })

  describe("completion", () => {
    it.effect("noToolPolicy finish (the default): a reply without tool calls ends the turn with its text; no finish tool is offered", () => {
      const model = recording({ agents: { worker: ["all good here"] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const agent = agentWith()
        assert.strictEqual(agent.noToolPolicy, "finish")
        const session = yield* sessions.create(who, { agent })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "all good here")
        assert.strictEqual(result.publicFinalMessage, "all good here")
        assert.lengthOf(model.requests, 1)
        assert.deepStrictEqual(toolNames(model.requests[0]!), ["shout"])
        const end = yield* ended(session.id, turnId)
        assert.strictEqual(end.outcome, "completed")
        assert.strictEqual(end.output, "all good here")
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("noToolPolicy continue: the model is called again until it calls finish, whose output is the turn's", () => {
      const model = recording({
        agents: { worker: ["thinking", "still thinking", calls(finishCall("f1", "the answer is 42"))] }
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ noToolPolicy: "continue" }) })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "the answer is 42")
        assert.strictEqual(result.publicFinalMessage, "the answer is 42")
        assert.strictEqual(result.usage.modelCalls, 3)
        assert.lengthOf(model.requests, 3)
        for (const request of model.requests) assert.deepStrictEqual(toolNames(request), ["shout", "finish"])
        const finish = model.requests[0]!.tools.find((t) => t.name === "finish")!
        assert.deepStrictEqual((finish.parameters as { required?: unknown }).required, ["output"])
        // Each reply without tool calls is part of what the model sees next.
        assert.deepStrictEqual(model.requests[2]!.messages, [
          { role: "user", content: "go" },
          { role: "assistant", content: "thinking", toolCalls: undefined },
          { role: "assistant", content: "still thinking", toolCalls: undefined }
        ])
        const log = yield* logOf(session.id)
        assert.lengthOf(modelCallsOf(log), 3)
        // The built-in finish is not a tool operation.
        assert.lengthOf(toolCallsOf(log), 0)
        assert.strictEqual(result.usage.toolCalls, 0)
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("noToolPolicy continue: maxCycles bounds the model calls and the turn fails with max_cycles", () => {
      const model = recording({ agents: { worker: ["hmm"] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ noToolPolicy: "continue", maxCycles: 3 }) })
        const turnId = yield* start(who, session.id, "go")
        const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
        assert.strictEqual(error.failureCode, "max_cycles")
        assert.deepStrictEqual(error.failure, { _tag: "MaxCycles", maxCycles: 3 })
        assert.strictEqual(error.usage.modelCalls, 3)
        assert.lengthOf(model.requests, 3)
        const end = yield* ended(session.id, turnId)
        assert.strictEqual(end.outcome, "failed")
        assert.strictEqual(end.failureCode, "max_cycles")
        assert.strictEqual((yield* sessions.get(who, session.id)).status, "idle")
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("maxCycles also bounds a model that keeps calling tools", () => {
      const model = recording({ agents: { worker: [calls(call("c", "shout", { text: "again" }))] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ maxCycles: 2 }) })
        const turnId = yield* start(who, session.id, "go")
        const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
        assert.strictEqual(error.failureCode, "max_cycles")
        assert.strictEqual(error.usage.modelCalls, 2)
        assert.strictEqual(error.usage.toolCalls, 2)
        assert.lengthOf(model.requests, 2)
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("noToolPolicy wait_user: the turn parks until the user sends something, which goes into it", () => {
      const model = recording({ agents: { worker: ["Which city?", calls(finishCall("f1", "Sunny in Paris"))] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ noToolPolicy: "wait_user" }) })
        const turnId = yield* start(who, session.id, "weather?")
        yield* modelRepliesRecorded(session.id, 1)
        yield* settle
        // Parked: still the active turn, not ended, the model not called again.
        const parked = yield* sessions.get(who, session.id)
        assert.strictEqual(parked.status, "running")
        assert.strictEqual(parked.activeTurnId, turnId)
        assert.lengthOf(endsOfTurn(yield* logOf(session.id), turnId), 0)
        assert.lengthOf(model.requests, 1)
        assert.deepStrictEqual(toolNames(model.requests[0]!), ["shout", "finish"])

        const answer = yield* sessions.send(who, session.id, { text: "Paris" })
        assert.strictEqual(answer.disposition, "steered")
        assert.strictEqual(answer.turnId, turnId)
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "Sunny in Paris")
        assert.lengthOf(model.requests, 2)
        assert.deepStrictEqual(model.requests[1]!.messages, [
          { role: "user", content: "weather?" },
          { role: "assistant", content: "Which city?", toolCalls: undefined },
          { role: "user", content: "Paris" }
        ])
        const log = yield* logOf(session.id)
        const steer = log.find((r) => r.body._tag === "input_applied" && r.body.kind === "steer")
        assert.isDefined(steer)
        if (steer?.body._tag === "input_applied") {
          assert.strictEqual(steer.body.turnId, turnId)
          assert.deepStrictEqual(steer.body.detail, { text: "Paris" })
        }
        // One turn only: the message did not start another.
        assert.lengthOf(log.filter((r) => r.body._tag === "turn_started"), 1)
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("noToolPolicy wait_user: a steer goes into the waiting turn too", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ noToolPolicy: "wait_user" }) })
        const turnId = yield* start(who, session.id, "weather?")
        yield* modelRepliesRecorded(session.id, 1)
        yield* settle
        const steered = yield* sessions.send(who, session.id, { text: "Rome", mode: "steer" })
        assert.strictEqual(steered.disposition, "steered")
        assert.strictEqual(steered.turnId, turnId)
        assert.strictEqual((yield* sessions.awaitTurn(who, session.id, turnId)).output, "Rainy in Rome")
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: ["Which city?", calls(finishCall("f1", "Rainy in Rome"))] } }
      }))))

    it.effect("noToolPolicy wait_user: a message queued while the turn ran is its answer once it waits", () =>
      Effect.gen(function*() {
        // Only the first model call is held; later ones answer "You said: <last user text>" at once.
        const model = yield* gatedModel((request) => request.messages.length === 1)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentWith({ noToolPolicy: "wait_user" }) })
          const turnId = yield* start(who, session.id, "weather?")
          const first = yield* Queue.take(model.held)
          const queued = yield* sessions.send(who, session.id, { text: "Oslo" })
          assert.strictEqual(queued.disposition, "queued")
          yield* first.release("Which city?")
          yield* eventually(
            Effect.map(Ref.get(model.requests), (requests) => requests.length === 2),
            "the model to be called with the queued message"
          )
          const [, second] = yield* Ref.get(model.requests)
          assert.deepStrictEqual(second!.messages, [
            { role: "user", content: "weather?" },
            { role: "assistant", content: "Which city?", toolCalls: undefined },
            { role: "user", content: "Oslo" }
          ])
          const log = yield* logOf(session.id)
          assert.lengthOf(log.filter((r) => r.body._tag === "turn_started"), 1)
          const steer = log.find((r) => r.body._tag === "input_applied" && r.body.kind === "steer")
          assert.isDefined(steer)
          if (steer?.body._tag === "input_applied") assert.strictEqual(steer.body.turnId, turnId)
          assert.strictEqual((yield* sessions.interrupt(who, session.id, turnId)).outcome, "interrupted")
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
      }))

    it.effect("the other tool calls of a reply that calls finish run before the turn ends", () => {
      const model = recording({
        agents: {
          worker: [{ text: "wrapping up", toolCalls: [finishCall("f1", "bye"), call("c2", "shout", { text: "last" })] }]
        }
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ noToolPolicy: "continue" }) })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "bye")
        assert.strictEqual(result.usage.toolCalls, 1)
        assert.lengthOf(model.requests, 1)
        const log = yield* logOf(session.id)
        assert.deepStrictEqual(tags(log), [
          "session_created",
          "turn_started",
          "operation_started",
          "operation_completed",
          "operation_started",
          "operation_completed",
          "turn_ended"
        ])
        assert.deepStrictEqual(toolOutcomes(log), [["shout", "LAST", false]])
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })

    it.effect("an agent that declares its own finish tool gets its own: it runs as a tool and ends nothing", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const ownFinish = Tool.make({
          name: "finish",
          description: "The agent's own finish.",
          parameters: Schema.Struct({ output: Schema.String }),
          success: Schema.String,
          handler: () => Effect.as(Ref.update(runs, (n) => n + 1), "recorded")
        })
        const model = recording({ agents: { worker: [calls(finishCall("f1", "bye"))] } })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ tools: [ownFinish.spec], noToolPolicy: "continue", maxCycles: 2 })
          })
          const turnId = yield* start(who, session.id, "go")
          const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
          assert.strictEqual(error.failureCode, "max_cycles")
          assert.strictEqual(yield* Ref.get(runs), 2)
          assert.deepStrictEqual(model.requests[0]!.tools.map((t) => [t.name, t.description]), [
            ["finish", "The agent's own finish."]
          ])
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([ownFinish]) })))
      }))
  })

  describe("permissions", () => {
    const countingRuntime = (runs: Ref.Ref<number>, script: ReadonlyArray<ScriptedModel.ScriptedReply>) =>
      Troupe.layerTest({ scripts: { agents: { worker: script } }, tools: Toolkit.layer([shout, counter(runs)]) })

    const countAgent = (runs: Ref.Ref<number>, permissions: PermissionPolicy) =>
      agentWith({ tools: [shout.spec, counter(runs).spec], permissions })

    const notAllowed = (tool: string, layer: string, rule: string) => ({
      error: `tool_not_allowed: ${tool} is denied by the ${layer} policy (${rule})`,
      code: "tool_not_allowed",
      layer,
      rule
    })

    it.effect("deny: the call is recorded as the tool error tool_not_allowed and never runs", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ rules: { count: "deny" } }))
          })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "ok")
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["count", notAllowed("count", "agent", "name"), true],
            ["shout", "Y", false]
          ])
          assert.strictEqual(yield* Ref.get(runs), 0)
          // A refused call counts as a call.
          assert.deepStrictEqual(result.usage.toolCallsByName, { count: 1, shout: 1 })
        }).pipe(Effect.provide(countingRuntime(runs, [calls(call("c1", "count"), call("c2", "shout", { text: "y" })), "ok"])))
      }))

    it.effect("default deny applies to tools no rule names; a rule allows its tool", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ default: "deny", rules: { shout: "allow" } }))
          })
          const turnId = yield* start(who, session.id, "go")
          yield* sessions.awaitTurn(who, session.id, turnId)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["count", notAllowed("count", "agent", "default"), true],
            ["shout", "Y", false]
          ])
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(Effect.provide(countingRuntime(runs, [calls(call("c1", "count"), call("c2", "shout", { text: "y" })), "ok"])))
      }))

    // Deliberately changed with decision 0017: a run's `allow` used to lift the agent's `deny` here.
    it.effect("a run's allow cannot lift the agent's deny; a run's deny binds that turn only", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ rules: { count: "deny" } }))
          })
          const first = yield* start(who, session.id, "go", { permissions: { default: "allow", rules: { count: "allow" } } })
          yield* sessions.awaitTurn(who, session.id, first)
          assert.strictEqual(yield* Ref.get(runs), 0)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["count", notAllowed("count", "agent", "name"), true]])
          // A run adds a denial of its own (shout), for its turn only.
          const second = yield* start(who, session.id, "again", { permissions: { rules: { shout: "deny" } } })
          yield* sessions.awaitTurn(who, session.id, second)
          const third = yield* start(who, session.id, "once more")
          yield* sessions.awaitTurn(who, session.id, third)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)).slice(1), [
            ["shout", notAllowed("shout", "run", "name"), true],
            ["shout", "Y", false]
          ])
        }).pipe(Effect.provide(countingRuntime(runs, [
          calls(call("c1", "count")),
          "ok",
          calls(call("c2", "shout", { text: "y" })),
          "ok",
          calls(call("c3", "shout", { text: "y" })),
          "ok"
        ])))
      }))

    it.effect("layers add up: the strictest of the agent's and the run's wins, by rule or by default", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          // The agent denies count by rule and allows by default; the run allows by default and denies shout by rule.
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ default: "allow", rules: { count: "deny" } }))
          })
          const turnId = yield* start(who, session.id, "go", { permissions: { default: "allow", rules: { shout: "deny" } } })
          yield* sessions.awaitTurn(who, session.id, turnId)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["count", notAllowed("count", "agent", "name"), true],
            ["shout", notAllowed("shout", "run", "name"), true]
          ])
          // A run's default deny binds tools the agent allows by default.
          const other = yield* sessions.create(who, { agent: countAgent(runs, new PermissionPolicy({})) })
          const denied = yield* start(who, other.id, "go", { permissions: { default: "deny" } })
          yield* sessions.awaitTurn(who, other.id, denied)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(other.id)), [
            ["count", notAllowed("count", "run", "default"), true],
            ["shout", notAllowed("shout", "run", "default"), true]
          ])
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(Effect.provide(countingRuntime(runs, [calls(call("c1", "count"), call("c2", "shout", { text: "y" })), "ok"])))
      }))

    it.effect("ask opens an approval callback; the session waits; approve runs the tool", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ rules: { count: "ask" } }))
          })
          const turnId = yield* start(who, session.id, "go")
          const [pending] = yield* openCallbacks(who, session.id)
          assert.strictEqual(pending!.kind, "approval")
          assert.strictEqual(pending!.sessionId, session.id)
          assert.strictEqual(pending!.turnId, turnId)
          assert.isNull(pending!.parentSessionId)
          assert.deepStrictEqual(pending!.agentPath, ["worker"])
          assert.strictEqual(pending!.request._tag, "approval")
          assert.strictEqual(pending!.request.toolName, "count")
          assert.strictEqual(pending!.request.callId, "c1")
          assert.strictEqual(pending!.request.arguments, "{\"why\":\"because\"}")
          const waiting = yield* sessions.get(who, session.id)
          assert.strictEqual(waiting.status, "waiting")
          assert.strictEqual(waiting.activeTurnId, turnId)
          assert.strictEqual((yield* sessions.snapshot(who, session.id)).openCallbacks, 1)
          yield* settle
          assert.strictEqual(yield* Ref.get(runs), 0, "the tool ran before it was approved")
          // The tool call's start and the callback are one commit; the callback names the operation.
          const before = yield* logOf(session.id)
          const [started] = toolCallsOf(before)
          assert.strictEqual(started!.completed, undefined)
          assert.strictEqual(pending!.operationId, started!.started.operationId)
          const opened = before.find((r) => r.body._tag === "callback_opened")!
          assert.strictEqual(opened.commitId, before.find((r) => r.seq === started!.startedSeq)!.commitId)

          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { decision: "approve" } })
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "ok")
          assert.strictEqual(yield* Ref.get(runs), 1)
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(toolOutcomes(log), [["count", 1, false]])
          const resolved = log.find((r) => r.body._tag === "callback_resolved")
          assert.isDefined(resolved)
          if (resolved?.body._tag === "callback_resolved") {
            assert.strictEqual(resolved.body.callbackId, pending!.callbackId)
            assert.strictEqual(resolved.body.resolution, "answered")
            assert.deepStrictEqual(resolved.body.result, { decision: "approve" })
          }
          assert.lengthOf(yield* sessions.callbacks(who, session.id), 0)
          assert.strictEqual((yield* sessions.get(who, session.id)).status, "idle")
        }).pipe(Effect.provide(countingRuntime(runs, [calls(call("c1", "count", { why: "because" })), "ok"])))
      }))

    it.effect("ask answered deny: the tool error \"denied by the user: <reason>\"; the tool never runs", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const model = recording({ agents: { worker: [calls(call("c1", "count")), "understood", calls(call("c2", "count")), "fine"] } })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ rules: { count: "ask" } }))
          })
          const turnId = yield* start(who, session.id, "go")
          const [pending] = yield* openCallbacks(who, session.id)
          yield* sessions.answerCallback(who, session.id, {
            callbackId: pending!.callbackId,
            result: { decision: "deny", reason: "too risky" }
          })
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "understood")
          assert.strictEqual(yield* Ref.get(runs), 0)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["count", { error: "denied by the user: too risky" }, true]
          ])
          assert.deepStrictEqual(toolMessages(model.requests[1]!), [
            { toolCallId: "c1", content: JSON.stringify({ error: "denied by the user: too risky" }) }
          ])
          // Without a reason: just "denied by the user"; and a denial is not remembered.
          const second = yield* start(who, session.id, "again")
          const [again] = yield* openCallbacks(who, session.id)
          yield* sessions.answerCallback(who, session.id, { callbackId: again!.callbackId, result: { decision: "deny" } })
          yield* sessions.awaitTurn(who, session.id, second)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)).at(-1), [
            "count",
            { error: "denied by the user" },
            true
          ])
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout, counter(runs)]) })))
      }))

    it.effect("approve_session: later calls of that tool in the session (next turn too) open no callback", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const agent = countAgent(runs, new PermissionPolicy({ rules: { count: "ask", shout: "ask" } }))
          const session = yield* sessions.create(who, { agent })
          const first = yield* start(who, session.id, "go")
          const [pending] = yield* openCallbacks(who, session.id)
          yield* sessions.answerCallback(who, session.id, {
            callbackId: pending!.callbackId,
            result: { decision: "approve_session" }
          })
          // The second count call of the same reply is not asked about.
          yield* ended(session.id, first)
          assert.strictEqual((yield* sessions.awaitTurn(who, session.id, first)).output, "ok")
          assert.strictEqual(yield* Ref.get(runs), 2)

          const second = yield* start(who, session.id, "again")
          const end = yield* ended(session.id, second)
          assert.strictEqual(end.outcome, "completed")
          assert.strictEqual(yield* Ref.get(runs), 3)
          const log = yield* logOf(session.id)
          assert.lengthOf(log.filter((r) => r.body._tag === "callback_opened"), 1)
          assert.deepStrictEqual(toolOutcomes(log), [["count", 1, false], ["count", 2, false], ["count", 3, false]])

          // Another tool is still asked about…
          const third = yield* start(who, session.id, "shout please")
          const [shoutAsk] = yield* openCallbacks(who, session.id)
          assert.strictEqual(shoutAsk!.request.toolName, "shout")
          yield* sessions.answerCallback(who, session.id, { callbackId: shoutAsk!.callbackId, result: { decision: "approve" } })
          yield* ended(session.id, third)

          // …and another session of the same agent still asks about count.
          const other = yield* sessions.create(who, { agent })
          yield* start(who, other.id, "go")
          const [otherAsk] = yield* openCallbacks(who, other.id)
          assert.strictEqual(otherAsk!.request.toolName, "count")
        }).pipe(Effect.provide(countingRuntime(runs, [
          calls(call("c1", "count"), call("c2", "count")),
          "ok",
          calls(call("c3", "count")),
          "ok again",
          calls(call("c4", "shout", { text: "hey" })),
          "shouted"
        ])))
      }))

    it.effect("approve_session is in the log: a fresh host over the same store does not ask again", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const store = yield* MemorySessionStore.make
        const storeLayer = Layer.succeed(SessionStore, store)
        const host = (script: ReadonlyArray<ScriptedModel.ScriptedReply>) =>
          Troupe.layer(storeLayer, { scripts: { agents: { worker: script } }, tools: Toolkit.layer([counter(runs)]) })
        const who = principal()
        const sessionId = yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const session = yield* sessions.create(who, {
            agent: countAgent(runs, new PermissionPolicy({ rules: { count: "ask" } }))
          })
          const turnId = yield* start(who, session.id, "go")
          const [pending] = yield* openCallbacks(who, session.id)
          yield* sessions.answerCallback(who, session.id, {
            callbackId: pending!.callbackId,
            result: { decision: "approve_session" }
          })
          yield* ended(session.id, turnId)
          return session.id
        }).pipe(Effect.provide(host([calls(call("c1", "count")), "ok"])))
        assert.strictEqual(yield* Ref.get(runs), 1)

        yield* Effect.gen(function*() {
          const turnId = yield* start(who, sessionId, "again")
          const end = yield* ended(sessionId, turnId)
          assert.strictEqual(end.outcome, "completed")
          assert.strictEqual(yield* Ref.get(runs), 2)
          const log = yield* logOf(sessionId)
          assert.lengthOf(log.filter((r) => r.body._tag === "callback_opened"), 1)
        }).pipe(Effect.provide(host([calls(call("c2", "count")), "ok again"])))
      }))
  })

  describe("client tools", () => {
    const clientRuntime = (model: Layer.Layer<Model.Model>) =>
      Troupe.layerTest({ model, tools: Toolkit.layer([shout, locate]) })

    it.effect("a tool made without a handler is a client tool: its call opens a client_tool callback", () => {
      const model = recording({ agents: { worker: [calls(call("c1", "locate", { precise: true })), "you are home"] } })
      return Effect.gen(function*() {
        assert.isTrue(locate.spec.client)
        assert.isFalse(shout.spec.client)
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ tools: [shout.spec, locate.spec] }) })
        const turnId = yield* start(who, session.id, "where am I?")
        const [pending] = yield* openCallbacks(who, session.id)
        assert.strictEqual(pending!.kind, "client_tool")
        assert.strictEqual(pending!.turnId, turnId)
        assert.strictEqual(pending!.request._tag, "client_tool")
        assert.strictEqual(pending!.request.toolName, "locate")
        assert.strictEqual(pending!.request.callId, "c1")
        assert.strictEqual(pending!.request.arguments, "{\"precise\":true}")
        assert.strictEqual((yield* sessions.get(who, session.id)).status, "waiting")
        const before = yield* logOf(session.id)
        const [started] = toolCallsOf(before)
        assert.strictEqual(started!.started.name, "locate")
        assert.strictEqual(pending!.operationId, started!.started.operationId)
        assert.lengthOf(model.requests, 1)

        yield* sessions.answerCallback(who, session.id, {
          callbackId: pending!.callbackId,
          result: { output: { lat: 48.8 } }
        })
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "you are home")
        assert.strictEqual(result.usage.toolCalls, 1)
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["locate", { lat: 48.8 }, false]])
        assert.deepStrictEqual(toolMessages(model.requests[1]!), [{ toolCallId: "c1", content: "{\"lat\":48.8}" }])
      }).pipe(Effect.provide(clientRuntime(model.layer)))
    })

    it.effect("a client's error result ({ output, isError: true }) reaches the model as a tool error", () => {
      const model = recording({ agents: { worker: [calls(call("c1", "locate", { precise: false })), "no location then"] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ tools: [locate.spec] }) })
        const turnId = yield* start(who, session.id, "where am I?")
        const [pending] = yield* openCallbacks(who, session.id)
        yield* sessions.answerCallback(who, session.id, {
          callbackId: pending!.callbackId,
          result: { output: "x", isError: true }
        })
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "no location then")
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["locate", "x", true]])
        assert.deepStrictEqual(toolMessages(model.requests[1]!), [{ toolCallId: "c1", content: "x" }])
      }).pipe(Effect.provide(clientRuntime(model.layer)))
    })

    it.effect("a client tool under ask is approved first, then run by the client", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({ tools: [locate.spec], permissions: new PermissionPolicy({ rules: { locate: "ask" } }) })
        })
        const turnId = yield* start(who, session.id, "where am I?")
        const [approval] = yield* openCallbacks(who, session.id)
        assert.strictEqual(approval!.kind, "approval")
        yield* sessions.answerCallback(who, session.id, { callbackId: approval!.callbackId, result: { decision: "approve" } })
        yield* eventually(
          Effect.map(sessions.callbacks(who, session.id), (open) => open.some((c) => c.kind === "client_tool")),
          "the client_tool callback"
        )
        const [client] = yield* sessions.callbacks(who, session.id)
        assert.strictEqual(client!.operationId, approval!.operationId)
        yield* sessions.answerCallback(who, session.id, { callbackId: client!.callbackId, result: { output: { lat: 1 } } })
        assert.strictEqual((yield* sessions.awaitTurn(who, session.id, turnId)).output, "found")
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["locate", { lat: 1 }, false]])
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "locate", { precise: true })), "found"] } },
        tools: Toolkit.layer([locate])
      }))))
  })

  describe("budgets", () => {
    /**
     * The reference turn, "go": call 1 sends INSTRUCTIONS + "go" (7 chars: 2
     * input tokens) and gets a shout call (0 output tokens); call 2 sends
     * 7 + "" + "HI" (9 chars: 3 input tokens) and gets "done" (1 output token).
     */
    const referenceScript = [calls(call("c1", "shout", { text: "hi" })), "done"]

    const budgetRuntime = (
      script: ReadonlyArray<ScriptedModel.ScriptedReply>,
      extra: Partial<Troupe.RuntimeOptions> = {}
    ) => {
      const model = recording({ agents: { worker: script } })
      return {
        model,
        layer: Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]), ...extra })
      }
    }

    it.effect("usage of a completed turn: tokens, model calls, tool calls by name", () => {
      const rt = budgetRuntime([
        calls(call("c1", "shout", { text: "hi" }), call("c2", "add", { a: 1, b: 1 })),
        calls(call("c3", "shout", { text: "yo" })),
        "done"
      ], { tools: Toolkit.layer([shout, add]) })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ tools: [shout.spec, add.spec] }) })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        // call 1: 5+2=7 chars -> 2; call 2: 7+""+"HI"+"{\"sum\":2}" = 18 -> 5; call 3: 18+""+"YO" = 20 -> 5
        assert.deepStrictEqual({ ...result.usage, toolCallsByName: { ...result.usage.toolCallsByName } }, {
          inputTokens: 12,
          outputTokens: 1,
          totalTokens: 13,
          modelCalls: 3,
          toolCalls: 3,
          toolCallsByName: { shout: 2, add: 1 },
          wallTimeMs: 0,
          costMicros: 0
        })
        assert.deepStrictEqual(usageOf(yield* ended(session.id, turnId)), {
          ...result.usage,
          toolCallsByName: { ...result.usage.toolCallsByName }
        })
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("totalTokens: usage past the limit after a reply (output counts) fails the turn", () => {
      const rt = budgetRuntime(referenceScript)
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ totalTokens: 5 }) }) })
        const turnId = yield* start(who, session.id, "go")
        const end = yield* expectExhausted(who, session.id, turnId, { dimension: "totalTokens", limit: 5, observed: 6 })
        assert.strictEqual(end.usage.totalTokens, 6)
        assert.strictEqual(end.usage.modelCalls, 2)
        assert.strictEqual(end.usage.toolCalls, 1)
        // The reply that went over was recorded before the turn ended.
        const log = yield* logOf(session.id)
        assert.strictEqual(tags(log).at(-2), "operation_completed")
        assert.strictEqual(tags(log).at(-1), "turn_ended")
        assert.strictEqual((yield* sessions.get(who, session.id)).status, "idle")
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("a limit of 0 allows no model call at all", () => {
      const rt = budgetRuntime(referenceScript)
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ totalTokens: 0 }) }) })
        const turnId = yield* start(who, session.id, "go")
        const end = yield* expectExhausted(who, session.id, turnId, { dimension: "totalTokens", limit: 0, observed: 0 })
        assert.strictEqual(end.usage.modelCalls, 0)
        assert.lengthOf(rt.model.requests, 0)
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("inputTokens: a budget used up exactly leaves no room for the next model call", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const model = recording({ agents: { worker: [calls(call("c1", "count")), "done"] } })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ tools: [counter(runs).spec], budgets: new Budgets({ inputTokens: 2 }) })
          })
          const turnId = yield* start(who, session.id, "go")
          const end = yield* expectExhausted(who, session.id, turnId, { dimension: "inputTokens", limit: 2, observed: 2 })
          // Reaching the limit exactly is not past it: the tool ran; the second call was never made.
          assert.strictEqual(yield* Ref.get(runs), 1)
          assert.lengthOf(model.requests, 1)
          assert.strictEqual(end.usage.modelCalls, 1)
          assert.strictEqual(end.usage.toolCalls, 1)
        }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([counter(runs)]) })))
      }))

    it.effect("inputTokens does not count output tokens", () => {
      const rt = budgetRuntime(["one two three four five six seven eight nine ten"])
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ inputTokens: 2 }) }) })
        const turnId = yield* start(who, session.id, "go")
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.usage.inputTokens, 2)
        assert.strictEqual(result.usage.outputTokens, 10)
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("toolCalls: a batch that would not fit fails the turn before any of it runs", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ tools: [counter(runs).spec], budgets: new Budgets({ toolCalls: 2 }) })
          })
          const turnId = yield* start(who, session.id, "go")
          const end = yield* expectExhausted(who, session.id, turnId, { dimension: "toolCalls", limit: 2, observed: 3 })
          assert.strictEqual(yield* Ref.get(runs), 0)
          assert.strictEqual(end.usage.toolCalls, 0)
          assert.lengthOf(toolCallsOf(yield* logOf(session.id)), 0)
        }).pipe(Effect.provide(Troupe.layerTest({
          scripts: { agents: { worker: [calls(call("a", "count"), call("b", "count"), call("c", "count")), "done"] } },
          tools: Toolkit.layer([counter(runs)])
        })))
      }))

    it.effect("toolCalls: batches add up; the one that goes over fails the turn", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ tools: [counter(runs).spec], budgets: new Budgets({ toolCalls: 2 }) })
          })
          const turnId = yield* start(who, session.id, "go")
          const end = yield* expectExhausted(who, session.id, turnId, { dimension: "toolCalls", limit: 2, observed: 3 })
          assert.strictEqual(yield* Ref.get(runs), 2)
          assert.strictEqual(end.usage.toolCalls, 2)
          assert.strictEqual(end.usage.modelCalls, 3)
        }).pipe(Effect.provide(Troupe.layerTest({
          scripts: { agents: { worker: [calls(call("a", "count")), calls(call("b", "count")), calls(call("c", "count")), "done"] } },
          tools: Toolkit.layer([counter(runs)])
        })))
      }))

    it.effect("toolCallsByName: a limit per tool names the tool; other tools are not limited by it", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({
              tools: [shout.spec, counter(runs).spec],
              budgets: new Budgets({ toolCallsByName: { count: 1 } })
            })
          })
          const turnId = yield* start(who, session.id, "go")
          const end = yield* expectExhausted(who, session.id, turnId, {
            dimension: "toolCallsByName",
            limit: 1,
            observed: 2,
            toolName: "count"
          })
          // The first reply (two shouts and one count) fit; the second count did not.
          assert.strictEqual(yield* Ref.get(runs), 1)
          assert.deepStrictEqual(end.usage.toolCallsByName, { shout: 2, count: 1 })
        }).pipe(Effect.provide(Troupe.layerTest({
          scripts: {
            agents: {
              worker: [
                calls(call("a", "shout", { text: "a" }), call("b", "count"), call("c", "shout", { text: "c" })),
                calls(call("d", "count")),
                "done"
              ]
            }
          },
          tools: Toolkit.layer([shout, counter(runs)])
        })))
      }))

    const priced = { costs: CostMeter.layer({ scripted: { inputMicrosPerToken: 1000, outputMicrosPerToken: 1000 } }) }

    it.effect("costMicros: priced by the host's CostMeter; usage past the limit fails the turn", () => {
      const rt = budgetRuntime(referenceScript, priced)
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        // Unlimited: the reference turn costs (2 + 0) * 1000 + (3 + 1) * 1000.
        const free = yield* sessions.create(who, { agent: agentWith() })
        const ok = yield* sessions.awaitTurn(who, free.id, yield* start(who, free.id, "go"))
        assert.strictEqual(ok.usage.costMicros, 6000)

        const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ costMicros: 5000 }) }) })
        const turnId = yield* start(who, session.id, "go")
        const end = yield* expectExhausted(who, session.id, turnId, { dimension: "costMicros", limit: 5000, observed: 6000 })
        assert.strictEqual(end.usage.costMicros, 6000)
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("costMicros: a cost budget used up exactly leaves no room for another call", () => {
      const rt = budgetRuntime(referenceScript, priced)
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ costMicros: 2000 }) }) })
        const turnId = yield* start(who, session.id, "go")
        yield* expectExhausted(who, session.id, turnId, { dimension: "costMicros", limit: 2000, observed: 2000 })
        assert.lengthOf(rt.model.requests, 1)
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("wallTimeMs: a slow tool's time counts; usage past the limit fails the turn", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({ tools: [slow(4000).spec], budgets: new Budgets({ wallTimeMs: 3000 }) })
        })
        const turnId = yield* start(who, session.id, "go")
        yield* eventually(
          Effect.map(TestClock.sleeps(), (sleeps) => Chunk.some(sleeps, (at) => at === 4000)),
          "the tool to sleep"
        )
        yield* TestClock.adjust(4000)
        const end = yield* expectExhausted(who, session.id, turnId, { dimension: "wallTimeMs", limit: 3000, observed: 4000 })
        assert.strictEqual(end.usage.wallTimeMs, 4000)
        assert.strictEqual(end.usage.modelCalls, 1)
        assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["slow", "slept", false]])
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "slow")), "done"] } },
        tools: Toolkit.layer([slow(4000)]),
        host: patientHost
      }))))

    it.effect("wallTimeMs: a turn within its limit reports its active time", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({ tools: [slow(4000).spec], budgets: new Budgets({ wallTimeMs: 5000 }) })
        })
        const turnId = yield* start(who, session.id, "go")
        yield* eventually(
          Effect.map(TestClock.sleeps(), (sleeps) => Chunk.some(sleeps, (at) => at === 4000)),
          "the tool to sleep"
        )
        yield* TestClock.adjust(4000)
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "done")
        assert.strictEqual(result.usage.wallTimeMs, 4000)
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "slow")), "done"] } },
        tools: Toolkit.layer([slow(4000)]),
        host: patientHost
      }))))

    it.effect("wallTimeMs: a limit of 0 allows no model call at all", () => {
      const rt = budgetRuntime(referenceScript)
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ wallTimeMs: 0 }) }) })
        const turnId = yield* start(who, session.id, "go")
        yield* expectExhausted(who, session.id, turnId, { dimension: "wallTimeMs", limit: 0, observed: 0 })
        assert.lengthOf(rt.model.requests, 0)
      }).pipe(Effect.provide(rt.layer))
    })

    it.effect("wallTimeMs: time parked on an approval callback does not count", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({
            permissions: new PermissionPolicy({ rules: { shout: "ask" } }),
            budgets: new Budgets({ wallTimeMs: 1000 })
          })
        })
        const turnId = yield* start(who, session.id, "go")
        const [pending] = yield* openCallbacks(who, session.id)
        yield* TestClock.adjust("1 hour")
        yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { decision: "approve" } })
        yield* ended(session.id, turnId)
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "done")
        assert.strictEqual(result.usage.wallTimeMs, 0)
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: referenceScript } },
        tools: Toolkit.layer([shout]),
        host: patientHost
      }))))

    it.effect("wallTimeMs: time parked on a client tool callback does not count", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({ tools: [locate.spec], budgets: new Budgets({ wallTimeMs: 1000 }) })
        })
        const turnId = yield* start(who, session.id, "go")
        const [pending] = yield* openCallbacks(who, session.id)
        yield* TestClock.adjust("1 hour")
        yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { output: { lat: 0 } } })
        yield* ended(session.id, turnId)
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "done")
        assert.strictEqual(result.usage.wallTimeMs, 0)
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "locate", { precise: true })), "done"] } },
        host: patientHost
      }))))

    it.effect("wallTimeMs: time waiting for the user (wait_user) does not count", () =>
      Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({ noToolPolicy: "wait_user", budgets: new Budgets({ wallTimeMs: 1000 }) })
        })
        const turnId = yield* start(who, session.id, "go")
        yield* modelRepliesRecorded(session.id, 1)
        yield* settle
        yield* TestClock.adjust("1 hour")
        assert.strictEqual((yield* sessions.send(who, session.id, { text: "continue" })).disposition, "steered")
        yield* ended(session.id, turnId)
        const result = yield* sessions.awaitTurn(who, session.id, turnId)
        assert.strictEqual(result.output, "finished")
        assert.strictEqual(result.usage.wallTimeMs, 0)
      }).pipe(Effect.provide(Troupe.layerTest({
        scripts: { agents: { worker: ["Anything else?", calls(finishCall("f", "finished"))] } },
        host: patientHost
      }))))

    describe("precedence: run over session over agent, dimension by dimension", () => {
      const precedenceRuntime = () =>
        Troupe.layerTest({
          scripts: { agents: { worker: [calls(call("c1", "shout", { text: "hi" })), "done"] } },
          tools: Toolkit.layer([shout])
        })

      it.effect("the agent's budget applies when nothing overrides it", () =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentWith({ budgets: new Budgets({ toolCalls: 0 }) }) })
          const turnId = yield* start(who, session.id, "go")
          yield* expectExhausted(who, session.id, turnId, { dimension: "toolCalls", limit: 0, observed: 1 })
        }).pipe(Effect.provide(precedenceRuntime())))

      it.effect("the session's budget beats the agent's", () =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ budgets: new Budgets({ toolCalls: 0 }) }),
            budgets: new Budgets({ toolCalls: 5 })
          })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.usage.toolCalls, 1)
        }).pipe(Effect.provide(precedenceRuntime())))

      it.effect("the run's budget beats the session's and the agent's, for that turn only", () =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ budgets: new Budgets({ toolCalls: 5 }) }),
            budgets: new Budgets({ toolCalls: 5 })
          })
          const turnId = yield* start(who, session.id, "go", { budgets: new Budgets({ toolCalls: 0 }) })
          yield* expectExhausted(who, session.id, turnId, { dimension: "toolCalls", limit: 0, observed: 1 })
          const next = yield* start(who, session.id, "again")
          const result = yield* sessions.awaitTurn(who, session.id, next)
          assert.strictEqual(result.usage.toolCalls, 1)
        }).pipe(Effect.provide(Troupe.layerTest({
          // Turn 1 fails before running its call; turn 2 runs one, then says "done".
          scripts: { agents: { worker: [calls(call("c1", "shout", { text: "hi" })), calls(call("c2", "shout", { text: "hi" })), "done"] } },
          tools: Toolkit.layer([shout])
        }))))

      it.effect("a run loosening a limit beats a stricter session limit", () =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith(),
            budgets: new Budgets({ totalTokens: 1 })
          })
          const turnId = yield* start(who, session.id, "go", { budgets: new Budgets({ totalTokens: 1000 }) })
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "done")
        }).pipe(Effect.provide(precedenceRuntime())))

      it.effect("overrides of other dimensions leave a lower level's limit in force", () =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: agentWith({ budgets: new Budgets({ toolCalls: 0, totalTokens: 1 }) }),
            budgets: new Budgets({ totalTokens: 1000 })
          })
          const turnId = yield* start(who, session.id, "go", { budgets: new Budgets({ inputTokens: 1000 }) })
          yield* expectExhausted(who, session.id, turnId, { dimension: "toolCalls", limit: 0, observed: 1 })
        }).pipe(Effect.provide(precedenceRuntime())))
    })
  })

  describe("model settings", () => {
    it.effect("resolve field by field: the run's, else the agent's, else the host's default", () => {
      const model = recording({ agents: { worker: ["ok"], plain: ["ok"] } })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, {
          agent: agentWith({
            model: new ModelRef({ name: "scripted", settings: new ModelSettings({ temperature: 0.5, maxOutputTokens: 200 }) })
          })
        })
        const first = yield* start(who, session.id, "go", { settings: new ModelSettings({ temperature: 0.9 }) })
        yield* sessions.awaitTurn(who, session.id, first)
        const second = yield* start(who, session.id, "again")
        yield* sessions.awaitTurn(who, session.id, second)
        const third = yield* start(who, session.id, "more", { settings: new ModelSettings({ topP: 0.7, seed: 7 }) })
        yield* sessions.awaitTurn(who, session.id, third)
        const plain = yield* sessions.create(who, { agent: agentWith({ name: "plain" }) })
        yield* sessions.awaitTurn(who, plain.id, yield* start(who, plain.id, "go"))

        const settings = model.requests.map((r) => ({ ...r.settings }))
        assert.deepStrictEqual(settings, [
          { temperature: 0.9, topP: 0.2, maxOutputTokens: 200, seed: 1 },
          { temperature: 0.5, topP: 0.2, maxOutputTokens: 200, seed: 1 },
          { temperature: 0.5, topP: 0.7, maxOutputTokens: 200, seed: 7 },
          { temperature: 0.1, topP: 0.2, maxOutputTokens: 100, seed: 1 }
        ])
      }).pipe(Effect.provide(Troupe.layerTest({
        model: model.layer,
        host: { modelSettings: new ModelSettings({ temperature: 0.1, topP: 0.2, maxOutputTokens: 100, seed: 1 }) }
      })))
    })

    it.effect("with no settings anywhere the model gets none; every model call of a turn gets the same", () => {
      const model = recording({
        agents: { worker: [calls(call("c1", "shout", { text: "a" })), "done"], tuned: [calls(call("c1", "shout", { text: "a" })), "done"] }
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const who = principal()
        const session = yield* sessions.create(who, { agent: agentWith() })
        yield* sessions.awaitTurn(who, session.id, yield* start(who, session.id, "go"))
        assert.lengthOf(model.requests, 2)
        assert.isUndefined(model.requests[0]!.settings)
        assert.isUndefined(model.requests[1]!.settings)

        const tuned = yield* sessions.create(who, { agent: agentWith({ name: "tuned" }) })
        yield* sessions.awaitTurn(
          who,
          tuned.id,
          yield* start(who, tuned.id, "go", { settings: new ModelSettings({ seed: 3 }) })
        )
        assert.lengthOf(model.requests, 4)
        assert.deepStrictEqual({ ...model.requests[2]!.settings }, { seed: 3 })
        assert.deepStrictEqual({ ...model.requests[3]!.settings }, { seed: 3 })
      }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer, tools: Toolkit.layer([shout]) })))
    })
  })

  describe("interrupting a turn parked on a callback", () => {
    const askRuntime = () =>
      Troupe.layerTest({
        scripts: { agents: { worker: [calls(call("c1", "shout", { text: "hi" })), "done", "second turn"] } },
        tools: Toolkit.layer([shout]),
        host: patientHost
      })
    const askAgent = () => agentWith({ permissions: new PermissionPolicy({ rules: { shout: "ask" } }) })

    const parkAndInterrupt = Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: askAgent() })
      const turnId = yield* start(who, session.id, "go")
      const [pending] = yield* openCallbacks(who, session.id)
      return { sessions, who, session, turnId, pending: pending as PendingCallback }
    })

    it.effect("cancels the callback with the interruption; usage is reported; the actor goes on", () =>
      Effect.gen(function*() {
        const { pending, session, sessions, turnId, who } = yield* parkAndInterrupt
        const outcome = yield* sessions.interrupt(who, session.id, turnId, "changed my mind")
        assert.strictEqual(outcome.outcome, "interrupted")
        assert.strictEqual(outcome.turnId, turnId)
        const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnInterrupted")
        assert.strictEqual(error.reason, "changed my mind")

        const log = yield* logOf(session.id)
        const resolved = log.filter((r) => r.body._tag === "callback_resolved")
        assert.lengthOf(resolved, 1)
        const end = log.find((r) => r.body._tag === "turn_ended")!
        const cancel = resolved[0]!
        if (cancel.body._tag === "callback_resolved") {
          assert.strictEqual(cancel.body.callbackId, pending.callbackId)
          assert.strictEqual(cancel.body.turnId, turnId)
          assert.strictEqual(cancel.body.resolution, "cancelled")
        }
        // Recorded with the interruption: one commit.
        assert.strictEqual(cancel.commitId, end.commitId)
        assert.isTrue(cancel.seq < end.seq)
        if (end.body._tag === "turn_ended") {
          assert.strictEqual(end.body.outcome, "interrupted")
          assert.strictEqual(end.body.reason, "changed my mind")
          // One model call (go: 2 input tokens, no output); the asked tool never ran.
          assert.deepStrictEqual(usageOf(end.body), {
            inputTokens: 2,
            outputTokens: 0,
            totalTokens: 2,
            modelCalls: 1,
            toolCalls: 0,
            toolCallsByName: {},
            wallTimeMs: 0,
            costMicros: 0
          })
        }
        assert.lengthOf(yield* sessions.callbacks(who, session.id), 0)
        const after = yield* sessions.get(who, session.id)
        assert.strictEqual(after.status, "idle")
        assert.isNull(after.activeTurnId)
        // The tool call's start has no receipt, and nothing ran.
        assert.deepStrictEqual(toolCallsOf(log).map((c) => c.completed), [undefined])

        const next = yield* start(who, session.id, "hello again")
        const result = yield* sessions.awaitTurn(who, session.id, next)
        assert.strictEqual(result.output, "done")
      }).pipe(Effect.provide(askRuntime())))

    it.effect("an answer after the cancellation is StaleCallback with reason \"cancelled\"", () =>
      Effect.gen(function*() {
        const { pending, session, sessions, turnId, who } = yield* parkAndInterrupt
        yield* sessions.interrupt(who, session.id, turnId, "stop")
        const stale = yield* failure(
          sessions.answerCallback(who, session.id, { callbackId: pending.callbackId, result: { decision: "approve" } }),
          "StaleCallback"
        )
        assert.strictEqual(stale.callbackId, pending.callbackId)
        assert.strictEqual(stale.reason, "cancelled")
      }).pipe(Effect.provide(askRuntime())))

    it.effect("time parked on the callback is not in the interrupted turn's usage", () =>
      Effect.gen(function*() {
        const { session, sessions, turnId, who } = yield* parkAndInterrupt
        yield* TestClock.adjust("10 minutes")
        yield* sessions.interrupt(who, session.id, turnId, "stop")
        const end = yield* ended(session.id, turnId)
        assert.strictEqual(end.outcome, "interrupted")
        assert.strictEqual(end.usage.wallTimeMs, 0)
      }).pipe(Effect.provide(askRuntime())))
  })
})
