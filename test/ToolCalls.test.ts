/**
 * Tool policy and approvals end to end through `Sessions` (issue 15): every
 * permission layer (host, parent, agent, run) and that none lifts another's
 * denial, approval expiry on the TestClock (and after a restart, at the
 * deadline the log holds), a tool's dynamic `needsApproval`, approval mode
 * `never`, the `ToolContext` a handler gets, an interrupted turn interrupting
 * its handler's fiber, `parallel` tools running at once and recorded in the
 * model's order, and `terminal` tools ending the turn. The log
 * (`SessionStore.readLog`) and `awaitTurn` are the observable truth.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, Ref, Schema, Stream, TestClock } from "effect"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import { Agent, ModelRef, PermissionPolicy, SubagentRef } from "../src/schema/Agent.js"
import type { SessionId, TurnId } from "../src/schema/Ids.js"
import { ApprovalSettings } from "../src/schema/Policy.js"
import type { Principal } from "../src/schema/Principal.js"
import type { CallbackResolved, LogRecord, OperationCompleted, OperationStarted, TurnStarted } from "../src/schema/Record.js"
import * as Model from "../src/services/Model.js"
import { Sessions, type SendOptions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import type * as InProcessHost from "../src/actors/InProcessHost.js"
import { endsOfTurn, eventually, logOf } from "./support/actors.js"
import { failure, principal } from "./support/fixtures.js"
import { call, calls } from "./support/agentLoop.js"

// ---------------------------------------------------------------------------
// Tools and helpers

/** Counts its runs; `network` capability, `money` cost. */
const fetchTool = (runs: Ref.Ref<number>) =>
  Tool.make({
    name: "fetch",
    description: "Fetches a page.",
    parameters: Schema.Struct({}),
    success: Schema.Number,
    metadata: { sideEffect: "read", idempotency: "supported", capabilities: ["network"], costs: ["money"] },
    handler: () => Ref.updateAndGet(runs, (n) => n + 1)
  })

/** Pays `amount`; asks for an approval above 100 by itself. */
const payTool = (paid: Ref.Ref<ReadonlyArray<number>>) =>
  Tool.make({
    name: "pay",
    description: "Pays an amount.",
    parameters: Schema.Struct({ amount: Schema.Number }),
    success: Schema.String,
    metadata: { sideEffect: "external", idempotency: "unsupported" },
    needsApproval: ({ amount }) => amount > 100,
    handler: ({ amount }) => Effect.as(Ref.update(paid, (all) => [...all, amount]), `paid ${amount}`)
  })


const worker = (fields: Partial<ConstructorParameters<typeof Agent>[0]> = {}) =>
  new Agent({ name: "worker", instructions: "Work.", model: new ModelRef({ name: "scripted" }), ...fields })

/** Long leases and idle timeouts: tests that move the TestClock far do not race lease renewals. */
const patientHost = { leaseTtl: "1 day", idleTimeout: "1 day" } as const

const runtime = (
  scripts: ScriptedModel.Scripts,
  tools: ReadonlyArray<Tool.Tool<any, any, any, any, any, never>>,
  extra: { readonly host?: InProcessHost.Options; readonly agents?: ReadonlyArray<Agent>; readonly model?: Layer.Layer<Model.Model> } = {}
) =>
  Troupe.layerTest({
    scripts,
    tools: Toolkit.layer(tools),
    host: { ...patientHost, ...extra.host },
    ...(extra.agents === undefined ? {} : { agents: extra.agents }),
    ...(extra.model === undefined ? {} : { model: extra.model })
  })

const start = (who: Principal, sessionId: SessionId, text: string, run?: SendOptions["run"]) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const accepted = yield* sessions.send(who, sessionId, { text, ...(run === undefined ? {} : { run }) })
    assert.strictEqual(accepted.disposition, "started")
    return accepted.turnId!
  })

const ended = (sessionId: SessionId, turnId: TurnId) =>
  Effect.gen(function*() {
    yield* eventually(Effect.map(logOf(sessionId), (log) => endsOfTurn(log, turnId).length > 0), `turn ${turnId} to end`)
    return endsOfTurn(yield* logOf(sessionId), turnId)[0]!
  })

