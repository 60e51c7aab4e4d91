/**
 * Structured output end to end through `Sessions`: an agent that declares an
 * output schema (`Agent.outputOf`) has its final output checked against its
 * JSON Schema; a reply that does not match is sent back to the model with the
 * problems (an `output_rejected` record, in the transcript), at most
 * `maxRetries` times, then the turn fails `invalid_output`; `awaitOutput`
 * returns the value decoded with the caller's schema, typed. The model is
 * given the schema, and the `finish` tool takes it as its `output`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Schema } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as StructuredOutput from "../src/actors/StructuredOutput.js"
import { Agent, ModelRef, outputOf } from "../src/schema/Agent.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Troupe from "../src/Troupe.js"
import { eventually, logOf } from "./support/actors.js"
import { call, calls, ended, recording, recordsOf, start, toolMessages, userMessages } from "./support/agentLoop.js"
import { failure, principal } from "./support/fixtures.js"

const Invoice = Schema.Struct({
  total: Schema.Number,
  currency: Schema.Literal("EUR", "USD"),
  lines: Schema.Array(Schema.Struct({ item: Schema.String, price: Schema.Number }))
})

const invoicer = (maxRetries?: number, fields: Partial<ConstructorParameters<typeof Agent>[0]> = {}) =>
  new Agent({
    name: "invoicer",
    instructions: "Write the invoice.",
    model: new ModelRef({ name: "m" }),
    output: outputOf(Invoice, { name: "invoice", ...(maxRetries === undefined ? {} : { maxRetries }) }),
    ...fields
  })

const valid: typeof Invoice.Type = { total: 12.5, currency: "EUR", lines: [{ item: "tea", price: 12.5 }] }

describe("structured output", () => {
  it.effect("a reply that matches completes the turn; awaitOutput gives the decoded value; the model got the schema", () => {
    const model = recording({ agents: { invoicer: ["```json\n" + JSON.stringify(valid) + "\n```"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: invoicer() })
      const turnId = yield* start(who, session.id, "bill the tea")
      const invoice = yield* sessions.awaitOutput(who, session.id, turnId, Invoice)
      // Typed: these lines compile only because `invoice` is an Invoice.
      const total: number = invoice.total
      const currency: "EUR" | "USD" = invoice.currency
      assert.strictEqual(total, 12.5)
      assert.strictEqual(currency, "EUR")
      assert.deepStrictEqual(invoice, valid)
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.output, JSON.stringify(valid))
      const output = model.requests[0]!.output
      assert.strictEqual(output?.name, "invoice")
      assert.deepStrictEqual(output?.schema.required, ["total", "currency", "lines"])
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("a reply that does not match goes back to the model with the problems; a later match completes", () => {
    const model = recording({
      agents: { invoicer: ["here is your invoice", JSON.stringify({ total: "12", currency: "GBP", lines: [] }), JSON.stringify(valid)] }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: invoicer(2) })
      const turnId = yield* start(who, session.id, "bill the tea")
      assert.deepStrictEqual(yield* sessions.awaitOutput(who, session.id, turnId, Invoice), valid)
      const rejections = recordsOf(yield* logOf(session.id), "output_rejected")
      assert.deepStrictEqual(rejections.map((r) => r.attempt), [1, 2])
      assert.include(rejections[0]!.problems, "not JSON")
      assert.include(rejections[1]!.problems, "$.total: expected number, got string")
      assert.include(rejections[1]!.problems, "$.currency")
      // The model saw each rejection after its reply, as a user message.
      const [, second, third] = model.requests
      assert.deepStrictEqual(userMessages(second!), ["bill the tea", StructuredOutput.rejectionText(rejections[0]!.problems)])
      assert.lengthOf(userMessages(third!), 3)
      assert.deepStrictEqual(third!.messages.map((m) => m.role), ["user", "assistant", "user", "assistant", "user"])
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("past maxRetries the turn fails with invalid_output, carrying the last problems and the attempts", () => {
    const model = recording({ agents: { invoicer: [JSON.stringify({ total: 1 })] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: invoicer(1) })
      const turnId = yield* start(who, session.id, "bill")
      const error = yield* failure(sessions.awaitOutput(who, session.id, turnId, Invoice), "TurnFailed")
      assert.strictEqual(error.failureCode, "invalid_output")
      const end = yield* ended(session.id, turnId)
      assert.deepStrictEqual(end.failure, { _tag: "InvalidOutput", problems: "$: missing currency; $: missing lines", attempts: 2 })
      assert.lengthOf(model.requests, 2)
      assert.lengthOf(recordsOf(yield* logOf(session.id), "output_rejected"), 1)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("with a finish tool, its output takes the schema; a rejected finish call is answered with the problems", () => {
    const model = recording({
      agents: {
        invoicer: [
          calls(call("f1", "finish", { output: { total: 3 } })),
          calls(call("f2", "finish", { output: valid }))
        ]
      }
    })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: invoicer(2, { noToolPolicy: "continue" }) })
      const turnId = yield* start(who, session.id, "bill")
      assert.deepStrictEqual(yield* sessions.awaitOutput(who, session.id, turnId, Invoice), valid)
      const [first, second] = model.requests
      // Not a text reply: no response format; the finish tool carries the schema.
      assert.isUndefined(first!.output)
      const finish = first!.tools.find((t) => t.name === "finish")!
      const properties = finish.parameters["properties"] as { readonly output: { readonly required: unknown } }
      assert.deepStrictEqual(properties.output.required, ["total", "currency", "lines"])
      const [answer] = toolMessages(second!)
      assert.strictEqual(answer!.toolCallId, "f1")
      assert.include(answer!.content, "missing currency")
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("awaitOutput of an output that does not decode with the caller's schema is InvalidOutput", () => {
    const plain = new Agent({ name: "plain", instructions: "Talk.", model: new ModelRef({ name: "m" }) })
    const model = recording({ agents: { plain: ["just words"], invoicer: [JSON.stringify({ ...valid, total: -1 })] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: plain })
      const turnId = yield* start(who, session.id, "hi")
      const error = yield* failure(sessions.awaitOutput(who, session.id, turnId, Invoice), "InvalidOutput")
      assert.strictEqual(error.turnId, turnId)
      // A refinement the JSON Schema does not hold is the caller's schema's to refuse.
      const Positive = Schema.Struct({ ...Invoice.fields, total: Schema.Number.pipe(Schema.filter((n) => n > 0)) })
      const other = yield* sessions.create(who, { agent: invoicer() })
      const next = yield* start(who, other.id, "bill")
      assert.deepStrictEqual((yield* sessions.awaitOutput(who, other.id, next, Invoice)).total, -1)
      yield* failure(sessions.awaitOutput(who, other.id, next, Positive), "InvalidOutput")
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })
})

describe("structured output after a restart", () => {
  it.effect("a turn resumed on a fresh host replays its rejection without recording it again; the model sees it once", () =>
    Effect.gen(function*() {
      // A client tool parks the turn after the rejected reply, so the rejection is durable when the first host goes away.
      const prices = Tool.make({ name: "prices", description: "Asks for the prices.", parameters: Schema.Struct({}), success: Schema.String })
      const agent = invoicer(2, { tools: [prices.spec] })
      const store = yield* MemorySessionStore.make
      const storeLayer = Layer.succeed(SessionStore, store)
      const who = principal()
      const first = recording({ agents: { invoicer: ["an invoice, roughly", calls(call("p1", "prices"))] } })
      const { sessionId, turnId } = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const session = yield* sessions.create(who, { agent })
        const turnId = yield* start(who, session.id, "bill")
        yield* eventually(Effect.map(sessions.callbacks(who, session.id), (open) => open.length === 1), "the prices callback")
        return { sessionId: session.id, turnId }
      }).pipe(Effect.provide(Troupe.layer(storeLayer, { model: first.layer })))

      const second = recording({ agents: { invoicer: [JSON.stringify(valid)] } })
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const [pending] = yield* sessions.callbacks(who, sessionId)
        yield* sessions.answerCallback(who, sessionId, { callbackId: pending!.callbackId, result: { output: "tea 12.50" } })
        assert.deepStrictEqual(yield* sessions.awaitOutput(who, sessionId, turnId, Invoice), valid)
        assert.lengthOf(recordsOf(yield* logOf(sessionId), "output_rejected"), 1)
        assert.lengthOf(second.requests, 1)
        const rejections = userMessages(second.requests[0]!).filter((m) => m.startsWith("Your final output does not match"))
        assert.lengthOf(rejections, 1)
      }).pipe(Effect.provide(Troupe.layer(storeLayer, { model: second.layer })))
    }))
})

describe("StructuredOutput", () => {
  const spec = outputOf(Invoice)
  it("checks JSON text, in a Markdown fence or not, and says what does not match", () => {
    assert.deepStrictEqual(StructuredOutput.checkText(spec, JSON.stringify(valid)), Either.right(JSON.stringify(valid)))
    assert.isTrue(Either.isRight(StructuredOutput.checkText(spec, "```\n" + JSON.stringify(valid) + "\n```")))
    assert.deepStrictEqual(
      StructuredOutput.checkText(spec, JSON.stringify({ ...valid, lines: [{ item: 1, price: 2 }] })),
      Either.left("$.lines[0].item: expected string, got number")
    )
    assert.isTrue(Either.isLeft(StructuredOutput.checkText(spec, "{")))
  })
})
