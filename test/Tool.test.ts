import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Tool from "../src/services/Tool.js"

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
      assert.deepStrictEqual(yield* Tool.run(add, `{"a": 2, "b": 3}`), { output: { sum: 5 }, isError: false })
    }))

  it.effect("bad JSON, mismatched arguments and handler failures are error outcomes, never crashes", () =>
    Effect.gen(function*() {
      const notJson = yield* Tool.run(add, "{a: 2")
      assert.isTrue(notJson.isError)
      assert.include(JSON.stringify(notJson.output), "not valid JSON")
      const mismatch = yield* Tool.run(add, `{"a": "two", "b": 3}`)
      assert.isTrue(mismatch.isError)
      assert.include(JSON.stringify(mismatch.output), "invalid arguments for add")
      const failed = yield* Tool.run(add, `{"a": 13, "b": 1}`)
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
      const outcome = yield* Tool.run(echo, deep)
      assert.isTrue(outcome.isError)
      assert.include(JSON.stringify(outcome.output), "240")
      const fine = yield* Tool.run(echo, `{"value":${"[".repeat(200)}1${"]".repeat(200)}}`)
      assert.isFalse(fine.isError)
    }))
})

