/**
 * The agent loop end to end through `Sessions`: tool calls, completion,
 * permissions, client tools, budgets.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { Agent, ModelRef, PermissionPolicy } from "../src/schema/Agent.js"
import { Budgets } from "../src/schema/Budget.js"
import type { LogRecord } from "../src/schema/Record.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import type * as ScriptedModel from "../src/layers/ScriptedModel.js"
import { failure, principal } from "./support/fixtures.js"

const shout = Tool.make({
  name: "shout",
  description: "Upper-cases a text.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ text }) => Effect.succeed(text.toUpperCase())
})

const agentWith = (fields: Partial<ConstructorParameters<typeof Agent>[0]> = {}) =>
  new Agent({
    name: "worker",
    instructions: "Work.",
    model: new ModelRef({ name: "scripted" }),
    tools: [shout.spec],
    ...fields
  })

const runtime = (scripts: ScriptedModel.Scripts) =>
  Troupe.layerTest({ scripts, tools: Toolkit.layer([shout]) })

const logOf = (sessionId: Parameters<SessionStore["Type"]["readLog"]>[0]) =>
  Effect.flatMap(SessionStore, (store) => store.readLog(sessionId, { limit: 1000 })).pipe(
    Effect.map((page) => page.records)
  )

const tags = (log: ReadonlyArray<LogRecord>) => log.map((r) => r.body._tag)

describe("agent loop", () => {
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
})
