/**
 * MCP toolsets through the whole runtime (`Troupe.layerTest` with
 * `McpToolsets.layer`, scripted models, a real SDK server over Streamable
 * HTTP): an agent's declared toolset offered as `<server>.<tool>`, a binding
 * at create, approvals on a destructive tool, a denial by capability tag, and
 * a child that inherits its parent's toolsets and opens its own protocol
 * session; tenancy: a workspace's toolset is neither bound nor used by another
 * workspace, whose request for it is refused exactly as one for a missing
 * toolset is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import * as McpToolsets from "../src/layers/McpToolsets.js"
import { Agent, ModelRef, PermissionPolicy, SubagentRef } from "../src/schema/Agent.js"
import { ApprovalAnswer } from "../src/schema/Callback.js"
import type { SessionId } from "../src/schema/Ids.js"
import { ToolsetRef } from "../src/schema/Toolset.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Tool from "../src/services/Tool.js"
import * as Toolkit from "../src/services/Toolkit.js"
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

describe("MCP toolsets beside an agent's own tools", () => {
  it.live("an agent's own tool named like an MCP tool is the one offered and the one that runs", () =>
    withServer((http) => {
      const own = Tool.make({
        name: "kit.echo",
        description: "A hand-written echo.",
        parameters: Schema.Struct({ text: Schema.String }),
        success: Schema.String,
        handler: ({ text }) => Effect.succeed(`hand-written ${text}`)
      })
      const agent = new Agent({ name: "mixed", instructions: "Use tools.", model: scripted, tools: [own.spec], toolsets: [new ToolsetRef({ name: "kit" })] })
      const layer = Troupe.layerTest({
        agents: [agent],
        scripts: { agents: { mixed: [calls(call("1", "kit.echo", { text: "x" }), call("2", "kit.add", { a: 1, b: 2 })), "done"] } },
        tools: Toolkit.layer([own]),
        toolsets: McpToolsets.layer({ toolsets: [{ name: "kit", server: { url: http.url } }] })
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const me = principal()
        const session = yield* sessions.create(me, { agent })
        const accepted = yield* sessions.send(me, session.id, { text: "go" })
        yield* sessions.awaitTurn(me, session.id, accepted.turnId!)
        assert.deepStrictEqual(yield* outcomes(session.id), [
          { name: "kit.echo", output: "hand-written x", isError: false },
          { name: "kit.add", output: { text: "3", structuredContent: { sum: 3 } }, isError: false }
        ])
      }).pipe(Effect.provide(layer))
    }))
})

describe("MCP toolsets and tenancy in sessions", () => {
  it.live("a workspace's toolset: bound and used by its workspace; another's binding by id or name is refused as a missing one is, and its agent's declaration offers nothing", () =>
    withServer((http) => {
      const mine = principal()
      const theirs = principal()
      const plain = new Agent({ name: "plain", instructions: "Use tools.", model: scripted })
      const declaring = new Agent({ name: "declaring", instructions: "Use tools.", model: scripted, toolsets: [new ToolsetRef({ id: "crm-a" })] })
      const layer = Troupe.layerTest({
        agents: [plain, declaring],
        scripts: {
          agents: {
            plain: [calls(call("1", "crm.echo", { text: "mine" })), "done"],
            declaring: [calls(call("1", "crm.echo", { text: "theirs" })), "done"]
          }
        },
        toolsets: McpToolsets.layer({ toolsets: [{ name: "crm", id: "crm-a", workspaceId: mine.workspaceId, server: { url: http.url } }] })
      })
      return Effect.gen(function*() {
        const sessions = yield* Sessions
        const refusal = (principal: typeof mine, ref: ToolsetRef) =>
          Effect.map(Effect.flip(sessions.create(principal, { agent: plain, toolsets: [ref] })), (error) => ({
            tag: error._tag,
            message: error.message.replace(ref.id ?? ref.name ?? "", "<ref>")
          }))
        const missing = yield* refusal(theirs, new ToolsetRef({ id: "crm-z" }))
        assert.strictEqual(missing.tag, "InvalidInput")
        assert.deepStrictEqual(yield* refusal(theirs, new ToolsetRef({ id: "crm-a" })), missing)
        assert.deepStrictEqual(yield* refusal(theirs, new ToolsetRef({ name: "crm" })), missing)
        assert.strictEqual((yield* sessions.list(theirs)).items.length, 0)

        const bound = yield* sessions.create(mine, { agent: plain, toolsets: [new ToolsetRef({ name: "crm" })] })
        const first = yield* sessions.send(mine, bound.id, { text: "go" })
        yield* sessions.awaitTurn(mine, bound.id, first.turnId!)
        assert.deepStrictEqual(yield* outcomes(bound.id), [{ name: "crm.echo", output: "mine", isError: false }])

        // Their agent names it in code: the session is created, but the toolset is not opened for them.
        const other = yield* sessions.create(theirs, { agent: declaring })
        const second = yield* sessions.send(theirs, other.id, { text: "go" })
        yield* sessions.awaitTurn(theirs, other.id, second.turnId!)
        assert.deepStrictEqual(yield* outcomes(other.id), [{ name: "crm.echo", output: { error: "unknown tool: crm.echo" }, isError: true }])
        assert.strictEqual(http.sessions(), 1)
      }).pipe(Effect.provide(layer))
    }))
})
