/**
 * Guardrails end to end through `Sessions`: input guardrails run before the
 * first model call and output guardrails on the final output; a block ends
 * the turn as `failed` with `guardrail_blocked` and the guardrail's name,
 * each check is a `guardrail_checked` record, and a guardrail the host lacks,
 * or one that fails, blocks.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import * as Guardrails from "../src/services/Guardrails.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { logOf } from "./support/actors.js"
import { call, calls, ended, recording, recordsOf, start } from "./support/agentLoop.js"
import { failure, principal } from "./support/fixtures.js"

const noEmail = Guardrails.make("no_email", (subject) =>
  Effect.succeed(subject.text.includes("@") ? Guardrails.block("an e-mail address") : Guardrails.allow))

const noSecrets = Guardrails.make("no_secrets", (subject) =>
  Effect.succeed(subject.text.includes("sk-") ? Guardrails.block(`${subject.agentName} gave out a key`) : Guardrails.allow))

const broken = Guardrails.make("broken", () => Effect.fail("the moderation service is down"))

const guarded = (fields: Partial<ConstructorParameters<typeof Agent>[0]> = {}) =>
  new Agent({
    name: "guarded",
    instructions: "Help.",
    model: new ModelRef({ name: "m" }),
    inputGuardrails: ["no_email"],
    outputGuardrails: ["no_secrets"],
    ...fields
  })

const runtime = (model: ReturnType<typeof recording>) =>
  Troupe.layerTest({ model: model.layer, guardrails: Guardrails.layer([noEmail, noSecrets, broken]) })

describe("guardrails", () => {
  it.effect("an input guardrail that blocks ends the turn before any model call: failed, guardrail_blocked, recorded", () => {
    const model = recording({ agents: { guarded: ["never said"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: guarded() })
      const turnId = yield* start(who, session.id, "write to bob@example.com")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "failed")
      assert.strictEqual(end.failureCode, "guardrail_blocked")
      assert.deepStrictEqual(end.failure, { _tag: "GuardrailBlocked", guardrail: "no_email", stage: "input", reason: "an e-mail address" })
      assert.lengthOf(model.requests, 0)
      const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
      assert.strictEqual(error.failureCode, "guardrail_blocked")
      assert.deepInclude(error.failure as object, { guardrail: "no_email" })
      const checks = recordsOf(yield* logOf(session.id), "guardrail_checked")
      assert.deepStrictEqual(checks.map((c) => [c.stage, c.guardrail, c.allowed, c.reason]), [
        ["input", "no_email", false, "an e-mail address"]
      ])
    }).pipe(Effect.provide(runtime(model)))
  })

  it.effect("guardrails that allow let the turn run; each check is recorded", () => {
    const model = recording({ agents: { guarded: ["hello there"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: guarded() })
      const turnId = yield* start(who, session.id, "hi")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "completed")
      assert.strictEqual(end.output, "hello there")
      const checks = recordsOf(yield* logOf(session.id), "guardrail_checked")
      assert.deepStrictEqual(checks.map((c) => [c.stage, c.guardrail, c.allowed]), [
        ["input", "no_email", true],
        ["output", "no_secrets", true]
      ])
    }).pipe(Effect.provide(runtime(model)))
  })

  it.effect("an output guardrail that blocks fails the turn after the model answered; the output is not given out", () => {
    const model = recording({ agents: { guarded: ["the key is sk-123"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: guarded() })
      const turnId = yield* start(who, session.id, "what is the key?")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.outcome, "failed")
      assert.strictEqual(end.failureCode, "guardrail_blocked")
      assert.deepStrictEqual(end.failure, {
        _tag: "GuardrailBlocked",
        guardrail: "no_secrets",
        stage: "output",
        reason: "guarded gave out a key"
      })
      assert.isUndefined(end.output)
      assert.isUndefined(end.publicFinalMessage)
      assert.lengthOf(model.requests, 1)
    }).pipe(Effect.provide(runtime(model)))
  })

  it.effect("the output of a finish call is checked too", () => {
    const model = recording({ agents: { guarded: [calls(call("f1", "finish", { output: "sk-999" }))] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: guarded({ noToolPolicy: "continue" }) })
      const turnId = yield* start(who, session.id, "go")
      const end = yield* ended(session.id, turnId)
      assert.strictEqual(end.failureCode, "guardrail_blocked")
    }).pipe(Effect.provide(runtime(model)))
  })

  it.effect("a guardrail the host does not have blocks; so does one that fails", () => {
    const model = recording({ agents: { guarded: ["fine"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const missing = yield* sessions.create(who, { agent: guarded({ inputGuardrails: ["no_email", "not_here"] }) })
      const first = yield* start(who, missing.id, "hi")
      const missed = yield* ended(missing.id, first)
      assert.deepStrictEqual(missed.failure, {
        _tag: "GuardrailBlocked",
        guardrail: "not_here",
        stage: "input",
        reason: "no guardrail named not_here on this host"
      })
      // The checks stop at the first block and record each one made.
      assert.deepStrictEqual(recordsOf(yield* logOf(missing.id), "guardrail_checked").map((c) => [c.guardrail, c.allowed]), [
        ["no_email", true],
        ["not_here", false]
      ])
      const failing = yield* sessions.create(who, { agent: guarded({ outputGuardrails: ["broken"] }) })
      const second = yield* start(who, failing.id, "hi")
      const failed = yield* ended(failing.id, second)
      assert.deepStrictEqual(failed.failure, {
        _tag: "GuardrailBlocked",
        guardrail: "broken",
        stage: "output",
        reason: "the guardrail failed: the moderation service is down"
      })
    }).pipe(Effect.provide(runtime(model)))
  })

  it.effect("after a handoff, the output guardrails of the agent that answers apply", () => {
    const leaky = new Agent({ name: "leaky", instructions: "Leak.", model: new ModelRef({ name: "m" }), outputGuardrails: ["no_secrets"] })
    const front = guarded({ outputGuardrails: [], handoffs: [leaky] })
    const model = recording({ agents: { guarded: [calls(call("t1", "transfer_to_leaky"))], leaky: ["sk-1"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: front })
      const turnId = yield* start(who, session.id, "hi")
      const end = yield* ended(session.id, turnId)
      assert.deepInclude(end.failure as object, { guardrail: "no_secrets", reason: "leaky gave out a key" })
    }).pipe(Effect.provide(runtime(model)))
  })
})
