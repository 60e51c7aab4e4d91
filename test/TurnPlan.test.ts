/**
 * Per-run overrides of `noToolPolicy` and `maxCycles`, resolved run → agent
 * → default: as `TurnPlan.resolve` gives them, and end to end through
 * `Sessions.send(..., { run })`, for that turn only, handoff targets
 * included.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { RunOptions } from "../src/schema/Run.js"
import * as TurnPlan from "../src/actors/TurnPlan.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { call, calls, ended, recording, start } from "./support/agentLoop.js"
import { failure, principal } from "./support/fixtures.js"

const worker = (fields: Partial<ConstructorParameters<typeof Agent>[0]> = {}) =>
  new Agent({ name: "worker", instructions: "Work.", model: new ModelRef({ name: "m" }), ...fields })

describe("TurnPlan.resolve: noToolPolicy and maxCycles", () => {
  it("the run's value, else the agent's, else the default (finish, 16)", () => {
    const plain = TurnPlan.resolve({ agent: worker() })
    assert.strictEqual(plain.noToolPolicy, "finish")
    assert.strictEqual(plain.maxCycles, 16)
    assert.isFalse(plain.finishes)
    const agents = TurnPlan.resolve({ agent: worker({ noToolPolicy: "wait_user", maxCycles: 4 }) })
    assert.strictEqual(agents.noToolPolicy, "wait_user")
    assert.strictEqual(agents.maxCycles, 4)
    const run = TurnPlan.resolve({
      agent: worker({ noToolPolicy: "wait_user", maxCycles: 4 }),
      run: new RunOptions({ noToolPolicy: "continue", maxCycles: 2 })
    })
    assert.strictEqual(run.noToolPolicy, "continue")
    assert.strictEqual(run.maxCycles, 2)
    // The finish tool follows the resolved policy, not the agent's.
    assert.isTrue(run.finishes)
    const back = TurnPlan.resolve({ agent: worker({ noToolPolicy: "continue" }), run: new RunOptions({ noToolPolicy: "finish" }) })
    assert.isFalse(back.finishes)
    assert.notInclude(back.tools.map((t) => t.name), "finish")
  })
})

describe("per-run overrides", () => {
  it.effect("a run's noToolPolicy and maxCycles hold for its turn only; the next turn is the agent's again", () => {
    const model = recording({ agents: { worker: ["hmm"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: worker() })
      const turnId = yield* start(who, session.id, "go", { noToolPolicy: "continue", maxCycles: 2 })
      const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
      assert.strictEqual(error.failureCode, "max_cycles")
      assert.deepStrictEqual(error.failure, { _tag: "MaxCycles", maxCycles: 2 })
      assert.lengthOf(model.requests, 2)
      assert.include(model.requests[0]!.tools.map((t) => t.name), "finish")
      // The agent's finish policy again: one call, done.
      const next = yield* start(who, session.id, "again")
      const end = yield* ended(session.id, next)
      assert.strictEqual(end.outcome, "completed")
      assert.lengthOf(model.requests, 3)
      assert.notInclude(model.requests[2]!.tools.map((t) => t.name), "finish")
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("a run's noToolPolicy finish over an agent's continue: a reply without tool calls completes the turn", () => {
    const model = recording({ agents: { worker: ["done at once", "never"] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: worker({ noToolPolicy: "continue", maxCycles: 5 }) })
      const turnId = yield* start(who, session.id, "go", { noToolPolicy: "finish" })
      const result = yield* sessions.awaitTurn(who, session.id, turnId)
      assert.strictEqual(result.output, "done at once")
      assert.lengthOf(model.requests, 1)
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("a run's maxCycles holds over a handoff target's own", () => {
    const target = worker({ name: "target", maxCycles: 50 })
    const front = worker({ handoffs: [target] })
    const model = recording({ agents: { worker: [calls(call("t1", "transfer_to_target"))], target: [calls(call("x", "nothing"))] } })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: front })
      const turnId = yield* start(who, session.id, "go", { maxCycles: 3 })
      const error = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnFailed")
      assert.deepStrictEqual(error.failure, { _tag: "MaxCycles", maxCycles: 3 })
      assert.deepStrictEqual(model.requests.map((r) => r.agentName), ["worker", "target", "target"])
    }).pipe(Effect.provide(Troupe.layerTest({ model: model.layer })))
  })

  it.effect("an out-of-range maxCycles or an unknown noToolPolicy is InvalidInput, and nothing is sent", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent: worker() })
      const bad = yield* failure(sessions.send(who, session.id, { text: "go", run: { maxCycles: 0 } }), "InvalidInput")
      assert.strictEqual(bad.what, "run options")
      yield* failure(
        sessions.send(who, session.id, { text: "go", run: { noToolPolicy: "sometimes" } as unknown as typeof RunOptions.Encoded }),
        "InvalidInput"
      )
      assert.strictEqual((yield* sessions.get(who, session.id)).headSeq, 1)
    }).pipe(Effect.provide(Troupe.layerTest())))
})
