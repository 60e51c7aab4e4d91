/**
 * Session trees driven by a parent's model (DESIGN §7): the `agents.*` tools
 * on the real runtime with scripted models. A spawn commits the child with the
 * parent's records; child results reach a waiting parent (which wakes), an
 * idle one (which stays idle and reads it next turn) and not a closed one;
 * the policy's limits reach the model as retryable errors; a provider on the
 * root answers a grandchild's approval and client tool; exact interrupts of a
 * child; a restarted child does not deliver its result twice. The main tree
 * runs on memory, SQLite and PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef, PermissionPolicy, SubagentRef, ToolSpec } from "../src/schema/Agent.js"
import { makeTurnId, type SessionId } from "../src/schema/Ids.js"
import type { LogRecord, TurnStarted } from "../src/schema/Record.js"
import { SessionHost } from "../src/services/SessionHost.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import * as LogProjection from "../src/internal/LogProjection.js"
import { principal } from "./support/fixtures.js"
import { availability, freshSchema } from "./support/postgres.js"

const call = (id: string, name: string, args: object) => ({ id, name, arguments: JSON.stringify(args) })
const calls = (...list: ReadonlyArray<ReturnType<typeof call>>): ScriptedReply => ({ toolCalls: list })

const worker = new Agent({ name: "worker", instructions: "Work.", model: new ModelRef({ name: "scripted" }) })
const lead = new Agent({
  name: "lead",
  instructions: "Delegate.",
  model: new ModelRef({ name: "scripted" }),
  subagents: [new SubagentRef({ name: "worker", description: "does the work" })]
})

const logOf = (sessionId: SessionId) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    return (yield* store.readLog(sessionId, { limit: 10_000 })).records
  })
const toolOutputs = (log: ReadonlyArray<LogRecord>, name: string) => {
  const ops = new Set(log.flatMap((r) => (r.body._tag === "operation_started" && r.body.name === name ? [r.body.operationId] : [])))
  return log.flatMap((r) => (r.body._tag === "operation_completed" && ops.has(r.body.operationId) ? [r.body] : []))
}
const eventually = <A, E, R>(effect: Effect.Effect<Option.Option<A>, E, R>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      const found = yield* effect
      if (Option.isSome(found)) return found.value
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.dieMessage("never happened")
  })

/** A parent whose turn spawned a picker and ended; the picker waits on its client tool. */
const delegatedToPicker = Effect.gen(function*() {
  const sessions = yield* Sessions
  const me = principal()
  const root = yield* sessions.create(me, { agent: leadWithPicker })
  const first = yield* sessions.send(me, root.id, { text: "delegate" })
  yield* sessions.awaitTurn(me, root.id, first.turnId!)
  const childId = (toolOutputs(yield* logOf(root.id), "agents.spawn")[0]!.output as { sessionId: SessionId }).sessionId
  const open = yield* eventually(Effect.map(sessions.callbacks(me, childId), (cbs) => Option.fromNullable(cbs[0])))
  return { childId, me, open, root, sessions }
})

/** A parent that spawns a worker, waits for its result and answers with it. */
const delegation = Effect.gen(function*() {
  const sessions = yield* Sessions
  const me = principal()
  const root = yield* sessions.create(me, { agent: lead })
  const accepted = yield* sessions.send(me, root.id, { text: "get it done" })
  const result = yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
  assert.strictEqual(result.output, "the worker says: You said: do x")

  const log = yield* logOf(root.id)
  const spawned = log.find((r) => r.body._tag === "child_spawned")!
  const spawnOutput = toolOutputs(log, "agents.spawn")[0]!
  // The child, the parent's record and the tool's receipt were one commit.
  const receipt = log.find((r) => r.body._tag === "operation_completed" && r.body.operationId === spawnOutput.operationId)!
  assert.strictEqual(receipt.commitId, spawned.commitId)
  const { alias, sessionId } = spawnOutput.output as { sessionId: SessionId; alias: string }
  assert.strictEqual(alias, "worker-1")
  const child = yield* sessions.get(me, sessionId)
  assert.strictEqual(child.parentId, root.id)
  assert.strictEqual(child.rootId, root.id)
  assert.deepStrictEqual(child.agentPath, ["lead", "worker"])
  assert.deepStrictEqual(child.subagentPolicy, root.subagentPolicy)
  // The parent saw the result through agents.wait, and its stream has no child transcript.
  const waited = toolOutputs(log, "agents.wait")[0]!.output as { results: ReadonlyArray<{ output: string; alias: string }> }
  assert.deepStrictEqual(waited.results.map((r) => [r.alias, r.output]), [["worker-1", "You said: do x"]])
  assert.deepStrictEqual(
    log.filter((r) => r.body._tag === "child_result").map((r) => r.body._tag === "child_result" && r.body.childSessionId),
    [sessionId]
  )
  assert.isFalse(log.some((r) => r.body._tag === "turn_started" && r.body.text === "do x"))
  // The child's own log has its turn.
  const childLog = yield* logOf(sessionId)
  assert.isTrue(childLog.some((r) => r.body._tag === "turn_ended" && r.body.output === "You said: do x"))
  const page = yield* sessions.children(me, root.id)
  assert.deepStrictEqual(page.items.map((i) => i.alias), ["worker-1"])
})