const openCallbacks = (who: Principal, sessionId: SessionId, count = 1) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    yield* eventually(Effect.map(sessions.callbacks(who, sessionId), (open) => open.length >= count), `${count} open callback(s)`)
    return yield* sessions.callbacks(who, sessionId)
  })

/** Lets other fibers run a little (no clock moves). */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
})

/** `[name, output, isError]` of each tool call of a log, in the order of their starts. */
const toolOutcomes = (log: ReadonlyArray<LogRecord>) => {
  const done = new Map<string, OperationCompleted>()
  for (const r of log) if (r.body._tag === "operation_completed") done.set(r.body.operationId, r.body)
  return log.flatMap((r) =>
    r.body._tag === "operation_started" && r.body.kind === "tool"
      ? [[r.body.name, done.get(r.body.operationId)?.output, done.get(r.body.operationId)?.isError] as const]
      : []
  )
}

const resolutions = (log: ReadonlyArray<LogRecord>) =>
  log.flatMap((r) => (r.body._tag === "callback_resolved" ? [r.body as CallbackResolved] : []))

const notAllowed = (tool: string, layer: string, rule: string) => ({
  error: `tool_not_allowed: ${tool} is denied by the ${layer} policy (${rule})`,
  code: "tool_not_allowed",
  layer,
  rule
})

const expiredOutput = {
  error: "approval_expired: nobody answered the approval in time; the call did not run",
  code: "approval_expired"
}

// ---------------------------------------------------------------------------

