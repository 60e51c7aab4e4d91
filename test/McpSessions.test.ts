/**
 * MCP toolsets through the whole runtime (`Troupe.layerTest` with
 * `McpToolsets.layer`, scripted models, a real SDK server over Streamable
 * HTTP): an agent's declared toolset offered as `<server>.<tool>`, a binding
 * at create, approvals on a destructive tool, a denial by capability tag, and
 * a child that inherits its parent's toolsets and opens its own protocol
 * session.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import * as McpToolsets from "../src/layers/McpToolsets.js"
import { Agent, ModelRef, PermissionPolicy, SubagentRef } from "../src/schema/Agent.js"
import { ApprovalAnswer } from "../src/schema/Callback.js"
import type { SessionId } from "../src/schema/Ids.js"
import { ToolsetRef } from "../src/schema/Toolset.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Troupe from "../src/Troupe.js"
import { principal } from "./support/fixtures.js"
// @ts-expect-error: a plain JavaScript test server
import { startHttp } from "./support/mcpServer.mjs"

const call = (id: string, name: string, args: object) => ({ id, name, arguments: JSON.stringify(args) })
const calls = (...list: ReadonlyArray<ReturnType<typeof call>>): ScriptedReply => ({ toolCalls: list })
const scripted = new ModelRef({ name: "scripted" })

const outcomes = (sessionId: SessionId) =>
  Effect.gen(function*() {
    const log = (yield* (yield* SessionStore).readLog(sessionId, { limit: 10_000 })).records
    const names = new Map(log.flatMap((r) => (r.body._tag === "operation_started" && r.body.kind === "tool" ? [[r.body.operationId, r.body.name] as const] : [])))
    return log.flatMap((r) => (r.body._tag === "operation_completed" && names.has(r.body.operationId) ? [{ name: names.get(r.body.operationId), output: r.body.output, isError: r.body.isError }] : []))
  })

const withServer = <A, E, R>(body: (http: any) => Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.flatMap(
    Effect.acquireRelease(Effect.promise(() => startHttp()), (http: any) => Effect.promise(() => http.close())),
    body
  ))

const runtime = (http: any, agents: ReadonlyArray<Agent>, scripts: Record<string, ReadonlyArray<ScriptedReply>>) =>
  Troupe.layerTest({
    agents,
    scripts: { agents: scripts },
    toolsets: McpToolsets.layer({ toolsets: [{ name: "kit", server: { url: http.url } }] })
  })

describe("MCP toolsets in sessions", () => {
  it.live("an agent's toolset: the model sees kit.* tools, calls run on the server, results reach the model", () =>
    withServer((http) => {
      const agent = new Agent({ name: "user", instructions: "Use tools.", model: scripted, toolsets: [new ToolsetRef({ name: "kit" })] })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent })
        const accepted = yield* sessions.send(me, session.id, { text: "go" })
        const result = yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        assert.strictEqual(result.output, "done")
        assert.deepStrictEqual(yield* outcomes(session.id), [
          { name: "kit.echo", output: "hello", isError: false },
          { name: "kit.fail", output: { error: "the widget is broken" }, isError: true }
        ])
      }).pipe(Effect.provide(runtime(http, [agent], {
        user: [calls(call("1", "kit.echo", { text: "hello" }), call("2", "kit.fail", {})), "done"]
      })))
    }))

  it.live("a destructive tool asks for an approval; a capability rule denies a whole server's tools", () =>
    withServer((http) => {
      const asking = new Agent({
        name: "asking",
        instructions: "Ask.",
        model: scripted,
        toolsets: [new ToolsetRef({ name: "kit" })],
        permissions: new PermissionPolicy({ capabilities: { destructive: "ask" } })
      })
      const denied = new Agent({
        name: "denied",
        instructions: "No.",
        model: scripted,
        toolsets: [new ToolsetRef({ name: "kit" })],
        permissions: new PermissionPolicy({ capabilities: { "mcp.kit": "deny" } })
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent: asking })
        const asked: Array<string> = []
        yield* Effect.forkScoped(sessions.provideCallbacks(me, session.id, ["approval"], (callback) =>
          Effect.sync(() => {
            asked.push((callback.request as { toolName: string }).toolName)
            return Option.some(new ApprovalAnswer({ decision: "approve" }))
          })))
        const first = yield* sessions.send(me, session.id, { text: "go" })
        yield* sessions.awaitTurn(me, session.id, first.turnId!)
        assert.deepStrictEqual(asked, ["kit.delete_all"])
        assert.deepStrictEqual((yield* outcomes(session.id)).map((o) => [o.name, o.output]), [["kit.echo", "x"], ["kit.delete_all", "deleted"]])

        const other = yield* sessions.create(me, { agent: denied })
        const second = yield* sessions.send(me, other.id, { text: "go" })
        yield* sessions.awaitTurn(me, other.id, second.turnId!)
        const [refused] = yield* outcomes(other.id)
        assert.strictEqual(refused!.isError, true)
        assert.include((refused!.output as { error: string }).error, "tool_not_allowed: kit.echo is denied by the agent policy (capability:mcp.kit)")
      }).pipe(Effect.provide(runtime(http, [asking, denied], {
        asking: [calls(call("1", "kit.echo", { text: "x" }), call("2", "kit.delete_all", {})), "done"],
        denied: [calls(call("1", "kit.echo", { text: "x" })), "done"]
      })))
    }))

  it.live("a binding at create adds a toolset; a child inherits it and opens its own protocol session", () =>
    withServer((http) => {
      const worker = new Agent({ name: "worker", instructions: "Work.", model: scripted })
      const lead = new Agent({
        name: "lead",
        instructions: "Delegate.",
        model: scripted,
        subagents: [new SubagentRef({ name: "worker", description: "works" })]
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const refused = yield* Effect.flip(sessions.create(me, { agent: lead, toolsets: [new ToolsetRef({ name: "nope" })] }))
        assert.strictEqual(refused._tag, "InvalidInput")
        const root = yield* sessions.create(me, { agent: lead, toolsets: [new ToolsetRef({ name: "kit", tools: ["echo"] })] })
        assert.deepStrictEqual(root.agent.toolsets?.map((ref) => ({ ...ref })), [{ id: "kit", tools: ["echo"] }])
        const accepted = yield* sessions.send(me, root.id, { text: "go" })
        const result = yield* sessions.awaitTurn(me, root.id, accepted.turnId!)
        assert.strictEqual(result.output, "lead done")
        const spawned = (yield* outcomes(root.id)).find((o) => o.name === "agents.spawn")!.output as { sessionId: SessionId }
        const child = yield* sessions.get(me, spawned.sessionId)
        assert.deepStrictEqual(child.agent.toolsets?.map((ref) => ({ ...ref })), [{ id: "kit", tools: ["echo"] }])
        assert.deepStrictEqual((yield* outcomes(child.id)).map((o) => [o.name, o.output]), [["kit.echo", "from the child"]])
        assert.deepStrictEqual((yield* outcomes(root.id)).filter((o) => o.name === "kit.echo").map((o) => o.output), ["from the lead"])
        // One protocol session per troupe session: the lead's and the child's.
        assert.strictEqual(http.sessions(), 2)
      }).pipe(Effect.provide(runtime(http, [lead, worker], {
        lead: [
          calls(call("1", "kit.echo", { text: "from the lead" })),
          calls(call("2", "agents.spawn", { agent: "worker", message: "do it" })),
          calls(call("3", "agents.wait", {})),
          "lead done"
        ],
        worker: [calls(call("1", "kit.echo", { text: "from the child" })), "worker done"]
      })))
    }))
})
