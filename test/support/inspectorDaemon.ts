/**
 * Run as a child process by test/inspector/Inspector.test.ts: a daemon on a
 * SQLite file serving the HTTP API and the inspector on 127.0.0.1:PORT (0:
 * any), with two tokens of two workspaces. With `--seed` it starts a tree:
 * a `lead` root spawns `helper` (answers at once) and `guarded` (asks for
 * an approval before its `delete_file` tool runs); the lead waits for both.
 *
 *   inspectorDaemon.ts FILE PORT [--seed]
 *
 * Beside it, a read-only listener (`writes: "none"`, as `troupe inspect`
 * serves) on a free port.
 *
 * Prints `READONLY <port>`, `LISTENING <port>` and, when seeded, `ROOT <sessionId>`.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { writeSync } from "node:fs"
import { Agent, ModelRef, PermissionPolicy, SubagentRef } from "../../src/schema/Agent.js"
import { SubagentPolicy } from "../../src/schema/Policy.js"
import { Principal } from "../../src/schema/Principal.js"
import * as Inspector from "../../src/inspector/Inspector.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Tool from "../../src/services/Tool.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"

/** The workspace the test's page signs in to, and another one. */
export const owner = new Principal({
  customerId: "00000000-0000-4000-8000-0000000000a1",
  organizationId: "00000000-0000-4000-8000-0000000000a2",
  workspaceId: "00000000-0000-4000-8000-0000000000a3"
})
const stranger = new Principal({
  customerId: "00000000-0000-4000-8000-0000000000b1",
  organizationId: "00000000-0000-4000-8000-0000000000b2",
  workspaceId: "00000000-0000-4000-8000-0000000000b3"
})
/** The tokens of the two workspaces. */
export const tokens = { owner: "owner-token-0123456789", stranger: "stranger-token-0123456789" }

const deleteFile = Tool.make({
  name: "delete_file",
  description: "Deletes a file.",
  parameters: Schema.Struct({ path: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "write", idempotency: "unsupported" },
  handler: ({ path }) => Effect.succeed(`deleted ${path}`)
})

const model = new ModelRef({ name: "scripted" })
const helper = new Agent({ name: "helper", instructions: "help", model })
const guarded = new Agent({
  name: "guarded",
  instructions: "delete carefully",
  model,
  tools: [deleteFile.spec],
  permissions: new PermissionPolicy({ rules: { delete_file: "ask" } })
})
const lead = new Agent({
  name: "lead",
  instructions: "delegate",
  model,
  subagents: [new SubagentRef({ name: "helper" }), new SubagentRef({ name: "guarded" })]
})

const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) })

/** What this script needs of the HTTP listener (issue 29), loaded by path so the branch compiles without it. */
interface Listener {
  readonly layer: (options: Record<string, unknown>) => Layer.Layer<unknown, unknown, unknown>
  readonly HttpListener: Context.Tag<unknown, { readonly addresses: ReadonlyArray<{ readonly port: number }> }>
}
const listenerModule = "../../src/server/HttpListener.js"

const program = Effect.gen(function*() {
  const HttpListener = (yield* Effect.promise(() => import(listenerModule))) as Listener
  const [file, port, seed] = process.argv.slice(2)
  const runtime = yield* Layer.build(Troupe.layerSqlite({ filename: file! }, {
    agents: [lead, helper, guarded],
    tools: Toolkit.layer([deleteFile]),
    scripts: {
      agents: {
        lead: [
          { text: "Delegating.", toolCalls: [call("s1", "agents.spawn", { agent: "helper", message: "say hi" }), call("s2", "agents.spawn", { agent: "guarded", message: "remove old.log" })] },
          { toolCalls: [call("w1", "agents.wait", {})] },
          { toolCalls: [call("w2", "agents.wait", {})] },
          "All done: both children finished."
        ],
        guarded: [{ toolCalls: [call("d1", "delete_file", { path: "old.log" })] }, "Removed old.log."]
      }
    }
  }))
  /** One listener over the runtime, with the two workspaces' tokens; its port. */
  const serve = (options: Record<string, unknown>) =>
    Effect.map(
      Layer.build(HttpListener.layer({ heartbeat: "2 seconds", ...options }).pipe(
        Layer.provide(AgentCatalog.layer([lead, helper, guarded])),
        Layer.provide(Authenticator.layerStatic({ [tokens.owner]: owner, [tokens.stranger]: stranger })),
        Layer.provide(Layer.succeedContext(runtime))
      )),
      (built) => Context.unsafeGet(built, HttpListener.HttpListener).addresses[0]!.port
    )
  const listening = yield* serve({ listen: [{ host: "127.0.0.1", port: Number(port) }], staticAssets: yield* Inspector.make })
  // Beside it, a read-only listener over the same runtime, as `troupe inspect` serves.
  const readOnly = yield* serve({ listen: [{ host: "127.0.0.1", port: 0 }], staticAssets: yield* Inspector.makeWith({ writes: "none" }), writes: "none" })
  writeSync(1, `READONLY ${readOnly}\n`)
  writeSync(1, `LISTENING ${listening}\n`)
  if (seed === "--seed") {
    const sessions = Context.get(runtime, Sessions)
    const root = yield* sessions.create(owner, {
      agent: lead,
      title: "Clean up the logs",
      subagentPolicy: new SubagentPolicy({ maxDepth: 2, maxChildTurns: 10 })
    })
    yield* sessions.send(owner, root.id, { text: "clean up, with help" })
    writeSync(1, `ROOT ${root.id}\n`)
  }
  return yield* Effect.never
}) as Effect.Effect<never, unknown, never>

Effect.runFork(Effect.scoped(program))