const delegatingRuntime = <E, R>(store: Layer.Layer<SessionStore, E, R>) =>
  Troupe.layer(store, {
    agents: [worker],
    scripts: {
      agents: {
        lead: [
          calls(call("s1", "agents.spawn", { agent: "worker", message: "do x" })),
          calls(call("w1", "agents.wait", {})),
          "the worker says: You said: do x"
        ]
      }
    }
  })

const pg = await availability()

describe("subagents", () => {
  it.scoped("memory: a parent spawns a worker, waits for its result, and answers with it", () =>
    delegation.pipe(Effect.provide(delegatingRuntime(MemorySessionStore.layer))))

  it.scoped("SQLite: the same tree, on a file", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-subagents-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      yield* delegation.pipe(Effect.provide(delegatingRuntime(SqliteSessionStore.layer({ filename: join(dir, "t.db") }))))
    }))

  it.scoped.skipIf(!pg.run)("PostgreSQL: the same tree", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(freshSchema)
      yield* Effect.addFinalizer(() => Effect.promise(drop))
      yield* delegation.pipe(Effect.provide(delegatingRuntime(PgSessionStore.layer({ url }))))
    }))

  it.scoped("a session without a policy is offered no agents.* tool, and a call of one is an unknown tool", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const session = yield* sessions.create(me, { agent: worker })
      assert.isNull(session.subagentPolicy)
      const accepted = yield* sessions.send(me, session.id, { text: "spawn" })
      yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
      const log = yield* logOf(session.id)
      const outputs = toolOutputs(log, "agents.spawn")
      assert.deepStrictEqual(outputs.map((o) => o.output), [{ error: "unknown tool: agents.spawn" }])
      const started = log.find((r) => r.body._tag === "operation_started" && r.body.kind === "model")
      assert.isTrue(started?.body._tag === "operation_started" && "tools" in started.body.input && started.body.input.tools === 0)
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [worker],
      scripts: { agents: { worker: [calls(call("s1", "agents.spawn", { agent: "worker", message: "x" })), "ok"] } }
    }))))

  it.live("after a handoff, a spawned child inherits the permission layers of the agent the turn was handed to", () => {
    const strict = new Agent({
      name: "strict",
      instructions: "Delegate, carefully.",
      model: new ModelRef({ name: "scripted" }),
      subagents: [new SubagentRef({ name: "worker", description: "does the work" })],
      permissions: new PermissionPolicy({ rules: { deploy: "deny" } })
    })
    const front = new Agent({ ...lead, name: "front", handoffs: [strict] })
    return Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const root = yield* sessions.create(me, { agent: front })
      const accepted = yield* sessions.send(me, root.id, { text: "careful" })
      yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
      const childId = (toolOutputs(yield* logOf(root.id), "agents.spawn")[0]!.output as { sessionId: SessionId }).sessionId
      const started = yield* eventually(Effect.map(logOf(childId), (log) =>
        Option.fromNullable(log.find((r) => r.body._tag === "turn_started")?.body as TurnStarted | undefined)))
      const inherited = started.run?.inherited ?? []
      assert.isTrue(
        inherited.some((layer) => layer.rules?.deploy === "deny"),
        `the child is bound by strict's rules: ${JSON.stringify(inherited)}`
      )
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [worker],
      scripts: {
        agents: {
          front: [calls(call("h1", "transfer_to_strict", {}))],
          strict: [calls(call("s1", "agents.spawn", { agent: "worker", message: "go" })), "spawned"],
          worker: ["worked"]
        }
      }
    })))
  })

  it.scoped("the default policy's 10 child turns: the 11th spawn is a retryable error naming the limit", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const root = yield* sessions.create(me, { agent: lead })
      assert.strictEqual(root.subagentPolicy?.maxChildTurns, 10)
      const accepted = yield* sessions.send(me, root.id, { text: "fan out" })
      yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
      const outputs = toolOutputs(yield* logOf(root.id), "agents.spawn")
      assert.strictEqual(outputs.length, 11)
      assert.isTrue(outputs.slice(0, 10).every((o) => !o.isError))
      assert.isTrue(outputs[10]!.isError)
      assert.deepStrictEqual(outputs[10]!.output, {
        error: "the subagent policy refuses this: max_child_turns (limit 10)",
        limit: "max_child_turns",
        retryable: true
      })
      assert.strictEqual((yield* sessions.children(me, root.id, { limit: 50 })).items.length, 10)
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [worker],
      scripts: {
        agents: {
          lead: [
            calls(...Array.from({ length: 11 }, (_, i) => call(`s${i}`, "agents.spawn", { agent: "worker", message: `task ${i}` }))),
            "spawned"
          ]
        }
      }
    }))))

  it.scopedLive("an idle parent records a child's result, stays idle, and its next turn reads it", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const root = yield* sessions.create(me, { agent: lead })
      const first = yield* sessions.send(me, root.id, { text: "start one" })
      yield* sessions.awaitTurn(me, root.id, first.turnId!)
      // The parent's turn ended at once; the child's result arrives after.
      const recorded = yield* eventually(Effect.map(logOf(root.id), (log) => Option.fromNullable(log.find((r) => r.body._tag === "child_result"))))
      const log = yield* logOf(root.id)
      assert.strictEqual(log.filter((r) => r.body._tag === "turn_started").length, 1, "a result starts no turn")
      assert.strictEqual((yield* sessions.get(me, root.id)).status, "idle")
      assert.isTrue(recorded.body._tag === "child_result" && recorded.body.outcome === "completed" && recorded.body.usage !== undefined)
      const second = yield* sessions.send(me, root.id, { text: "and?" })
      const result = yield* sessions.awaitTurn(me, root.id, second.turnId!)
      assert.include(result.output, "[subagent worker-1")
      assert.include(result.output, "completed: You said: background task")
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [worker],
      scripts: {
        agents: { worker: ["You said: background task"] },
        // The parent: spawn, then say so; asked again, repeat the child results it was sent.
        fallback: (request) => {
          const last = request.messages[request.messages.length - 1]!
          if (last.role === "tool") return "spawned it"
          if (last.role === "user" && last.content === "start one") {
            return calls(call("s1", "agents.spawn", { agent: "worker", message: "background task" }))
          }
          return request.messages.filter((m) => m.role === "user" && m.content.startsWith("[subagent")).map((m) => m.content).join(" ")
        }
      }
    }))))

  /** A parent parked in agents.wait for a picker that waits on its client: its status, then its log's parks. */
  const parkedParent = Effect.gen(function*() {
    const sessions = yield* Sessions
    const me = principal()
    const root = yield* sessions.create(me, { agent: leadWithPicker })
    const accepted = yield* sessions.send(me, root.id, { text: "delegate" })
    yield* eventually(Effect.map(logOf(root.id), (log) => Option.fromNullable(log.find((r) => r.body._tag === "children_awaited") ?? null)))
    // Read from the store's row, as a listing in another process reads it.
    assert.strictEqual((yield* sessions.get(me, root.id)).status, "waiting")
    const listed = yield* sessions.list(me, { limit: 10 })
    assert.strictEqual(listed.items.find((s) => s.id === root.id)?.status, "waiting")
    const childId = (toolOutputs(yield* logOf(root.id), "agents.spawn")[0]!.output as { sessionId: SessionId }).sessionId
    const open = yield* eventually(Effect.map(sessions.callbacks(me, childId), (cbs) => Option.fromNullable(cbs[0])))
    return { childId, me, open, root, sessions, turnId: accepted.turnId! }
  })
  const parks = (log: ReadonlyArray<LogRecord>) => log.flatMap((r) => (r.body._tag === "children_awaited" ? [r.body.parked] : []))
  const waitingRuntime = <E, R>(store: Layer.Layer<SessionStore, E, R>) =>
    Troupe.layer(store, {
      agents: [picker],
      scripts: {
        agents: {
          lead: [calls(call("s1", "agents.spawn", { agent: "picker", message: "pick a file" })), calls(call("w1", "agents.wait", {})), "got it"],
          picker: [calls(call("p1", "pick", {})), "picked"]
        }
      }
    })

  // Each store keeps the status in its own way (the memory map, SQLite's statements, PostgreSQL's head patch).
  const parkingStores: ReadonlyArray<readonly [string, () => Layer.Layer<SessionStore, unknown>]> = [
    ["memory", () => MemorySessionStore.layer],
    ["SQLite", () =>
      Layer.unwrapScoped(Effect.map(
        Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "troupe-parked-"))),
          (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
        ),
        (dir) => SqliteSessionStore.layer({ filename: join(dir, "t.db") })
      ))],
    ...(pg.run
      ? [["PostgreSQL", () =>
        Layer.unwrapScoped(Effect.map(
          Effect.acquireRelease(Effect.promise(freshSchema), (schema) => Effect.promise(schema.drop)),
          (schema) => PgSessionStore.layer({ url: schema.url })
        ))] as const]
      : [])
  ]
  for (const [name, store] of parkingStores) {
    it.scopedLive(`agents.wait leaves the parent waiting, not running, until it returns (${name})`, () =>
      Effect.gen(function*() {
        const { childId, me, open, root, sessions, turnId } = yield* parkedParent
        yield* sessions.answerCallback(me, childId, { callbackId: open.callbackId, result: { output: "a.txt" } })
        const result = yield* sessions.awaitTurn(me, root.id, turnId)
        assert.strictEqual(result.output, "got it")
        const log = yield* logOf(root.id)
        assert.deepStrictEqual(parks(log), [true, false])
        // Cleared before the wait's receipt: the model's next call runs with the session running.
        const cleared = log.findIndex((r) => r.body._tag === "children_awaited" && !r.body.parked)
        const receipt = log.findIndex((r) => r.body._tag === "operation_completed" && r.body.operationId === toolOutputs(log, "agents.wait")[0]!.operationId)
        assert.isBelow(cleared, receipt)
      }).pipe(Effect.provide(waitingRuntime(store()))))
  }

  it.scopedLive("a parent interrupted while parked in agents.wait stops waiting in the interrupt's commit", () =>
    Effect.gen(function*() {
      const { me, root, sessions, turnId } = yield* parkedParent
      yield* sessions.interrupt(me, root.id, turnId, "enough")
      const log = yield* logOf(root.id)
      assert.deepStrictEqual(parks(log), [true, false])
      const ended = log.findIndex((r) => r.body._tag === "turn_ended")
      assert.strictEqual(log[ended - 1]!.body._tag, "children_awaited")
      // The log's projection holds nothing open: the next turn of the session is running, not waiting.
      const head = LogProjection.project(root.id, { headSeq: 0, activeTurnId: null, openCallbacks: 0, title: null, archived: false, closed: false }, log.map((r) => r.body), 0).head
      assert.strictEqual(head.openCallbacks, 0)
      assert.strictEqual((yield* sessions.get(me, root.id)).status, "idle")
    }).pipe(Effect.provide(waitingRuntime(MemorySessionStore.layer))))

  it.scopedLive("a child whose parent closed still completes; nothing is delivered, and the child's callback is answered by hand", () =>
    Effect.gen(function*() {
      const { childId, me, open, root, sessions } = yield* delegatedToPicker
      assert.strictEqual(open.parentSessionId, root.id)
      assert.deepStrictEqual(open.agentPath, ["lead", "picker"])
      yield* sessions.close(me, root.id)
      assert.strictEqual((yield* sessions.get(me, childId)).status, "waiting", "closing a root leaves its children")
      yield* sessions.answerCallback(me, childId, { callbackId: open.callbackId, result: { output: "b.txt" } })
      const ended = yield* eventually(Effect.map(logOf(childId), (log) => Option.fromNullable(log.find((r) => r.body._tag === "turn_ended"))))
      assert.isTrue(ended.body._tag === "turn_ended" && ended.body.outcome === "completed")
      yield* Effect.sleep("50 millis")
      assert.isFalse((yield* logOf(root.id)).some((r) => r.body._tag === "child_result"))
    }).pipe(Effect.provide(pickerRuntime)))

  it.scoped("a provider on the root answers a grandchild's approval and its client tool", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const root = yield* sessions.create(me, { agent: lead2 })
      const seen: Array<string> = []
      yield* Effect.forkScoped(sessions.provideCallbacks(me, root.id, ["approval", "client_tool"], (callback) =>
        Effect.sync(() => {
          seen.push(`${callback.kind}:${callback.agentPath.join("/")}`)
          return Option.some(callback.kind === "approval" ? { decision: "approve" } : { output: "a.txt" })
        })))
      const accepted = yield* sessions.send(me, root.id, { text: "go deep" })
      const result = yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
      assert.strictEqual(result.output, "all done")
      // The leaf asked for approval of `stamp`, then for `pick` (a client tool it inherited from its parents).
      assert.deepStrictEqual(seen, ["approval:lead/middle/leaf", "client_tool:lead/middle/leaf"])
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [middle, leaf],
      tools: Toolkit.layer([stamp]),
      scripts: {
        agents: {
          lead: [calls(call("s", "agents.spawn", { agent: "middle", message: "delegate down" })), calls(call("w", "agents.wait", {})), "all done"],
          middle: [calls(call("s", "agents.spawn", { agent: "leaf", message: "do it" })), calls(call("w", "agents.wait", {})), "middle done"],
          leaf: [calls(call("t", "stamp", {})), calls(call("p", "pick", {})), "leaf done"]
        }
      }
    }))))

  it.scopedLive("an exact interrupt of a child's turn from outside: the child stays open, the parent gets the interrupted result", () =>
    Effect.gen(function*() {
      const { childId, me, open, root, sessions } = yield* delegatedToPicker
      const mismatch = yield* Effect.flip(sessions.interrupt(me, childId, yield* makeTurnId))
      assert.strictEqual(mismatch._tag, "TurnMismatch")
      const outcome = yield* sessions.interrupt(me, childId, open.turnId, "not needed")
      assert.strictEqual(outcome.outcome, "interrupted")
      assert.notStrictEqual((yield* sessions.get(me, childId)).status, "closed")
      const delivered = yield* eventually(Effect.map(logOf(root.id), (log) => Option.fromNullable(log.find((r) => r.body._tag === "child_result"))))
      assert.isTrue(delivered.body._tag === "child_result" && delivered.body.outcome === "interrupted" && delivered.body.reason === "not needed")
      const again = yield* sessions.interrupt(me, childId, open.turnId)
      assert.strictEqual(again.outcome, "already_ended")
    }).pipe(Effect.provide(pickerRuntime)))

  it.scopedLive("agents.list_configs, agents.list, agents.send_message and agents.interrupt drive an existing child", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const me = principal()
      const root = yield* sessions.create(me, { agent: lead })
      const accepted = yield* sessions.send(me, root.id, { text: "drive it" })
      yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
      const log = yield* logOf(root.id)
      assert.deepStrictEqual(toolOutputs(log, "agents.list_configs")[0]!.output, { agents: [{ agent: "worker", description: "does the work" }] })
      const sent = toolOutputs(log, "agents.send_message")[0]!.output as { sessionId: string; turnId?: string }
      assert.isString(sent.turnId)
      const interrupted = toolOutputs(log, "agents.interrupt")
      assert.include(["interrupted", "already_ended"], (interrupted[0]!.output as { outcome: string }).outcome)
      assert.isTrue(interrupted[1]!.isError, "a turn id that never ran is a tool error")
      assert.include(JSON.stringify(interrupted[1]!.output), "turn_mismatch")
      const listed = toolOutputs(log, "agents.list")[0]!.output as { children: ReadonlyArray<{ alias: string; agent: string; lastResult?: unknown }> }
      assert.deepStrictEqual(listed.children.map((c) => [c.alias, c.agent]), [["worker-1", "worker"]])
      assert.isDefined(listed.children[0]!.lastResult)
      // Two child turns: the spawn's and the message's, counted against the policy.
      const childTurns = (yield* logOf(sent.sessionId as SessionId)).filter((r) => r.body._tag === "turn_started")
      assert.strictEqual(childTurns.length, 2)
    }).pipe(Effect.provide(Troupe.layerTest({
      agents: [worker],
      scripts: {
        agents: { worker: ["done"] },
        // The parent walks through the tools, one per model call, reading what the last one returned.
        fallback: (request) => {
          const tools = request.messages.filter((m) => m.role === "tool")
          const last = tools[tools.length - 1]?.content ?? "{}"
          switch (tools.length) {
            case 0:
              return calls(call("c", "agents.list_configs", {}), call("s", "agents.spawn", { agent: "worker", message: "first" }))
            case 2:
              return calls(call("w", "agents.wait", { sessions: ["worker-1"] }))
            case 3:
              return calls(call("m", "agents.send_message", { session: "worker-1", message: "second" }))
            case 4:
              return calls(
                call("i", "agents.interrupt", { session: "worker-1", turnId: JSON.parse(last).turnId }),
                call("j", "agents.interrupt", { session: "worker-1", turnId: Effect.runSync(makeTurnId) })
              )
            case 6:
              return calls(call("l", "agents.list", {}))
            default:
              return "driven"
          }
        }
      }
    }))))

  it.scopedLive("a child restarted on the same file does not deliver its result twice", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "troupe-redeliver-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const filename = join(dir, "t.db")
      const me = principal()
      const { childId, rootId } = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const root = yield* sessions.create(me, { agent: lead })
        const accepted = yield* sessions.send(me, root.id, { text: "get it done" })
        yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
        const childId = (toolOutputs(yield* logOf(root.id), "agents.spawn")[0]!.output as { sessionId: SessionId }).sessionId
        return { childId, rootId: root.id }
      }).pipe(Effect.provide(delegatingRuntime(SqliteSessionStore.layer({ filename }))))
      // A fresh host: the child's actor starts again and redelivers its last result.
      yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        yield* sessions.rename(me, childId, "again")
        const send = yield* Effect.flip(sessions.send(me, childId, { text: "x" }))
        assert.strictEqual(send._tag, "ChildControlForbidden")
        yield* (yield* SessionHost).wake(childId)
        // The started actor redelivers (a duplicate admission); give it the time to.
        yield* Effect.sleep("200 millis")
      }).pipe(Effect.provide(delegatingRuntime(SqliteSessionStore.layer({ filename }))))
      const results = yield* Effect.map(logOf(rootId), (log) => log.filter((r) => r.body._tag === "child_result")).pipe(
        Effect.provide(SqliteSessionStore.layer({ filename }))
      )
      assert.strictEqual(results.length, 1)
    }))
})

