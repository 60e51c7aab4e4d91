/**
 * Two hosts on separate connections to one SQLite file, each behaviour of
 * `Sessions` exercised through the host that does not drive the session
 * (issue 12, as far as polling the store carries it): a message reaches the
 * other host's actor and its decision comes back; a steer; a callback answer
 * applied; awaitTurn of a turn the other host runs; exact interrupts with
 * their outcome (already_ended, TurnMismatch).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ModelRef, ToolSpec } from "../src/schema/Agent.js"
import { makeTurnId } from "../src/schema/Ids.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"
import { principal } from "./support/fixtures.js"

const pick = new ToolSpec({ name: "pick", description: "The client picks.", parameters: { type: "object" }, sideEffect: "none", idempotency: "unknown", client: true })
const agent = new Agent({ name: "shared", instructions: "x", model: new ModelRef({ name: "scripted" }), tools: [pick] })
const scripts = {
  fallback: (request: { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: string }> }) => {
    const last = request.messages[request.messages.length - 1]!
    return last.role === "user" && last.content.startsWith("pick")
      ? { toolCalls: [{ id: "p", name: "pick", arguments: "{}" }] }
      : `done after ${request.messages.length} messages`
  }
}

const hostOn = (filename: string, owner: string) =>
  Layer.build(Troupe.layerSqlite({ filename }, { scripts, host: { owner, idleTimeout: "20 seconds" } })).pipe(
    Effect.map((context) => Context.get(context, Sessions))
  )

describe("two hosts on one SQLite file", () => {
  it.scopedLive("every command through the host that does not drive the session", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-cross-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "shared.db")
      const a = yield* hostOn(filename, "host-a")
      const b = yield* hostOn(filename, "host-b")
      const me = principal()
      const session = yield* a.create(me, { agent, busyPolicy: "steer" })

      // A drives the session: its turn waits on a client tool.
      const first = yield* a.send(me, session.id, { text: "pick one" })
      assert.strictEqual(first.disposition, "started")
      const open = yield* Effect.gen(function*() {
        for (;;) {
          const callbacks = yield* b.callbacks(me, session.id)
          if (callbacks.length > 0) return callbacks[0]!
          yield* Effect.sleep("10 millis")
        }
      })

      // Through B: a steer reaches A's running turn, and B learns it did.
      const steered = yield* b.send(me, session.id, { text: "and hurry", mode: "steer" })
      assert.strictEqual(steered.disposition, "steered")
      assert.strictEqual(steered.turnId, first.turnId)
      // Through B: the answer is applied by A's actor, and B waits for the turn A runs.
      yield* b.answerCallback(me, session.id, { callbackId: open.callbackId, result: { output: "a.txt" } })
      const result = yield* b.awaitTurn(me, session.id, first.turnId!)
      assert.match(result.output, /^done after \d+ messages$/)

      // Through B: an interrupt of the turn that ended is already_ended; of a turn that never ran, TurnMismatch.
      const late = yield* b.interrupt(me, session.id, first.turnId!)
      assert.strictEqual(late.outcome, "already_ended")
      const mismatch = yield* Effect.flip(b.interrupt(me, session.id, yield* makeTurnId))
      assert.strictEqual(mismatch._tag, "TurnMismatch")

      // Through B, with A still holding the lease: a message starts a turn on A, and B is told which.
      const second = yield* b.send(me, session.id, { text: "again" })
      assert.strictEqual(second.disposition, "started")
      const again = yield* b.awaitTurn(me, session.id, second.turnId!)
      assert.match(again.output, /^done after/)
    }), 30_000)
})
