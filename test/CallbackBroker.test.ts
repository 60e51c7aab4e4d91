/**
 * Callbacks end to end through `Sessions`: manual answers, the first answer
 * winning, providers (kinds, `None`, nearest first, failures, withdrawal, late
 * registration), cancellation by interrupt, hand-over of an open callback to a
 * new host on a SQLite file, and tenancy. The spec is docs/agent-loop.md,
 * "Callbacks", and DESIGN.md §6.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Effect, Exit, Fiber, Layer, Option, Ref, Schema, Scope, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type * as ScriptedModel from "../src/layers/ScriptedModel.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef, PermissionPolicy } from "../src/schema/Agent.js"
import { ApprovalSettings } from "../src/schema/Policy.js"
import type { AnswerOf, CallbackKind, PendingCallback } from "../src/schema/Callback.js"
import * as CallbackHandlers from "../src/schema/CallbackHandlers.js"
import type { ProductEvent } from "../src/schema/ProductEvent.js"
import {
  makeCallbackId,
  makeInputId,
  makeOperationId,
  makeTurnId,
  type CallbackId,
  type SessionId,
  type TurnId
} from "../src/schema/Ids.js"
import type { Principal } from "../src/schema/Principal.js"
import { Message } from "../src/schema/Inbox.js"
import type { CallbackOpened, CallbackResolved, LogRecord, OperationStarted, TurnStarted } from "../src/schema/Record.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Telemetry from "../src/services/Telemetry.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { collectUntil, endsOf, eventually, logOf, neverReleases } from "./support/actors.js"
import { failure, principal } from "./support/fixtures.js"

// ---- tools, agents, scripts ----

/** A server tool that needs approval (the agents' rule is `ask`); it counts its runs. */
const deployTool = (runs: Ref.Ref<number>) =>
  Tool.make({
    name: "deploy",
    description: "Deploys the service.",
    parameters: Schema.Struct({}),
    success: Schema.String,
    handler: () => Effect.as(Ref.update(runs, (n) => n + 1), "deployed")
  })

/** A client tool: no handler, so calling it opens a `client_tool` callback. */
const lookup = Tool.make({
  name: "lookup",
  description: "Looks something up on the client.",
  parameters: Schema.Struct({ q: Schema.String }),
  success: Schema.Unknown
})

// Only the spec matters to an agent; the handler lives in the host's toolkit.
const deploySpec = deployTool(Ref.unsafeMake(0)).spec

const agentNamed = (name: string) =>
  new Agent({
    name,
    instructions: `You are ${name}.`,
    model: new ModelRef({ name: "scripted" }),
    tools: [deploySpec, lookup.spec],
    permissions: new PermissionPolicy({ rules: { deploy: "ask" } })
  })

const deployCall = (id: string) => ({ toolCalls: [{ id, name: "deploy", arguments: "{}" }] })
const lookupCall = (id: string) => ({ toolCalls: [{ id, name: "lookup", arguments: "{\"q\":\"weather\"}" }] })

/**
 * `worker` calls `deploy` (approval) and finishes, in each of two turns;
 * `helper` does it once; `browser` calls the client tool `lookup`, then
 * finishes. Scripts advance per session, so every session starts at the top.
 */
const SCRIPTS: ScriptedModel.Scripts = {
  agents: {
    worker: [deployCall("c1"), "done", deployCall("c2"), "done again"],
    helper: [deployCall("h1"), "helped"],
    browser: [lookupCall("k1"), "looked"]
  }
}

const approve = { decision: "approve" } as const

/** The product events of the running test (`onTestRuntime` clears them). */
const emitted: Array<ProductEvent> = []
const capture = Layer.succeed(Telemetry.Telemetry, Telemetry.Telemetry.of({ emit: (event) => Effect.sync(() => emitted.push(event)) }))

type Services = Troupe.Services | Scope.Scope

const freshFile = () => join(mkdtempSync(join(tmpdir(), "troupe-callbacks-")), "sessions.db")

/**
 * Runs `body` on a fresh runtime (in memory, or on a fresh SQLite file) whose
 * `deploy` handler counts into `runs`. Providers forked with `forkScoped` in `body` end before the runtime.
 */
const onTestRuntime = <A, E>(
  body: (runs: Ref.Ref<number>) => Effect.Effect<A, E, Services>,
  backend: "memory" | "sqlite" = "memory"
) =>
  Effect.gen(function*() {
    const runs = yield* Ref.make(0)
    emitted.length = 0
    const options = { scripts: SCRIPTS, tools: Toolkit.layer([deployTool(runs)]), telemetry: capture }
    return yield* Effect.scoped(body(runs)).pipe(
      Effect.provide(
        backend === "memory" ? Troupe.layerTest(options) : Troupe.layerSqlite({ filename: freshFile() }, options)
      )
    )
  })

// ---- log and waiting helpers ----

const callbackRecords = (log: ReadonlyArray<LogRecord>) => ({
  opened: log.flatMap((r) => (r.body._tag === "callback_opened" ? [r.body as CallbackOpened] : [])),
  resolved: log.flatMap((r) => (r.body._tag === "callback_resolved" ? [r.body as CallbackResolved] : []))
})

const toolStart = (log: ReadonlyArray<LogRecord>, name: string) =>
  log.flatMap((r) =>
    r.body._tag === "operation_started" && r.body.kind === "tool" && r.body.name === name
      ? [r.body as OperationStarted]
      : []
  )

/** Waits until the session has `count` open callbacks (no clock moves) and returns them. */
const openCallbacks = (who: Principal, sessionId: SessionId, count = 1) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    yield* eventually(
      Effect.map(sessions.callbacks(who, sessionId), (open) => open.length >= count),
      `${count} open callback(s) on ${sessionId}`
    )
    return yield* sessions.callbacks(who, sessionId)
  })

/** Lets background fibers run for a while without moving the clock. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 500; i++) yield* Effect.yieldNow()
})

/**
 * Starts a turn and returns its id. A child takes no message from outside
 * (`ChildControlForbidden`): its turn is admitted as its parent's tools do,
 * straight into its inbox, and found by its `turn_started` record.
 */
const start = (who: Principal, sessionId: SessionId, text = "go") =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    if ((yield* store.get(sessionId)).parentId === null) {
      const accepted = yield* Effect.flatMap(Sessions, (sessions) => sessions.send(who, sessionId, { text }))
      assert.strictEqual(accepted.disposition, "started")
      return accepted.turnId!
    }
    const command = new Message({ inputId: yield* makeInputId, text })
    yield* store.push(sessionId, command)
    yield* Effect.flatMap(SessionHost, (host) => host.wake(sessionId))
    yield* eventually(
      Effect.map(logOf(sessionId), (log) => log.some((r) => r.body._tag === "turn_started" && r.body.inputId === command.inputId)),
      "the child's turn to start"
    )
    const log = yield* logOf(sessionId)
    const started = log.find((r) => r.body._tag === "turn_started" && r.body.inputId === command.inputId)!
    return (started.body as TurnStarted).turnId
  })