const pick = new ToolSpec({ name: "pick", description: "The client picks a file.", parameters: { type: "object" }, sideEffect: "none", idempotency: "unknown", client: true })
const picker = new Agent({ name: "picker", instructions: "Pick.", model: new ModelRef({ name: "scripted" }), tools: [pick] })
const leadWithPicker = new Agent({ ...lead, subagents: [new SubagentRef({ name: "picker" })] })
const stamp = Tool.make({
  name: "stamp",
  description: "Stamps.",
  parameters: Schema.Struct({}),
  success: Schema.String,
  metadata: { sideEffect: "external", idempotency: "unsupported" },
  handler: () => Effect.succeed("stamped")
})
const leaf = new Agent({
  name: "leaf",
  instructions: "Stamp, then pick.",
  model: new ModelRef({ name: "scripted" }),
  tools: [stamp.spec],
  permissions: new PermissionPolicy({ default: "allow", rules: { stamp: "ask" } })
})
const middle = new Agent({
  name: "middle",
  instructions: "Delegate further.",
  model: new ModelRef({ name: "scripted" }),
  tools: [pick],
  subagents: [new SubagentRef({ name: "leaf" })]
})
const lead2 = new Agent({ ...lead, tools: [pick], subagents: [new SubagentRef({ name: "middle" })] })

const pickerRuntime = Troupe.layerTest({
  agents: [picker],
  scripts: {
    agents: {
      lead: [calls(call("s1", "agents.spawn", { agent: "picker", message: "pick a file" })), "delegated"],
      picker: [calls(call("p1", "pick", {})), "picked"]
    }
  }
})
