/**
 * Helpers for the agent-loop suites that drive turns through `Sessions`:
 * start a turn, wait for its end in the log, and a scripted model that keeps
 * every request it is sent.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import type { SessionId, TurnId } from "../../src/schema/Ids.js"
import type { Principal } from "../../src/schema/Principal.js"
import type { LogRecord } from "../../src/schema/Record.js"
import * as Model from "../../src/services/Model.js"
import { type SendOptions, Sessions } from "../../src/services/Sessions.js"
import { endsOfTurn, eventually, logOf } from "./actors.js"

/** A scripted model that also keeps every request it receives, in order. */
export const recording = (scripts: ScriptedModel.Scripts) => {
  const requests: Array<Model.Request> = []
  const layer = Layer.effect(
    Model.Model,
    Effect.map(ScriptedModel.make(scripts), (inner) =>
      Model.Model.of({
        stream: (request) =>
          Stream.suspend(() => {
            requests.push(request)
            return inner.stream(request)
          })
      }))
  )
  return { requests, layer }
}

/** A tool call of a scripted reply. */
export const call = (id: string, name: string, args: unknown = {}): Model.ToolCall => ({
  id,
  name,
  arguments: typeof args === "string" ? args : JSON.stringify(args)
})

/** A scripted reply of tool calls. */
export const calls = (...toolCalls: ReadonlyArray<Model.ToolCall>): ScriptedModel.ScriptedReply => ({ toolCalls })

/** Sends a message that must start a turn; returns the turn id. */
export const start = (who: Principal, sessionId: SessionId, text: string, run?: SendOptions["run"]) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const accepted = yield* sessions.send(who, sessionId, { text, ...(run === undefined ? {} : { run }) })
    assert.strictEqual(accepted.disposition, "started")
    return accepted.turnId!
  })

/** Waits (scheduler turns, no clock) for the turn's `turn_ended` in the log, and returns it. */
export const ended = (sessionId: SessionId, turnId: TurnId) =>
  Effect.gen(function*() {
    yield* eventually(Effect.map(logOf(sessionId), (log) => endsOfTurn(log, turnId).length > 0), `turn ${turnId} to end`)
    const ends = endsOfTurn(yield* logOf(sessionId), turnId)
    assert.lengthOf(ends, 1)
    return ends[0]!
  })

/** The record bodies of a log with tag `tag`. */
export const recordsOf = <T extends LogRecord["body"]["_tag"]>(log: ReadonlyArray<LogRecord>, tag: T) =>
  log.flatMap((r) => (r.body._tag === tag ? [r.body as Extract<LogRecord["body"], { readonly _tag: T }>] : []))

/** The tool messages of a model request. */
export const toolMessages = (request: Model.Request) =>
  request.messages.flatMap((m) => (m.role === "tool" ? [{ toolCallId: m.toolCallId, content: m.content }] : []))

/** The user messages of a model request. */
export const userMessages = (request: Model.Request) => request.messages.flatMap((m) => (m.role === "user" ? [m.content] : []))
