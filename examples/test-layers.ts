import { Effect } from "effect"
import assert from "node:assert/strict"
import { randomUUID } from "node:crypto"
import { Agent, MemorySessionStore, Principal, ScriptedModel, Sessions, SessionStore, Troupe } from "troupe"

// The test runtime: a fresh in-memory store and a model that replies from a script.
const runtime = Troupe.layer(MemorySessionStore.layer, {
  model: ScriptedModel.layer({ agents: { greeter: ["Hello!", { fail: "the model is down" }] } })
})

const test = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const who = new Principal.Principal({ customerId: randomUUID(), organizationId: randomUUID(), workspaceId: randomUUID() })
  const agent = new Agent.Agent({ name: "greeter", instructions: "Greet.", model: new Agent.ModelRef({ name: "scripted" }) })
  const session = yield* sessions.create(who, { agent })

  const first = yield* sessions.send(who, session.id, { text: "hi" })
  assert.equal((yield* sessions.awaitTurn(who, session.id, first.turnId!)).output, "Hello!")

  const second = yield* sessions.send(who, session.id, { text: "again" })
  const failed = yield* Effect.flip(sessions.awaitTurn(who, session.id, second.turnId!))
  assert.equal(failed._tag === "TurnFailed" && failed.failureCode, "model_error")

  // The log is the observable truth: every step of both turns, in order.
  const store = yield* SessionStore.SessionStore
  const { records } = yield* store.readLog(session.id)
  assert.deepEqual(records.map((record) => record.body._tag), [
    "session_created",
    "turn_started", "operation_started", "operation_completed", "turn_ended",
    "turn_started", "operation_started", "operation_completed", "turn_ended"
  ])
})

Effect.runPromise(test.pipe(Effect.provide(runtime))).then(() => console.log("ok"))
