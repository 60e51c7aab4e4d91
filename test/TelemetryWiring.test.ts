/**
 * Product telemetry from a running runtime: `session.started` only for a
 * persisted session, `session.failed` for a refused one, `turn.ended` with
 * status, failure code and usage, the excluded flag carried from the sender
 * to the turn it started.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as LogTelemetry from "../src/layers/LogTelemetry.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Budgets } from "../src/schema/Budget.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Telemetry from "../src/services/Telemetry.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { failure, principal } from "./support/fixtures.js"
import { awaitEvents, readEvents } from "./support/telemetryFile.js"

const echo = Tool.make({
  name: "echo",
  description: "Echoes.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.String,
  handler: ({ text }) => Effect.succeed(text)
})

const agent = new Agent({
  name: "worker",
  instructions: "Work.",
  model: new ModelRef({ name: "scripted" }),
  tools: [echo.spec]
})

const scripts = {
  agents: { worker: [{ toolCalls: [{ id: "c1", name: "echo", arguments: "{\"text\":\"secret words\"}" }] }, "the secret answer"] }
}

const runtime = (path: string) =>
  Troupe.layerTest({ scripts, tools: Toolkit.layer([echo]), telemetry: LogTelemetry.layer({ path }) })

describe("telemetry wiring", () => {
  it.effect("a session and its turn emit session.started and turn.ended, with bounded dimensions only", () => {
    const path = join(mkdtempSync(join(tmpdir(), "troupe-wiring-")), "events.jsonl")
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent, title: "my private title" })
      const accepted = yield* sessions.send(who, session.id, { text: "my private message" })
      yield* sessions.awaitTurn(who, session.id, accepted.turnId!)
      const events = yield* awaitEvents(path, 2)
      assert.deepStrictEqual(events.map((e) => e.event), ["session.started", "turn.ended"])
      assert.strictEqual(events[0]!.kind, "root")
      assert.strictEqual(events[1]!.status, "completed")
      assert.strictEqual(events[1]!.usage.toolCalls, 1)
      assert.strictEqual(events[1]!.usage.modelCalls, 2)
      assert.isFalse(events[0]!.excluded)
      // No ids, titles, messages, outputs or tool names leave the process.
      const text = readFileSync(path, "utf8")
      for (const secret of [session.id, accepted.turnId!, "private", "secret", "echo", "worker", who.workspaceId]) {
        assert.notInclude(text, secret)
      }
    }).pipe(Effect.provide(runtime(path)))
  })

  it.effect("a refused creation emits session.failed with a category and status, a replayed one nothing", () => {
    const path = join(mkdtempSync(join(tmpdir(), "troupe-wiring-")), "events.jsonl")
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const created = yield* sessions.create(who, { agent, idempotencyKey: "k1", title: "a" })
      // A replay of the same creation returns the session and starts nothing.
      const replayed = yield* sessions.create(who, { agent, idempotencyKey: "k1", title: "a" })
      assert.strictEqual(replayed.id, created.id)
      yield* failure(sessions.create(who, { agent, idempotencyKey: "k1", title: "b" }), "Conflict")
      const events = readEvents(path)
      assert.deepStrictEqual(events.map((e) => e.event), ["session.started", "session.failed"])
      assert.strictEqual(events[1]!.category, "conflict")
      assert.strictEqual(events[1]!.status, 409)
    }).pipe(Effect.provide(runtime(path)))
  })

  it.effect("a failed turn reports its failure code; an excluded sender's turn is marked excluded", () => {
    const path = join(mkdtempSync(join(tmpdir(), "troupe-wiring-")), "events.jsonl")
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const who = principal()
      const session = yield* sessions.create(who, { agent, budgets: new Budgets({ toolCalls: 0 }) })
      const accepted = yield* sessions.send(who, session.id, { text: "go" }).pipe(Telemetry.withExcluded(true))
      yield* failure(sessions.awaitTurn(who, session.id, accepted.turnId!), "BudgetExhausted")
      const events = yield* awaitEvents(path, 2)
      assert.deepStrictEqual(events.map((e) => [e.event, e.excluded]), [["session.started", false], ["turn.ended", true]])
      assert.strictEqual(events[1]!.status, "failed")
      assert.strictEqual(events[1]!.failureCode, "budget_exhausted")
      // The next sender is not excluded: the actor did not keep the first sender's preference.
      const next = yield* sessions.send(who, session.id, { text: "again" })
      yield* Effect.either(sessions.awaitTurn(who, session.id, next.turnId!))
      assert.deepStrictEqual((yield* awaitEvents(path, 3)).map((e) => e.excluded), [false, true, false])
    }).pipe(Effect.provide(runtime(path)))
  })
})