const awaitOutput = (who: Principal, sessionId: SessionId, turnId: TurnId) =>
  Effect.flatMap(Sessions, (sessions) => sessions.awaitTurn(who, sessionId, turnId)).pipe(
    Effect.map((result) => result.output)
  )

/** A parent session (agent `worker`) and a child (agent `helper`) created through the store. */
const family = (who: Principal) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const store = yield* SessionStore
    const parent = yield* sessions.create(who, { agent: agentNamed("worker") })
    const child = yield* store.create({ principal: who, agent: agentNamed("helper"), parentId: parent.id, alias: "kid" })
    return { parent: parent.id, child: child.id }
  })

/** A provider that records whom it was asked about (by `label`) and answers with `answer`. */
const recording = (
  asked: Ref.Ref<ReadonlyArray<string>>,
  label: string,
  answer: (callback: PendingCallback) => Option.Option<AnswerOf>
) =>
(callback: PendingCallback) =>
  // Typed as any kind's answer, so one helper serves providers of either kind: the broker checks answers at run time.
  Effect.as(Ref.update(asked, (all) => [...all, `${label}:${callback.callbackId}`]), answer(callback) as Option.Option<never>)

class Boom extends Data.TaggedError("Boom")<{ readonly why: string }> {}

describe("Callbacks", () => {
  describe("manual answers", () => {
    it.effect("an approval callback is listed with its request and place, and a manual approval completes the turn", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          const started = toolStart(yield* logOf(session.id), "deploy")
          assert.strictEqual(started.length, 1)

          assert.strictEqual(pending!.kind, "approval")
          assert.strictEqual(pending!.request._tag, "approval")
          assert.strictEqual(pending!.request.toolName, "deploy")
          assert.strictEqual(pending!.request.callId, "c1")
          assert.strictEqual(pending!.request.arguments, "{}")
          assert.strictEqual(pending!.sessionId, session.id)
          assert.isNull(pending!.parentSessionId)
          assert.deepStrictEqual(pending!.agentPath, ["worker"])
          assert.strictEqual(pending!.turnId, turnId)
          assert.strictEqual(pending!.operationId, started[0]!.operationId)
          // The turn is parked on the callback: nothing ran yet, the session waits.
          assert.strictEqual(yield* Ref.get(runs), 0)
          assert.strictEqual((yield* sessions.get(who, session.id)).status, "waiting")
          assert.strictEqual((yield* sessions.snapshot(who, session.id)).openCallbacks, 1)

          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
          assert.deepStrictEqual(yield* sessions.callbacks(who, session.id), [])

          const { opened, resolved } = callbackRecords(yield* logOf(session.id))
          assert.strictEqual(opened.length, 1)
          assert.strictEqual(opened[0]!.callbackId, pending!.callbackId)
          assert.strictEqual(opened[0]!.kind, "approval")
          assert.strictEqual(opened[0]!.operationId, pending!.operationId)
          assert.strictEqual(resolved.length, 1)
          assert.strictEqual(resolved[0]!.callbackId, pending!.callbackId)
          assert.strictEqual(resolved[0]!.resolution, "answered")
          assert.deepStrictEqual(resolved[0]!.result, approve)
        })
      ))

    it.effect("a client_tool callback carries the call, and its answer is the tool's result", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("browser") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          assert.strictEqual(pending!.kind, "client_tool")
          assert.strictEqual(pending!.request._tag, "client_tool")
          assert.strictEqual(pending!.request.toolName, "lookup")
          assert.strictEqual(pending!.request.callId, "k1")
          assert.strictEqual(pending!.request.arguments, "{\"q\":\"weather\"}")
          assert.deepStrictEqual(pending!.agentPath, ["browser"])

          yield* sessions.answerCallback(who, session.id, {
            callbackId: pending!.callbackId,
            turnId,
            operationId: pending!.operationId,
            result: { output: { forecast: "sunny" } }
          })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "looked")
          const log = yield* logOf(session.id)
          const completed = log.flatMap((r) =>
            r.body._tag === "operation_completed" && r.body.operationId === pending!.operationId ? [r.body] : []
          )
          assert.strictEqual(completed.length, 1)
          assert.deepStrictEqual(completed[0]!.output, { forecast: "sunny" })
          assert.isFalse(completed[0]!.isError)
          const { resolved } = callbackRecords(log)
          assert.deepStrictEqual(resolved.map((r) => r.resolution), ["answered"])
        })
      ))
  })

  describe("first answer wins", () => {
    it.effect("of two concurrent answers exactly one is admitted; the other and a later third are stale", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          const answer = (decision: "approve" | "deny") =>
            sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { decision } })

          const [first, second] = yield* Effect.all([Effect.either(answer("approve")), Effect.either(answer("deny"))], {
            concurrency: "unbounded"
          })
          const outcomes = [first, second]
          assert.strictEqual(outcomes.filter((o) => o._tag === "Right").length, 1, "exactly one answer is admitted")
          const loser = outcomes.find((o) => o._tag === "Left")!
          assert.strictEqual(loser._tag, "Left")
          if (loser._tag === "Left") {
            assert.strictEqual(loser.left._tag, "StaleCallback")
            if (loser.left._tag === "StaleCallback") {
              assert.include(["answered", "not_open"], loser.left.reason)
              assert.strictEqual(loser.left.callbackId, pending!.callbackId)
              assert.strictEqual(loser.left.sessionId, session.id)
            }
          }
          const winner = first._tag === "Right" ? "approve" : "deny"

          const output = yield* awaitOutput(who, session.id, turnId)
          assert.strictEqual(output, "done")
          assert.strictEqual(yield* Ref.get(runs), winner === "approve" ? 1 : 0)

          const third = yield* failure(answer("approve"), "StaleCallback")
          assert.include(["answered", "not_open"], third.reason)
          const { resolved } = callbackRecords(yield* logOf(session.id))
          assert.strictEqual(resolved.length, 1, "one resolution only")
          assert.deepStrictEqual(resolved[0]!.result, { decision: winner })
        })
      ))

    it.effect("an answer naming another turn or operation is stale (mismatch) and resolves nothing", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          const callbackId = pending!.callbackId

          const wrongTurn = yield* failure(
            sessions.answerCallback(who, session.id, { callbackId, turnId: yield* makeTurnId, result: approve }),
            "StaleCallback"
          )
          assert.strictEqual(wrongTurn.reason, "mismatch")
          assert.strictEqual(wrongTurn.callbackId, callbackId)
          const wrongOperation = yield* failure(
            sessions.answerCallback(who, session.id, {
              callbackId,
              turnId,
              operationId: yield* makeOperationId,
              result: approve
            }),
            "StaleCallback"
          )
          assert.strictEqual(wrongOperation.reason, "mismatch")

          yield* settle
          assert.deepStrictEqual(callbackRecords(yield* logOf(session.id)).resolved, [])
          assert.deepStrictEqual((yield* sessions.callbacks(who, session.id)).map((c) => c.callbackId), [callbackId])
          assert.deepStrictEqual(yield* store.readInbox(session.id), [])
          assert.strictEqual(yield* Ref.get(runs), 0)

          // The right turn and operation are admitted.
          yield* sessions.answerCallback(who, session.id, {
            callbackId,
            turnId,
            operationId: pending!.operationId,
            result: approve
          })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("an answer to an unknown callback id is stale (not_open)", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          const unknown = yield* makeCallbackId
          const stale = yield* failure(
            sessions.answerCallback(who, session.id, { callbackId: unknown, result: approve }),
            "StaleCallback"
          )
          assert.strictEqual(stale.reason, "not_open")
          assert.strictEqual(stale.callbackId, unknown)
          // Another session's callback id is unknown here too.
          const other = yield* sessions.create(who, { agent: agentNamed("worker") })
          const elsewhere = yield* failure(
            sessions.answerCallback(who, other.id, { callbackId: pending!.callbackId, result: approve }),
            "StaleCallback"
          )
          assert.strictEqual(elsewhere.reason, "not_open")
          assert.deepStrictEqual(callbackRecords(yield* logOf(session.id)).resolved, [])
          assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1)
        })
      ))

    it.effect("an approval answer of the wrong shape is InvalidInput and the callback stays open", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          for (const result of [{ decision: "maybe" }, {}, "approve", null, { output: "x" }]) {
            const invalid = yield* failure(
              sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result }),
              "InvalidInput"
            )
            assert.strictEqual(invalid.what, "callback answer", JSON.stringify(result))
            // Said plainly (a CLI prints it as it is): what an approval answer is, not the schema's tree.
            assert.strictEqual(
              invalid.reason,
              `not an approval answer: expected { decision: "approve" | "approve_session" | "deny", reason?: string }`
            )
          }
          yield* settle
          assert.deepStrictEqual(yield* store.readInbox(session.id), [], "nothing was admitted")
          assert.deepStrictEqual(callbackRecords(yield* logOf(session.id)).resolved, [])
          assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1)
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    const badClientAnswers: ReadonlyArray<readonly [string, unknown]> = [
      ["{}", {}],
      ["{ isError: true } (no output)", { isError: true }],
      ["{ output, isError: \"no\" }", { output: "x", isError: "no" }],
      ["an approval answer", approve]
    ]
    for (const [label, result] of badClientAnswers) {
      it.effect(`a client_tool answer of the wrong shape (${label}) is InvalidInput and the callback stays open`, () =>
        onTestRuntime(() =>
          Effect.gen(function*() {
            const sessions = yield* Sessions
            const store = yield* SessionStore
            const who = principal()
            const session = yield* sessions.create(who, { agent: agentNamed("browser") })
            const turnId = yield* start(who, session.id)
            const [pending] = yield* openCallbacks(who, session.id)
            const invalid = yield* failure(
              sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result }),
              "InvalidInput"
            )
            assert.strictEqual(invalid.what, "callback answer")
            yield* settle
            assert.deepStrictEqual(yield* store.readInbox(session.id), [], "nothing was admitted")
            assert.deepStrictEqual(callbackRecords(yield* logOf(session.id)).resolved, [])
            assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1)
            yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { output: "ok" } })
            assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "looked")
          })
        ))
    }
  })

  describe("providers", () => {
    it.effect("a provider answers automatically, receiving the typed PendingCallback", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const seen = yield* Ref.make<ReadonlyArray<PendingCallback>>([])
          yield* sessions.provideCallbacks(who, session.id, ["approval", "client_tool"], (callback) =>
            Effect.as(Ref.update(seen, (all) => [...all, callback]), Option.some(approve))).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)

          const log = yield* logOf(session.id)
          const [callback] = yield* Ref.get(seen)
          assert.strictEqual((yield* Ref.get(seen)).length, 1)
          assert.strictEqual(callback!.kind, "approval")
          assert.strictEqual(callback!.request.toolName, "deploy")
          assert.strictEqual(callback!.request.callId, "c1")
          assert.strictEqual(callback!.sessionId, session.id)
          assert.isNull(callback!.parentSessionId)
          assert.deepStrictEqual(callback!.agentPath, ["worker"])
          assert.isUndefined(callback!.expiresAt, "no approval timeout, no expiry")
          assert.strictEqual(callback!.turnId, turnId)
          assert.strictEqual(callback!.operationId, toolStart(log, "deploy")[0]!.operationId)
          const { opened, resolved } = callbackRecords(log)
          assert.deepStrictEqual(opened.map((o) => o.callbackId), [callback!.callbackId])
          assert.deepStrictEqual(resolved.map((r) => [r.callbackId, r.resolution, r.result]), [
            [callback!.callbackId, "answered", approve]
          ])
        })
      ))

    it.effect("a provider's PendingCallback carries the approval's expiresAt, the one in its callback_opened record", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const agent = new Agent({ ...agentNamed("worker"), approvals: new ApprovalSettings({ timeoutMs: 60_000 }) })
          const session = yield* sessions.create(who, { agent })
          const seen = yield* Ref.make<ReadonlyArray<PendingCallback>>([])
          yield* sessions.provideCallbacks(who, session.id, ["approval"], (callback) =>
            Effect.as(Ref.update(seen, (all) => [...all, callback]), Option.some(approve))).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          const [callback] = yield* Ref.get(seen)
          const [opened] = callbackRecords(yield* logOf(session.id)).opened
          assert.isDefined(opened!.expiresAt)
          assert.strictEqual(callback!.expiresAt, opened!.expiresAt)
          assert.strictEqual(callback!.expiresAt, callback!.openedAt + 60_000)
        })
      ))

    it.effect("a provider sees only the kinds it serves", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const approvals = yield* sessions.create(who, { agent: agentNamed("worker") })
          const clients = yield* sessions.create(who, { agent: agentNamed("browser") })
          const seen = yield* Ref.make<ReadonlyArray<CallbackKind>>([])
          const clientOnly = (callback: PendingCallback) =>
            Effect.as(Ref.update(seen, (all) => [...all, callback.kind]), Option.some({ output: "from the client" }))
          yield* sessions.provideCallbacks(who, approvals.id, ["client_tool"], clientOnly).pipe(Effect.forkScoped)
          yield* sessions.provideCallbacks(who, clients.id, ["client_tool"], clientOnly).pipe(Effect.forkScoped)
          yield* settle

          // The approval is not offered to a client_tool provider: it stays open.
          const approvalTurn = yield* start(who, approvals.id)
          const [pending] = yield* openCallbacks(who, approvals.id)
          yield* settle
          assert.deepStrictEqual(yield* Ref.get(seen), [])
          assert.strictEqual((yield* sessions.callbacks(who, approvals.id)).length, 1)

          // A client tool call is.
          const clientTurn = yield* start(who, clients.id)
          assert.strictEqual(yield* awaitOutput(who, clients.id, clientTurn), "looked")
          assert.deepStrictEqual(yield* Ref.get(seen), ["client_tool"])

          yield* sessions.answerCallback(who, approvals.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, approvals.id, approvalTurn), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
          assert.deepStrictEqual(yield* Ref.get(seen), ["client_tool"])
        })
      ))

    it.effect("None passes the callback to the next provider; when all decline it stays open for a manual answer", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          // Two providers on one session, in registration order: the first declines, the second answers.
          const served = yield* sessions.create(who, { agent: agentNamed("worker") })
          yield* sessions.provideCallbacks(who, served.id, ["approval"], recording(asked, "first", () => Option.none()))
            .pipe(Effect.forkScoped)
          yield* settle
          yield* sessions.provideCallbacks(who, served.id, ["approval"], recording(asked, "second", () => Option.some(approve)))
            .pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, served.id)
          assert.strictEqual(yield* awaitOutput(who, served.id, turnId), "done")
          const [opened] = callbackRecords(yield* logOf(served.id)).opened
          assert.deepStrictEqual(yield* Ref.get(asked), [`first:${opened!.callbackId}`, `second:${opened!.callbackId}`])

          // One provider that declines: the callback stays open.
          yield* Ref.set(asked, [])
          const declined = yield* sessions.create(who, { agent: agentNamed("worker") })
          yield* sessions.provideCallbacks(who, declined.id, ["approval"], recording(asked, "only", () => Option.none()))
            .pipe(Effect.forkScoped)
          yield* settle
          const second = yield* start(who, declined.id)
          const [pending] = yield* openCallbacks(who, declined.id)
          yield* settle
          assert.deepStrictEqual(yield* Ref.get(asked), [`only:${pending!.callbackId}`])
          assert.strictEqual((yield* sessions.callbacks(who, declined.id)).length, 1)
          assert.deepStrictEqual(callbackRecords(yield* logOf(declined.id)).resolved, [])
          yield* sessions.answerCallback(who, declined.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, declined.id, second), "done")
          assert.strictEqual(yield* Ref.get(runs), 2)
        })
      ))

    it.effect("nearest first: the child's provider is asked before the parent's, and when it answers the parent is not asked", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const { child, parent } = yield* family(who)
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          // The parent registers first: order of registration does not beat nearness.
          yield* sessions.provideCallbacks(who, parent, ["approval"], recording(asked, "parent", () => Option.some(approve)))
            .pipe(Effect.forkScoped)
          yield* settle
          yield* sessions.provideCallbacks(
            who,
            child,
            ["approval"],
            recording(asked, "child", () => Option.some({ decision: "deny", reason: "not from the child" }))
          ).pipe(Effect.forkScoped)
          yield* settle

          const turnId = yield* start(who, child)
          assert.strictEqual(yield* awaitOutput(who, child, turnId), "helped")
          const log = yield* logOf(child)
          const { opened, resolved } = callbackRecords(log)
          assert.strictEqual(opened.length, 1)
          assert.deepStrictEqual(yield* Ref.get(asked), [`child:${opened[0]!.callbackId}`])
          assert.deepStrictEqual(resolved[0]!.result, { decision: "deny", reason: "not from the child" })
          assert.strictEqual(yield* Ref.get(runs), 0, "denied: the tool did not run")
          const deployDone = log.flatMap((r) =>
            r.body._tag === "operation_completed" && r.body.operationId === opened[0]!.operationId ? [r.body] : []
          )
          assert.deepStrictEqual(deployDone[0]!.output, { error: "denied by the user: not from the child" })
          assert.isTrue(deployDone[0]!.isError)
          // Nothing happened in the parent.
          assert.deepStrictEqual(callbackRecords(yield* logOf(parent)).opened, [])
        })
      ))

    it.effect("nearest first: when the child's provider declines, the parent's answers; PendingCallback knows its place", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const { child, parent } = yield* family(who)
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          const seen = yield* Ref.make<ReadonlyArray<PendingCallback>>([])
          yield* sessions.provideCallbacks(who, parent, ["approval"], (callback) =>
            Effect.zipRight(
              Ref.update(seen, (all) => [...all, callback]),
              recording(asked, "parent", () => Option.some(approve))(callback)
            )).pipe(Effect.forkScoped)
          yield* sessions.provideCallbacks(who, child, ["approval"], recording(asked, "child", () => Option.none()))
            .pipe(Effect.forkScoped)
          yield* settle

          const turnId = yield* start(who, child)
          assert.strictEqual(yield* awaitOutput(who, child, turnId), "helped")
          assert.strictEqual(yield* Ref.get(runs), 1)
          const [opened] = callbackRecords(yield* logOf(child)).opened
          assert.deepStrictEqual(yield* Ref.get(asked), [`child:${opened!.callbackId}`, `parent:${opened!.callbackId}`])
          const [callback] = yield* Ref.get(seen)
          assert.strictEqual(callback!.sessionId, child)
          assert.strictEqual(callback!.parentSessionId, parent)
          assert.deepStrictEqual(callback!.agentPath, ["worker", "helper"])
          assert.strictEqual(callback!.turnId, turnId)
          assert.strictEqual(callback!.operationId, opened!.operationId)
          assert.strictEqual(callback!.request.callId, "h1")
        })
      ))

    it.effect("a provider on the parent alone serves its child's callbacks; the child's list shows its place", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const { child, parent } = yield* family(who)

          // Without any provider the child's callback is listed on the child, with its place in the tree.
          const first = yield* start(who, child)
          const [pending] = yield* openCallbacks(who, child)
          assert.strictEqual(pending!.sessionId, child)
          assert.strictEqual(pending!.parentSessionId, parent)
          assert.deepStrictEqual(pending!.agentPath, ["worker", "helper"])
          assert.deepStrictEqual(yield* sessions.callbacks(who, parent), [])
          yield* sessions.answerCallback(who, child, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, child, first), "helped")

          // The parent's provider serves the child's next callback.
          const seen = yield* Ref.make<ReadonlyArray<SessionId>>([])
          yield* sessions.provideCallbacks(who, parent, ["approval"], (callback) =>
            Effect.as(Ref.update(seen, (all) => [...all, callback.sessionId]), Option.some(approve))).pipe(
              Effect.forkScoped
            )
          yield* settle
          // A second child of the same parent.
          const store = yield* SessionStore
          const other = yield* store.create({ principal: who, agent: agentNamed("helper"), parentId: parent })
          const third = yield* start(who, other.id)
          assert.strictEqual(yield* awaitOutput(who, other.id, third), "helped")
          assert.deepStrictEqual(yield* Ref.get(seen), [other.id])
          assert.strictEqual(yield* Ref.get(runs), 2)
        })
      ))

    it.effect("a provider on a grandparent serves a grandchild, after the nearer ones decline", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const who = principal()
          const { child, parent } = yield* family(who)
          const grandchild = yield* store.create({ principal: who, agent: agentNamed("browser"), parentId: child })
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          const seen = yield* Ref.make<ReadonlyArray<PendingCallback>>([])
          yield* sessions.provideCallbacks(who, parent, ["client_tool"], (callback) =>
            Effect.zipRight(
              Ref.update(seen, (all) => [...all, callback]),
              recording(asked, "root", () => Option.some({ output: "root answer" }))(callback)
            )).pipe(Effect.forkScoped)
          yield* sessions.provideCallbacks(who, child, ["client_tool"], recording(asked, "middle", () => Option.none()))
            .pipe(Effect.forkScoped)
          yield* sessions.provideCallbacks(who, grandchild.id, ["client_tool"], recording(asked, "leaf", () => Option.none()))
            .pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, grandchild.id)
          assert.strictEqual(yield* awaitOutput(who, grandchild.id, turnId), "looked")
          const [opened] = callbackRecords(yield* logOf(grandchild.id)).opened
          const id = opened!.callbackId
          assert.deepStrictEqual(yield* Ref.get(asked), [`leaf:${id}`, `middle:${id}`, `root:${id}`])
          const [callback] = yield* Ref.get(seen)
          assert.strictEqual(callback!.parentSessionId, child)
          assert.deepStrictEqual(callback!.agentPath, ["worker", "helper", "browser"])
        })
      ))
    it.effect("a provider serves its session's tree downwards only: a child's provider is not offered the parent's callbacks", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const { child, parent } = yield* family(who)
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          yield* sessions.provideCallbacks(who, child, ["approval"], recording(asked, "child", () => Option.some(approve)))
            .pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, parent)
          const [pending] = yield* openCallbacks(who, parent)
          yield* settle
          assert.deepStrictEqual(yield* Ref.get(asked), [])
          assert.strictEqual((yield* sessions.callbacks(who, parent)).length, 1)
          yield* sessions.answerCallback(who, parent, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, parent, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("a provider's answer of the wrong shape ends it with InvalidCallbackAnswer, counted; the callback stays open", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          // A cast stands for plain JavaScript, or an answer built from untyped data: the types would refuse it.
          const sloppy = recording(asked, "sloppy", () => Option.some({ decision: "maybe" } as unknown as AnswerOf))
          const provider = yield* sessions.provideCallbacks(who, session.id, ["approval"], sloppy).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          const error = yield* failure(Fiber.join(provider), "InvalidCallbackAnswer")
          assert.strictEqual(error.callbackId, pending!.callbackId)
          assert.strictEqual(error.sessionId, session.id)
          assert.strictEqual(error.kind, "approval")
          assert.include(error.message, pending!.callbackId)
          assert.deepStrictEqual(emitted.filter((e) => e.event === "provider.failed"), [
            { event: "provider.failed", category: "invalid_input", status: 400 }
          ])
          yield* settle
          assert.deepStrictEqual(yield* store.readInbox(session.id), [])
          assert.deepStrictEqual(callbackRecords(yield* logOf(session.id)).resolved, [])
          assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1)
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("a manual answer while a provider is still deciding wins; the provider's late answer is dropped", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const asked = yield* Ref.make(0)
          const release = yield* Effect.makeLatch(false)
          const provider = yield* sessions.provideCallbacks(who, session.id, ["approval"], () =>
            Effect.zipRight(
              Ref.update(asked, (n) => n + 1),
              Effect.as(release.await, Option.some({ decision: "deny" as const, reason: "too late" }))
            )).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          yield* eventually(Effect.map(Ref.get(asked), (n) => n === 1), "the provider to be asked")
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          yield* release.open
          yield* settle
          const { resolved } = callbackRecords(yield* logOf(session.id))
          assert.deepStrictEqual(resolved.map((r) => r.result), [approve])
          assert.strictEqual(yield* Ref.get(runs), 1)
          // A dropped late answer does not end the provider.
          assert.isNull(provider.unsafePoll())
        })
      ))
  })

  describe("typed handlers (CallbackHandlers)", () => {
    // `lookup` as its client knows it: a typed success, encoded on the way out (a number is sent as a string).
    const forecast = Tool.make({
      name: "lookup",
      description: "Looks something up on the client.",
      parameters: Schema.Struct({ q: Schema.String }),
      success: Schema.Struct({ degrees: Schema.NumberFromString })
    })
    const outputs = (log: ReadonlyArray<LogRecord>) =>
      log.flatMap((r) => (r.body._tag === "operation_completed" ? [r.body.output] : []))

    it.effect("a client tool's handler gets its decoded arguments, and its success is encoded with the tool's schema", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("browser") })
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          const { handler, kinds } = CallbackHandlers.make({
            clientTools: [
              CallbackHandlers.clientTool(forecast, (args) =>
                Effect.as(Ref.update(asked, (all) => [...all, args.q]), Option.some({ degrees: 21 })))
            ]
          })
          assert.deepStrictEqual(kinds, ["client_tool"])
          yield* sessions.provideCallbacks(who, session.id, kinds, handler).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "looked")
          assert.deepStrictEqual(yield* Ref.get(asked), ["weather"])
          assert.deepInclude(outputs(yield* logOf(session.id)), { degrees: "21" })
        })
      ))

    it.effect("a client tool's result that is not its success ends the provider with InvalidCallbackAnswer naming the tool", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("browser") })
          const { handler, kinds } = CallbackHandlers.make({
            clientTools: [
              CallbackHandlers.clientTool(forecast, () => Effect.succeed(Option.some({ degrees: "hot" } as unknown as { degrees: number })))
            ]
          })
          const provider = yield* sessions.provideCallbacks(who, session.id, kinds, handler).pipe(Effect.forkScoped)
          yield* settle
          yield* start(who, session.id)
          const error = yield* failure(Fiber.join(provider), "InvalidCallbackAnswer")
          assert.strictEqual(error.kind, "client_tool")
          assert.strictEqual(error.toolName, "lookup")
          assert.include(error.message, "lookup")
          assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1, "the callback stays open")
        })
      ))
  })

  describe("provider failures and withdrawal", () => {
    it.effect("a failing handler ends its provider with the error; the callback stays open and a manual answer works", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const fiber = yield* sessions.provideCallbacks(who, session.id, ["approval"], () =>
            Effect.fail(new Boom({ why: "provider broke" }))).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          const exit = yield* Fiber.await(fiber)
          assert.isTrue(Exit.isFailure(exit))
          const error = yield* failure(Fiber.join(fiber), "Boom")
          assert.strictEqual(error.why, "provider broke")

          const [pending] = yield* openCallbacks(who, session.id)
          yield* settle
          assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1)
          assert.deepStrictEqual(callbackRecords(yield* logOf(session.id)).resolved, [])
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("after a provider fails, the next provider in line answers the same callback", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const { child, parent } = yield* family(who)
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          const failing = yield* sessions.provideCallbacks(who, child, ["approval"], (callback) =>
            Effect.zipRight(
              Ref.update(asked, (all) => [...all, `child:${callback.callbackId}`]),
              Effect.fail(new Boom({ why: "child provider broke" }))
            )).pipe(Effect.forkScoped)
          yield* sessions.provideCallbacks(who, parent, ["approval"], recording(asked, "parent", () => Option.some(approve)))
            .pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, child)
          assert.strictEqual(yield* awaitOutput(who, child, turnId), "helped")
          assert.strictEqual((yield* failure(Fiber.join(failing), "Boom")).why, "child provider broke")
          const [opened] = callbackRecords(yield* logOf(child)).opened
          assert.deepStrictEqual(yield* Ref.get(asked), [`child:${opened!.callbackId}`, `parent:${opened!.callbackId}`])
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("a provider registered after another failed is offered the callback that is still open", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const failing = yield* sessions.provideCallbacks(who, session.id, ["approval"], () =>
            Effect.fail(new Boom({ why: "once" }))).pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          yield* failure(Fiber.join(failing), "Boom")
          yield* sessions.provideCallbacks(who, session.id, ["approval"], () => Effect.succeed(Option.some(approve)))
            .pipe(Effect.forkScoped)
          assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))

    it.effect("closing a provider's scope stops dispatch to it and closes no callback", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const calls = yield* Ref.make(0)
          const scope = yield* Scope.make()
          const fiber = yield* sessions.provideCallbacks(who, session.id, ["approval"], () =>
            Effect.as(Ref.update(calls, (n) => n + 1), Option.some(approve))).pipe(Effect.forkIn(scope))
          yield* settle
          // It serves while its scope is open...
          const first = yield* start(who, session.id)
          assert.strictEqual(yield* awaitOutput(who, session.id, first), "done")
          assert.strictEqual(yield* Ref.get(calls), 1)

          // ...and not after.
          yield* Scope.close(scope, Exit.void)
          assert.isTrue(Exit.isInterrupted(yield* Fiber.await(fiber)))
          const second = yield* start(who, session.id, "again")
          const [pending] = yield* openCallbacks(who, session.id)
          yield* settle
          assert.strictEqual(yield* Ref.get(calls), 1, "the withdrawn provider was not asked")
          assert.strictEqual((yield* sessions.callbacks(who, session.id)).length, 1)
          assert.strictEqual(pending!.request.callId, "c2")
          assert.strictEqual(callbackRecords(yield* logOf(session.id)).resolved.length, 1)
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, session.id, second), "done again")
          assert.strictEqual(yield* Ref.get(runs), 2)
        })
      ))

    it.effect("interrupting a provider while it is asked leaves the callback open for the next one", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const { child, parent } = yield* family(who)
          const asked = yield* Ref.make<ReadonlyArray<string>>([])
          // The child's provider never answers: it hangs in its handler.
          const hanging = yield* sessions.provideCallbacks(who, child, ["approval"], (callback) =>
            Effect.zipRight(Ref.update(asked, (all) => [...all, `child:${callback.callbackId}`]), Effect.never))
            .pipe(Effect.forkScoped)
          yield* sessions.provideCallbacks(who, parent, ["approval"], recording(asked, "parent", () => Option.some(approve)))
            .pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, child)
          const [pending] = yield* openCallbacks(who, child)
          yield* settle
          assert.deepStrictEqual(yield* Ref.get(asked), [`child:${pending!.callbackId}`])
          yield* Fiber.interrupt(hanging)
          assert.strictEqual(yield* awaitOutput(who, child, turnId), "helped")
          assert.deepStrictEqual(yield* Ref.get(asked), [`child:${pending!.callbackId}`, `parent:${pending!.callbackId}`])
          assert.strictEqual(yield* Ref.get(runs), 1)
        })
      ))
  })

  for (const backend of ["memory", "sqlite"] as const) {
    describe(`late registration (${backend} store)`, () => {
      it.effect("a provider registered after the callback opened is offered it", () =>
        onTestRuntime((runs) =>
          Effect.gen(function*() {
            const sessions = yield* Sessions
            const who = principal()
            const session = yield* sessions.create(who, { agent: agentNamed("worker") })
            const turnId = yield* start(who, session.id)
            const [pending] = yield* openCallbacks(who, session.id)
            yield* settle
            const seen = yield* Ref.make<ReadonlyArray<CallbackId>>([])
            yield* sessions.provideCallbacks(who, session.id, ["approval"], (callback) =>
              Effect.as(Ref.update(seen, (all) => [...all, callback.callbackId]), Option.some(approve))).pipe(
                Effect.forkScoped
              )
            assert.strictEqual(yield* awaitOutput(who, session.id, turnId), "done")
            assert.deepStrictEqual(yield* Ref.get(seen), [pending!.callbackId])
            assert.strictEqual(yield* Ref.get(runs), 1)
          }), backend)
      )

      it.effect("a provider registered on the parent is offered what is already open in its children", () =>
        onTestRuntime((runs) =>
          Effect.gen(function*() {
            const sessions = yield* Sessions
            const who = principal()
            const { child, parent } = yield* family(who)
            const turnId = yield* start(who, child)
            const [pending] = yield* openCallbacks(who, child)
            yield* settle
            const seen = yield* Ref.make<ReadonlyArray<PendingCallback>>([])
            yield* sessions.provideCallbacks(who, parent, ["approval"], (callback) =>
              Effect.as(Ref.update(seen, (all) => [...all, callback]), Option.some(approve))).pipe(Effect.forkScoped)
            assert.strictEqual(yield* awaitOutput(who, child, turnId), "helped")
            const offered = yield* Ref.get(seen)
            assert.deepStrictEqual(offered.map((c) => c.callbackId), [pending!.callbackId])
            assert.strictEqual(offered[0]!.parentSessionId, parent)
            assert.strictEqual(yield* Ref.get(runs), 1)
          }), backend)
      )
    })
  }

  describe("cancellation", () => {
    it.effect("interrupting a turn that waits on a callback cancels it; a later answer is stale (cancelled)", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          const outcome = yield* sessions.interrupt(who, session.id, turnId, "changed my mind")
          assert.strictEqual(outcome.outcome, "interrupted")
          const interrupted = yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnInterrupted")
          assert.strictEqual(interrupted.reason, "changed my mind")

          const log = yield* logOf(session.id)
          const { resolved } = callbackRecords(log)
          assert.deepStrictEqual(resolved.map((r) => [r.callbackId, r.turnId, r.resolution]), [
            [pending!.callbackId, turnId, "cancelled"]
          ])
          // Recorded with the interruption, before the turn's end.
          const resolvedAt = log.findIndex((r) => r.body._tag === "callback_resolved")
          const endedAt = log.findIndex((r) => r.body._tag === "turn_ended")
          assert.isTrue(resolvedAt >= 0 && resolvedAt < endedAt)
          assert.deepStrictEqual(yield* sessions.callbacks(who, session.id), [])
          assert.strictEqual((yield* sessions.get(who, session.id)).status, "idle")

          const stale = yield* failure(
            sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: approve }),
            "StaleCallback"
          )
          assert.strictEqual(stale.reason, "cancelled")
          assert.strictEqual(yield* Ref.get(runs), 0)
        })
      ))

    it.effect("interrupting a turn withdraws its callback from a provider still being asked", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const asked = yield* Ref.make(0)
          const release = yield* Effect.makeLatch(false)
          // The provider answers only once the test lets it: after the interrupt.
          yield* sessions.provideCallbacks(who, session.id, ["approval"], () =>
            Effect.zipRight(Ref.update(asked, (n) => n + 1), Effect.as(release.await, Option.some(approve))))
            .pipe(Effect.forkScoped)
          yield* settle
          const turnId = yield* start(who, session.id)
          yield* eventually(Effect.map(Ref.get(asked), (n) => n === 1), "the provider to be asked")
          yield* sessions.interrupt(who, session.id, turnId)
          yield* release.open
          yield* settle
          const { resolved } = callbackRecords(yield* logOf(session.id))
          assert.deepStrictEqual(resolved.map((r) => r.resolution), ["cancelled"])
          assert.deepStrictEqual(endsOf(yield* logOf(session.id)).map((e) => e.outcome), ["interrupted"])
          assert.strictEqual(yield* Ref.get(runs), 0)
        })
      ))

    it.effect("closing a session cancels the callback its turn waits on", () =>
      onTestRuntime(() =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("browser") })
          const turnId = yield* start(who, session.id)
          const [pending] = yield* openCallbacks(who, session.id)
          yield* sessions.close(who, session.id)
          yield* failure(sessions.awaitTurn(who, session.id, turnId), "TurnInterrupted")
          const { resolved } = callbackRecords(yield* logOf(session.id))
          assert.deepStrictEqual(resolved.map((r) => [r.callbackId, r.resolution]), [[pending!.callbackId, "cancelled"]])
          assert.deepStrictEqual(yield* sessions.callbacks(who, session.id), [])
          yield* failure(
            sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { output: "late" } }),
            "SessionClosed"
          )
        })
      ))
  })

  describe("restarts on a SQLite file", () => {
    const options = (owner: string, runs: Ref.Ref<number>, scripts: ScriptedModel.Scripts): Troupe.RuntimeOptions => ({
      scripts,
      tools: Toolkit.layer([deployTool(runs)]),
      host: { leaseTtl: "2 seconds", owner }
    })

    /** Host A runs a turn on `file` until its approval callback is open, then its layer is closed. */
    const hostA = (file: string, crash: boolean, runs: Ref.Ref<number>) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const opts = options("host-a", runs, SCRIPTS)
        const runtime = crash
          ? Troupe.layer(neverReleases(SqliteSessionStore.layer({ filename: file })), opts)
          : Troupe.layerSqlite({ filename: file }, opts)
        const context = yield* Layer.buildWithScope(runtime, scope)
        const left = yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: agentNamed("worker") })
          const turnId = yield* start(who, session.id)
          yield* collectUntil(sessions.events(who, session.id), (r) => r._tag === "callback_opened")
          const [pending] = yield* sessions.callbacks(who, session.id)
          return { who, sessionId: session.id, turnId, callbackId: pending!.callbackId }
        }).pipe(Effect.provide(context))
        yield* Scope.close(scope, Exit.void)
        return left
      })

    for (const crash of [false, true]) {
      it.effect(
        crash
          ? "after host A crashes with an approval open, host B waits out the lease, its provider answers, the turn completes"
          : "after host A shuts down with an approval open, host B's provider answers it and the turn completes on B",
        () =>
          Effect.gen(function*() {
            const file = freshFile()
            const runs = yield* Ref.make(0)
            const { callbackId, sessionId, turnId, who } = yield* hostA(file, crash, runs)
            assert.strictEqual(yield* Ref.get(runs), 0)
            // B's model has only the final reply: the first model call must be reused from A's receipt.
            const scriptsB: ScriptedModel.Scripts = { agents: { worker: ["done"] } }
            yield* Effect.gen(function*() {
              const sessions = yield* Sessions
              const store = yield* SessionStore
              const host = yield* SessionHost
              // Shutting down (or crashing) closed nothing: the callback is still open.
              assert.deepStrictEqual((yield* store.openCallbacks(sessionId)).map((c) => c.callbackId), [callbackId])
              assert.strictEqual((yield* store.get(sessionId)).activeTurnId, turnId)
              const seen = yield* Ref.make<ReadonlyArray<PendingCallback>>([])
              yield* sessions.provideCallbacks(who, sessionId, ["approval"], (callback) =>
                Effect.as(Ref.update(seen, (all) => [...all, callback]), Option.some(approve))).pipe(Effect.forkScoped)
              if (crash) {
                for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
                assert.deepStrictEqual(yield* host.running, [], "host A's lease still stands")
                assert.deepStrictEqual(endsOf(yield* logOf(sessionId)), [])
                // The lease's TTL, and one claim tick of a host on a shared file (a second, ±25 %) after it.
                yield* TestClock.adjust("3300 millis")
              }
              assert.strictEqual(yield* awaitOutput(who, sessionId, turnId), "done")
              assert.strictEqual(yield* Ref.get(runs), 1, "the tool ran exactly once")
              const offered = yield* Ref.get(seen)
              assert.deepStrictEqual(offered.map((c) => c.callbackId), [callbackId], "offered once")
              assert.strictEqual(offered[0]!.turnId, turnId)
              const log = yield* logOf(sessionId)
              const { opened, resolved } = callbackRecords(log)
              assert.deepStrictEqual(opened.map((o) => o.callbackId), [callbackId], "not opened again")
              assert.deepStrictEqual(resolved.map((r) => [r.callbackId, r.resolution, r.result]), [
                [callbackId, "answered", approve]
              ])
              assert.strictEqual(toolStart(log, "deploy").length, 1)
              assert.deepStrictEqual(endsOf(log).map((e) => [e.turnId, e.outcome, e.output]), [[turnId, "completed", "done"]])
              assert.deepStrictEqual(yield* store.openCallbacks(sessionId), [])
            }).pipe(
              Effect.scoped,
              Effect.provide(Troupe.layerSqlite({ filename: file }, options("host-b", runs, scriptsB)))
            )
          }),
        { timeout: 20_000 }
      )
    }

    it.effect("while a crashed host's lease stands, the first of two conflicting answers is accepted and later applied; the second is StaleCallback (answered) at once", () =>
      Effect.gen(function*() {
        const file = freshFile()
        const runs = yield* Ref.make(0)
        const { callbackId, sessionId, turnId, who } = yield* hostA(file, true, runs)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const host = yield* SessionHost
          // No actor can run yet (A's lease stands): the first answer is accepted, not applied.
          yield* sessions.answerCallback(who, sessionId, { callbackId, result: approve })
          assert.deepStrictEqual(yield* host.running, [], "host A's lease still stands")
          const second = yield* failure(
            sessions.answerCallback(who, sessionId, { callbackId, result: { decision: "deny" } }),
            "StaleCallback"
          )
          assert.deepStrictEqual([second.sessionId, second.callbackId, second.reason], [sessionId, callbackId, "answered"])
          assert.deepStrictEqual((yield* store.readInbox(sessionId)).map((i) => i.command._tag), ["callback_answer"])
          assert.deepStrictEqual(endsOf(yield* logOf(sessionId)), [])

          // Once the lease expires (and B's next claim tick comes), B takes the session over and applies the answer it accepted.
          yield* TestClock.adjust("3300 millis")
          assert.strictEqual(yield* awaitOutput(who, sessionId, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1, "approved: the tool ran once")
          const log = yield* logOf(sessionId)
          assert.deepStrictEqual(callbackRecords(log).resolved.map((r) => [r.callbackId, r.resolution, r.result]), [
            [callbackId, "answered", approve]
          ])
          const answers = log.flatMap((r) =>
            r.body._tag === "input_applied" && r.body.kind === "callback_answer" ? [r.body] : []
          )
          assert.strictEqual(answers.length, 1, "the refused answer never reached the log")
          assert.isUndefined(answers[0]!.detail)
        }).pipe(
          Effect.scoped,
          Effect.provide(Troupe.layerSqlite({ filename: file }, options("host-b", runs, { agents: { worker: ["done"] } })))
        )
      }), { timeout: 20_000 })

    it.effect("after a restart, a manual answer on host B resumes the turn", () =>
      Effect.gen(function*() {
        const file = freshFile()
        const runs = yield* Ref.make(0)
        const { callbackId, sessionId, turnId, who } = yield* hostA(file, false, runs)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const listed = yield* sessions.callbacks(who, sessionId)
          assert.deepStrictEqual(listed.map((c) => [c.callbackId, c.turnId, c.request.callId]), [[callbackId, turnId, "c1"]])
          yield* sessions.answerCallback(who, sessionId, { callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(who, sessionId, turnId), "done")
          assert.strictEqual(yield* Ref.get(runs), 1)
          const stale = yield* failure(sessions.answerCallback(who, sessionId, { callbackId, result: approve }), "StaleCallback")
          assert.include(["answered", "not_open"], stale.reason)
        }).pipe(
          Effect.provide(Troupe.layerSqlite({ filename: file }, options("host-b", runs, { agents: { worker: ["done"] } })))
        )
      }), { timeout: 20_000 })

    it.effect("after a restart, interrupting the resumed turn cancels its still-open callback", () =>
      Effect.gen(function*() {
        const file = freshFile()
        const runs = yield* Ref.make(0)
        const { callbackId, sessionId, turnId, who } = yield* hostA(file, false, runs)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const outcome = yield* sessions.interrupt(who, sessionId, turnId, "abandoned")
          assert.strictEqual(outcome.outcome, "interrupted")
          yield* failure(sessions.awaitTurn(who, sessionId, turnId), "TurnInterrupted")
          const { resolved } = callbackRecords(yield* logOf(sessionId))
          assert.deepStrictEqual(resolved.map((r) => [r.callbackId, r.resolution]), [[callbackId, "cancelled"]])
          assert.deepStrictEqual(yield* sessions.callbacks(who, sessionId), [])
          yield* failure(sessions.answerCallback(who, sessionId, { callbackId, result: approve }), "StaleCallback")
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(
          Effect.provide(Troupe.layerSqlite({ filename: file }, options("host-b", runs, { agents: { worker: ["done"] } })))
        )
      }), { timeout: 20_000 })
  })

  describe("tenancy", () => {
    it.effect("another workspace cannot list, answer or provide for a session's callbacks", () =>
      onTestRuntime((runs) =>
        Effect.gen(function*() {
          const sessions = yield* Sessions
          const store = yield* SessionStore
          const owner = principal()
          const stranger = principal()
          const { child, parent } = yield* family(owner)
          const turnId = yield* start(owner, child)
          const [pending] = yield* openCallbacks(owner, child)
          const strangerAsked = yield* Ref.make(0)
          const handler = () => Effect.as(Ref.update(strangerAsked, (n) => n + 1), Option.some(approve))

          for (const id of [child, parent]) {
            const listed = yield* failure(sessions.callbacks(stranger, id), "SessionNotFound")
            assert.strictEqual(listed.sessionId, id)
            const provided = yield* failure(sessions.provideCallbacks(stranger, id, ["approval"], handler), "SessionNotFound")
            assert.strictEqual(provided.sessionId, id)
          }
          const answered = yield* failure(
            sessions.answerCallback(stranger, child, {
              callbackId: pending!.callbackId,
              turnId,
              operationId: pending!.operationId,
              result: approve
            }),
            "SessionNotFound"
          )
          assert.strictEqual(answered.sessionId, child)

          yield* settle
          assert.strictEqual(yield* Ref.get(strangerAsked), 0)
          assert.deepStrictEqual(yield* store.readInbox(child), [])
          assert.deepStrictEqual(callbackRecords(yield* logOf(child)).resolved, [])
          assert.strictEqual((yield* sessions.callbacks(owner, child)).length, 1)
          assert.strictEqual(yield* Ref.get(runs), 0)

          // The owner still can.
          yield* sessions.answerCallback(owner, child, { callbackId: pending!.callbackId, result: approve })
          assert.strictEqual(yield* awaitOutput(owner, child, turnId), "helped")
        })
      ))
  })
})
