import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Agent from "../src/schema/Agent.js"
import type { OperationId, SessionId, TurnId } from "../src/schema/Ids.js"
import * as Tool from "../src/services/Tool.js"
import { principal } from "./support/fixtures.js"

const context: Tool.ToolContext = {
  sessionId: "ses_1" as SessionId,
  turnId: "turn_1" as TurnId,
  operationId: "op_1" as OperationId,
  callId: "c1",
  principal: principal(),
  agentPath: ["root"]
}

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  success: Schema.Struct({ sum: Schema.Number }),
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ a, b }) => (a === 13 ? Effect.fail("13 is unlucky") : Effect.succeed({ sum: a + b }))
})

describe("Tool", () => {
  it("derives the model-facing spec from the parameter schema", () => {
    assert.deepStrictEqual(add.spec.parameters, {
      type: "object",
      required: ["a", "b"],
      properties: { a: { type: "number" }, b: { type: "number" } },
      additionalProperties: false
    })
    assert.strictEqual(add.spec.sideEffect, "none")
    assert.strictEqual(add.spec.idempotency, "supported")
    assert.strictEqual(add.spec.client, false)
  })

  it("a tool without a handler is a client tool with cautious defaults", () => {
    const pick = Tool.make({
      name: "pick_file",
      description: "Asks the user to pick a file",
      parameters: Schema.Struct({ prompt: Schema.String }),
      success: Schema.Struct({ path: Schema.String })
    })
    assert.strictEqual(pick.spec.client, true)
    assert.strictEqual(pick.spec.sideEffect, "external")
    assert.strictEqual(pick.spec.idempotency, "unknown")
  })

  it.effect("runs the handler on decoded arguments and encodes its success", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* Tool.run(add, `{"a": 2, "b": 3}`, context), { output: { sum: 5 }, isError: false })
    }))

  it.effect("bad JSON, mismatched arguments and handler failures are error outcomes, never crashes", () =>
    Effect.gen(function*() {
      const notJson = yield* Tool.run(add, "{a: 2", context)
      assert.isTrue(notJson.isError)
      assert.include(JSON.stringify(notJson.output), "not valid JSON")
      const mismatch = yield* Tool.run(add, `{"a": "two", "b": 3}`, context)
      assert.isTrue(mismatch.isError)
      assert.include(JSON.stringify(mismatch.output), "invalid arguments for add")
      const failed = yield* Tool.run(add, `{"a": 13, "b": 1}`, context)
      assert.deepStrictEqual(failed, { output: { error: "13 is unlucky" }, isError: true })
    }))

  it.effect("arguments nested deeper than 240 levels (what the wire can carry back) are an error outcome, at any depth", () =>
    Effect.gen(function*() {
      const echo = Tool.make({
        name: "echo",
        description: "Echoes",
        parameters: Schema.Struct({ value: Schema.Unknown }),
        success: Schema.Unknown,
        handler: ({ value }) => Effect.succeed(value)
      })
      const deep = `{"value":${"[".repeat(20_000)}${"]".repeat(20_000)}}`
      const outcome = yield* Tool.run(echo, deep, context)
      assert.isTrue(outcome.isError)
      assert.include(JSON.stringify(outcome.output), "240")
      const fine = yield* Tool.run(echo, `{"value":${"[".repeat(200)}1${"]".repeat(200)}}`, context)
      assert.isFalse(fine.isError)
    }))

  it("metadata: capability tags, cost dimensions, terminal and parallel reach the spec only when declared", () => {
    const fetch = Tool.make({
      name: "fetch",
      description: "Fetches a URL",
      parameters: Schema.Struct({ url: Schema.String }),
      success: Schema.String,
      metadata: { sideEffect: "read", capabilities: ["network"], costs: ["money"], terminal: true, parallel: true },
      handler: ({ url }) => Effect.succeed(url)
    })
    assert.deepStrictEqual(fetch.spec.capabilities, ["network"])
    assert.deepStrictEqual(fetch.spec.costs, ["money"])
    assert.isTrue(fetch.spec.terminal)
    assert.isTrue(fetch.spec.parallel)
    assert.deepStrictEqual(fetch.metadata.capabilities, ["network"])
    // A tool without them freezes as before: no new keys in the stored agent.
    const encoded = Schema.encodeSync(Agent.ToolSpec)(add.spec)
    assert.deepStrictEqual(Object.keys(encoded).sort(), ["client", "description", "idempotency", "name", "parameters", "sideEffect"])
    assert.deepStrictEqual(add.metadata, {
      sideEffect: "none",
      idempotency: "supported",
      preserveResult: false,
      capabilities: [],
      costs: [],
      terminal: false,
      parallel: false
    })
  })

  it.effect("the handler gets the call's ToolContext", () =>
    Effect.gen(function*() {
      const seen: Array<Tool.ToolContext> = []
      const keyed = Tool.make({
        name: "keyed",
        description: "Keys on its call",
        parameters: Schema.Struct({}),
        success: Schema.String,
        handler: (_, call) => Effect.sync(() => (seen.push(call), `${call.sessionId}/${call.operationId}/${call.callId}`))
      })
      assert.deepStrictEqual(yield* Tool.run(keyed, "{}", context), { output: "ses_1/op_1/c1", isError: false })
      assert.deepStrictEqual(seen, [context])
    }))

  it.effect("needsApproval: decided on the decoded arguments; bad arguments need none; a failure means asking", () =>
    Effect.gen(function*() {
      const pay = (needsApproval: (args: { readonly amount: number }) => boolean | Effect.Effect<boolean, string>) =>
        Tool.make({
          name: "pay",
          description: "Pays",
          parameters: Schema.Struct({ amount: Schema.Number }),
          success: Schema.String,
          handler: () => Effect.succeed("paid"),
          needsApproval
        })
      const overHundred = pay(({ amount }) => amount > 100)
      assert.isTrue(yield* Tool.needsApproval(overHundred, `{"amount":500}`, context))
      assert.isFalse(yield* Tool.needsApproval(overHundred, `{"amount":5}`, context))
      assert.isFalse(yield* Tool.needsApproval(overHundred, `{"amount":"lots"}`, context))
      assert.isFalse(yield* Tool.needsApproval(overHundred, `not json`, context))
      assert.isTrue(yield* Tool.needsApproval(pay(() => Effect.fail("no idea")), `{"amount":1}`, context))
      assert.isTrue(yield* Tool.needsApproval(pay(() => { throw new Error("boom") }), `{"amount":1}`, context))
      assert.isFalse(yield* Tool.needsApproval(add, `{"a":1,"b":2}`, context))
    }))
})