describe("tool policy", () => {
  describe("permission layers", () => {
    it.effect("the host's layer: neither the agent nor the run lifts its capability denial", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: worker({
              tools: [fetchTool(runs).spec],
              permissions: new PermissionPolicy({ default: "allow", rules: { fetch: "allow" } })
            })
          })
          const turnId = yield* start(who, session.id, "go", { permissions: { default: "allow", rules: { fetch: "allow" } } })
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "done")
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [
            ["fetch", notAllowed("fetch", "host", "capability:network"), true]
          ])
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(Effect.provide(runtime(
          { agents: { worker: [calls(call("c1", "fetch")), "done"] } },
          [fetchTool(runs)],
          { host: { toolPolicy: { capabilities: { network: "deny" } } } }
        )))
      }))

    it.effect("the agent's cost rule denies, and a run's `ask` on top of an agent's allow asks", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const costly = yield* sessions.create(who, {
            agent: worker({ tools: [fetchTool(runs).spec], permissions: new PermissionPolicy({ costs: { money: "deny" } }) })
          })
          const denied = yield* start(who, costly.id, "go", { permissions: { rules: { fetch: "allow" } } })
          yield* sessions.awaitTurn(who, costly.id, denied)
          assert.deepStrictEqual(toolOutcomes(yield* logOf(costly.id)), [["fetch", notAllowed("fetch", "agent", "cost:money"), true]])

          const open = yield* sessions.create(who, { agent: worker({ tools: [fetchTool(runs).spec] }) })
          const asked = yield* start(who, open.id, "go", { permissions: { sideEffects: { read: "ask" } } })
          const [pending] = yield* openCallbacks(who, open.id)
          assert.strictEqual(pending!.kind, "approval")
          yield* sessions.answerCallback(who, open.id, { callbackId: pending!.callbackId, result: { decision: "approve" } })
          yield* sessions.awaitTurn(who, open.id, asked)
          assert.strictEqual(yield* Ref.get(runs), 1)
        }).pipe(Effect.provide(runtime(
          { agents: { worker: [calls(call("c1", "fetch")), "done"] } },
          [fetchTool(runs)]
        )))
      }))

    it.effect("a parent's deny binds its child, whose own agent allows the tool", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const child = worker({ tools: [fetchTool(runs).spec], permissions: new PermissionPolicy({ default: "allow", rules: { fetch: "allow" } }) })
        const lead = new Agent({
          name: "lead",
          instructions: "Delegate.",
          model: new ModelRef({ name: "scripted" }),
          subagents: [new SubagentRef({ name: "worker" })],
          permissions: new PermissionPolicy({ capabilities: { network: "deny" } })
        })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const root = yield* sessions.create(who, { agent: lead })
          const turnId = yield* start(who, root.id, "delegate")
          yield* sessions.awaitTurn(who, root.id, turnId)
          const spawned = toolOutcomes(yield* logOf(root.id)).find(([name]) => name === "agents.spawn")!
          const childId = (spawned[1] as { sessionId: SessionId }).sessionId
          const childLog = yield* Effect.gen(function*() {
            yield* eventually(Effect.map(logOf(childId), (log) => log.some((r) => r.body._tag === "turn_ended")), "the child's turn")
            return yield* logOf(childId)
          })
          assert.deepStrictEqual(toolOutcomes(childLog), [["fetch", notAllowed("fetch", "parent", "capability:network"), true]])
          // The parent's layers are frozen into the child's turn: a restart runs it under them too.
          const started = childLog.find((r) => r.body._tag === "turn_started")!.body as TurnStarted
          assert.deepStrictEqual(started.run?.inherited?.map((l) => [l.source, l.capabilities]), [["parent", { network: "deny" }]])
          assert.strictEqual(yield* Ref.get(runs), 0)
        }).pipe(Effect.provide(runtime(
          {
            agents: {
              lead: [calls(call("s1", "agents.spawn", { agent: "worker", message: "fetch it" })), "delegated"],
              worker: [calls(call("c1", "fetch")), "could not"]
            }
          },
          [fetchTool(runs)],
          { agents: [child] }
        )))
      }))
  })

  describe("approvals", () => {
    const askingWorker = (runs: Ref.Ref<number>, approvals?: ApprovalSettings) =>
      worker({
        tools: [fetchTool(runs).spec],
        permissions: new PermissionPolicy({ rules: { fetch: "ask" } }),
        ...(approvals === undefined ? {} : { approvals })
      })

    it.effect("an approval not answered within the agent's timeout expires: recorded, refused, a late answer is stale", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: askingWorker(runs, new ApprovalSettings({ timeoutMs: 60_000 })) })
          const turnId = yield* start(who, session.id, "go")
          const [pending] = yield* openCallbacks(who, session.id)
          const opened = (yield* logOf(session.id)).find((r) => r.body._tag === "callback_opened")!
          assert.strictEqual((opened.body as { expiresAt?: number }).expiresAt, 60_000)
          yield* settle
          yield* TestClock.adjust("59999 millis")
          yield* settle
          assert.lengthOf(yield* sessions.callbacks(who, session.id), 1, "still open a millisecond before the deadline")
          yield* TestClock.adjust("1 millis")
          const end = yield* ended(session.id, turnId)
          assert.strictEqual(end.outcome, "completed")
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(resolutions(log).map((r) => [r.callbackId, r.resolution]), [[pending!.callbackId, "expired"]])
          assert.deepStrictEqual(toolOutcomes(log), [["fetch", expiredOutput, true]])
          assert.strictEqual(yield* Ref.get(runs), 0)
          const late = yield* failure(
            sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { decision: "approve" } }),
            "StaleCallback"
          )
          assert.strictEqual(late.reason, "cancelled")
        }).pipe(Effect.provide(runtime({ agents: { worker: [calls(call("c1", "fetch")), "gave up"] } }, [fetchTool(runs)])))
      }))

    it.effect("an answer before the deadline wins; the run's timeout is over the agent's; nothing expires later", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: askingWorker(runs, new ApprovalSettings({ timeoutMs: 1_000 })) })
          const turnId = yield* start(who, session.id, "go", { approvals: { timeoutMs: 10_000 } })
          const [pending] = yield* openCallbacks(who, session.id)
          yield* settle
          yield* TestClock.adjust("5 seconds")
          yield* settle
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { decision: "approve" } })
          yield* ended(session.id, turnId)
          yield* TestClock.adjust("1 minute")
          yield* settle
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(resolutions(log).map((r) => r.resolution), ["answered"])
          assert.deepStrictEqual(toolOutcomes(log), [["fetch", 1, false]])
        }).pipe(Effect.provide(runtime({ agents: { worker: [calls(call("c1", "fetch")), "done"] } }, [fetchTool(runs)])))
      }))

    it.effect("the deadline is in the log: a fresh host over the same store expires the approval at the same moment", () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const store = yield* MemorySessionStore.make
        // One model for both hosts, so its script goes on where it was.
        const model = yield* ScriptedModel.make({ agents: { worker: [calls(call("c1", "fetch")), "gave up"] } })
        const host = Troupe.layer(Layer.succeed(SessionStore, store), {
          model: Layer.succeed(Model.Model, model),
          tools: Toolkit.layer([fetchTool(runs)]),
          host: patientHost
        })
        const who = principal()
        const { sessionId, turnId } = yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const session = yield* sessions.create(who, { agent: askingWorker(runs, new ApprovalSettings({ timeoutMs: 60_000 })) })
          const turnId = yield* start(who, session.id, "go")
          yield* openCallbacks(who, session.id)
          yield* settle
          yield* TestClock.adjust("30 seconds")
          yield* settle
          return { sessionId: session.id, turnId }
        }).pipe(Effect.provide(host))

        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          // The resumed turn waits again, for the rest of the time the log gives it.
          yield* openCallbacks(who, sessionId)
          yield* settle
          yield* TestClock.adjust("29999 millis")
          yield* settle
          assert.deepStrictEqual(resolutions(yield* logOf(sessionId)), [])
          assert.lengthOf(yield* sessions.callbacks(who, sessionId), 1)
          yield* TestClock.adjust("1 millis")
          const end = yield* ended(sessionId, turnId)
          assert.strictEqual(end.outcome, "completed")
          const log = yield* logOf(sessionId)
          assert.deepStrictEqual(resolutions(log).map((r) => r.resolution), ["expired"])
          assert.deepStrictEqual(toolOutcomes(log), [["fetch", expiredOutput, true]])
        }).pipe(Effect.provide(host))
        assert.strictEqual(yield* Ref.get(runs), 0)
      }))

    it.effect("dynamic needsApproval: a small payment runs, a large one asks first", () =>
      Effect.gen(function*() {
        const paid = yield* Ref.make<ReadonlyArray<number>>([])
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: worker({ tools: [payTool(paid).spec] }) })
          const turnId = yield* start(who, session.id, "pay")
          const [pending] = yield* openCallbacks(who, session.id)
          // The small one ran without asking; the large one waits.
          assert.deepStrictEqual(yield* Ref.get(paid), [5])
          assert.strictEqual(pending!.request.toolName, "pay")
          assert.strictEqual(pending!.request.arguments, JSON.stringify({ amount: 500 }))
          yield* sessions.answerCallback(who, session.id, { callbackId: pending!.callbackId, result: { decision: "approve" } })
          yield* sessions.awaitTurn(who, session.id, turnId)
          assert.deepStrictEqual(yield* Ref.get(paid), [5, 500])
          assert.lengthOf((yield* logOf(session.id)).filter((r) => r.body._tag === "callback_opened"), 1)
        }).pipe(Effect.provide(runtime(
          { agents: { worker: [calls(call("c1", "pay", { amount: 5 }), call("c2", "pay", { amount: 500 })), "paid"] } },
          [payTool(paid)]
        )))
      }))

    it.effect("approval mode never: calls that would ask run without asking; denials still deny", () =>
      Effect.gen(function*() {
        const paid = yield* Ref.make<ReadonlyArray<number>>([])
        const runs = yield* Ref.make(0)
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, {
            agent: worker({
              tools: [payTool(paid).spec, fetchTool(runs).spec],
              permissions: new PermissionPolicy({ rules: { fetch: "ask" } })
            })
          })
          const turnId = yield* start(who, session.id, "trusted", {
            approvals: { mode: "never" },
            permissions: { costs: { money: "deny" } }
          })
          yield* sessions.awaitTurn(who, session.id, turnId)
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(toolOutcomes(log), [
            ["pay", "paid 500", false],
            // The agent asks about fetch by name, the run denies what costs money: the denial stands.
            ["fetch", notAllowed("fetch", "run", "cost:money"), true]
          ])
          assert.lengthOf(log.filter((r) => r.body._tag === "callback_opened"), 0)
          assert.deepStrictEqual(yield* Ref.get(paid), [500])
        }).pipe(Effect.provide(runtime(
          { agents: { worker: [calls(call("c1", "pay", { amount: 500 }), call("c2", "fetch")), "done"] } },
          [payTool(paid), fetchTool(runs)]
        )))
      }))
  })

  describe("tool context", () => {
    it.effect("a handler gets the session, turn, operation and call ids, the principal and the agent path", () =>
      Effect.gen(function*() {
        const seen = yield* Ref.make<ReadonlyArray<Tool.ToolContext>>([])
        const keyed = Tool.make({
          name: "keyed",
          description: "Remembers its context.",
          parameters: Schema.Struct({}),
          success: Schema.String,
          handler: (_, context) => Effect.as(Ref.update(seen, (all) => [...all, context]), "ok")
        })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: worker({ tools: [keyed.spec] }) })
          const turnId = yield* start(who, session.id, "go")
          yield* sessions.awaitTurn(who, session.id, turnId)
          const started = (yield* logOf(session.id)).flatMap((r) =>
            r.body._tag === "operation_started" && r.body.kind === "tool" ? [r.body as OperationStarted] : []
          )
          const contexts = yield* Ref.get(seen)
          assert.deepStrictEqual(contexts.map((c) => [c.sessionId, c.turnId, c.operationId, c.callId, c.agentPath]), [
            [session.id, turnId, started[0]!.operationId, "k1", ["worker"]],
            [session.id, turnId, started[1]!.operationId, "k2", ["worker"]]
          ])
          assert.notStrictEqual(contexts[0]!.operationId, contexts[1]!.operationId)
          assert.deepStrictEqual(contexts[0]!.principal, who)
        }).pipe(Effect.provide(runtime({ agents: { worker: [calls(call("k1", "keyed"), call("k2", "keyed")), "done"] } }, [keyed])))
      }))

    it.effect("interrupting the turn interrupts the handler's fiber", () =>
      Effect.gen(function*() {
        const began = yield* Deferred.make<void>()
        const interrupted = yield* Deferred.make<void>()
        const hangs = Tool.make({
          name: "hang",
          description: "Never returns.",
          parameters: Schema.Struct({}),
          success: Schema.String,
          handler: () =>
            Deferred.succeed(began, undefined).pipe(
              Effect.zipRight(Effect.never),
              Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
            )
        })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: worker({ tools: [hangs.spec] }) })
          const turnId = yield* start(who, session.id, "go")
          yield* Deferred.await(began)
          assert.strictEqual((yield* sessions.interrupt(who, session.id, turnId, "stop")).outcome, "interrupted")
          yield* Deferred.await(interrupted)
          const end = yield* ended(session.id, turnId)
          assert.strictEqual(end.outcome, "interrupted")
        }).pipe(Effect.provide(runtime({ agents: { worker: [calls(call("h1", "hang")), "never"] } }, [hangs])))
      }))
  })

  describe("parallel tool calls", () => {
    /** Two handlers that each wait for the other to start: only a concurrent run finishes. `second` finishes first. */
    const pair = Effect.gen(function*() {
      const firstBegan = yield* Deferred.make<void>()
      const secondBegan = yield* Deferred.make<void>()
      const secondDone = yield* Deferred.make<void>()
      const finished = yield* Ref.make<ReadonlyArray<string>>([])
      const make = (name: string, mine: Deferred.Deferred<void>, other: Deferred.Deferred<void>, after?: Deferred.Deferred<void>) =>
        Tool.make({
          name,
          description: "Waits for its partner.",
          parameters: Schema.Struct({}),
          success: Schema.String,
          metadata: { sideEffect: "read", idempotency: "supported", parallel: true },
          handler: () =>
            Effect.gen(function*() {
              yield* Deferred.succeed(mine, undefined)
              yield* Deferred.await(other)
              if (after !== undefined) yield* Deferred.await(after)
              yield* Ref.update(finished, (all) => [...all, name])
              if (after === undefined) yield* Deferred.succeed(secondDone, undefined)
              return `${name} done`
            })
        })
      return {
        first: make("first", firstBegan, secondBegan, secondDone),
        second: make("second", secondBegan, firstBegan),
        finished
      }
    })

    it.effect("parallel calls of one reply run at once, and their records and results are in the model's order", () =>
      Effect.gen(function*() {
        const { finished, first, second } = yield* pair
        const requests: Array<Model.Request> = []
        const model = Layer.effect(
          Model.Model,
          Effect.map(ScriptedModel.make({ agents: { worker: [calls(call("a", "first"), call("b", "second")), "both"] } }), (inner) =>
            Model.Model.of({ stream: (request) => Stream.suspend(() => (requests.push(request), inner.stream(request))) }))
        )
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: worker({ tools: [first.spec, second.spec] }) })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, "both")
          // `second` finished first, yet everything is recorded as the model asked.
          assert.deepStrictEqual(yield* Ref.get(finished), ["second", "first"])
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(toolOutcomes(log), [["first", "first done", false], ["second", "second done", false]])
          const names = new Map(log.flatMap((r) => r.body._tag === "operation_started" ? [[r.body.operationId, r.body.name] as const] : []))
          const completions = log.flatMap((r) =>
            r.body._tag === "operation_completed" && (names.get(r.body.operationId) === "first" || names.get(r.body.operationId) === "second")
              ? [names.get(r.body.operationId)]
              : []
          )
          assert.deepStrictEqual(completions, ["first", "second"])
          // Both starts are durable before either body runs: one commit ahead of both receipts.
          const starts = log.filter((r) => r.body._tag === "operation_started" && r.body.kind === "tool").map((r) => r.seq)
          const receipts = log.filter((r) => r.body._tag === "operation_completed" && names.get(r.body.operationId) !== "scripted").map((r) => r.seq)
          assert.isBelow(Math.max(...starts), Math.min(...receipts))
          // The next model request has the results in the model's order.
          const toolMessages = requests[1]!.messages.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : []))
          assert.deepStrictEqual(toolMessages, ["a", "b"])
        }).pipe(Effect.provide(runtime({}, [first, second], { model })))
      }))

    it.effect("maxParallelTools 1 runs them one by one (the pair would wait for each other forever)", () =>
      Effect.gen(function*() {
        const { first, second } = yield* pair
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: worker({ tools: [first.spec, second.spec], maxParallelTools: 1 }) })
          const turnId = yield* start(who, session.id, "go")
          const waiting = yield* Effect.fork(sessions.awaitTurn(who, session.id, turnId))
          yield* settle
          yield* settle
          // Stuck: only `first` started.
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(toolOutcomes(log), [["first", undefined, undefined], ["second", undefined, undefined]])
          assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "the turn has not ended")
          yield* sessions.interrupt(who, session.id, turnId)
          yield* Fiber.interrupt(waiting)
        }).pipe(Effect.provide(runtime({ agents: { worker: [calls(call("a", "first"), call("b", "second")), "both"] } }, [first, second])))
      }))
    it.effect("after a restart mid-group: a receipt that waited for an earlier call is not durable, and the rule of re-runs holds", () =>
      Effect.gen(function*() {
        const store = yield* MemorySessionStore.make
        const model = yield* ScriptedModel.make({ agents: { worker: [calls(call("a", "slow"), call("b", "once")), "after"] } })
        const blockSlow = yield* Ref.make(true)
        const slowRuns = yield* Ref.make(0)
        const onceRuns = yield* Ref.make(0)
        const onceDone = yield* Deferred.make<void>()
        // Safe to run again; blocks in the first host only.
        const slowTool = Tool.make({
          name: "slow",
          description: "Slow, and idempotent.",
          parameters: Schema.Struct({}),
          success: Schema.String,
          metadata: { sideEffect: "read", idempotency: "supported", parallel: true },
          handler: () =>
            Effect.gen(function*() {
              yield* Ref.update(slowRuns, (n) => n + 1)
              if (yield* Ref.get(blockSlow)) yield* Effect.never
              return "slow done"
            })
        })
        // Not safe to run again; finishes at once.
        const onceTool = Tool.make({
          name: "once",
          description: "Fast, not idempotent.",
          parameters: Schema.Struct({}),
          success: Schema.String,
          metadata: { sideEffect: "write", idempotency: "unsupported", parallel: true },
          handler: () => Effect.as(Effect.zipRight(Ref.update(onceRuns, (n) => n + 1), Deferred.succeed(onceDone, undefined)), "once done")
        })
        const host = Troupe.layer(Layer.succeed(SessionStore, store), {
          model: Layer.succeed(Model.Model, model),
          tools: Toolkit.layer([slowTool, onceTool]),
          host: patientHost
        })
        const who = principal()
        const { sessionId, turnId } = yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const session = yield* sessions.create(who, { agent: worker({ tools: [slowTool.spec, onceTool.spec] }) })
          const turnId = yield* start(who, session.id, "go")
          yield* Deferred.await(onceDone)
          yield* settle
          // Both started, no receipt: `once` finished but waits for `slow`, which comes first.
          assert.deepStrictEqual(toolOutcomes(yield* logOf(session.id)), [["slow", undefined, undefined], ["once", undefined, undefined]])
          return { sessionId: session.id, turnId }
        }).pipe(Effect.provide(host))
        yield* Ref.set(blockSlow, false)
        yield* Effect.gen(function*() {
          const end = yield* ended(sessionId, turnId)
          assert.strictEqual(end.outcome, "completed")
          const log = yield* logOf(sessionId)
          assert.deepStrictEqual(toolOutcomes(log), [
            ["slow", "slow done", false],
            ["once", undefined, undefined]
          ])
          assert.isTrue(log.some((r) => r.body._tag === "operation_unknown"))
        }).pipe(Effect.provide(host))
        assert.strictEqual(yield* Ref.get(slowRuns), 2)
        assert.strictEqual(yield* Ref.get(onceRuns), 1)
      }))
  })

  describe("terminal tools", () => {
    it.effect("a successful call of a terminal tool ends the turn with its output; a failed one does not", () =>
      Effect.gen(function*() {
        const submit = Tool.make({
          name: "submit",
          description: "Submits the answer.",
          parameters: Schema.Struct({ answer: Schema.String }),
          success: Schema.Struct({ submitted: Schema.String }),
          metadata: { sideEffect: "external", terminal: true },
          handler: ({ answer }) => (answer === "" ? Effect.fail("empty answer") : Effect.succeed({ submitted: answer }))
        })
        yield* Effect.gen(function*() {
          const sessions = yield* Sessions
          const who = principal()
          const session = yield* sessions.create(who, { agent: worker({ tools: [submit.spec] }) })
          const turnId = yield* start(who, session.id, "go")
          const result = yield* sessions.awaitTurn(who, session.id, turnId)
          assert.strictEqual(result.output, JSON.stringify({ submitted: "42" }))
          const log = yield* logOf(session.id)
          assert.deepStrictEqual(toolOutcomes(log).map(([, output]) => output), [{ error: "empty answer" }, { submitted: "42" }])
          // Two model calls: the one after the successful submit was never made.
          assert.lengthOf(log.filter((r) => r.body._tag === "operation_started" && r.body.kind === "model"), 2)
        }).pipe(Effect.provide(runtime(
          { agents: { worker: [calls(call("t1", "submit", { answer: "" })), calls(call("t2", "submit", { answer: "42" })), "unreached"] } },
          [submit]
        )))
      }))
  })
})
