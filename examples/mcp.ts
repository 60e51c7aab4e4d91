/**
 * Tools from an MCP server: the agent declares the toolset `notes`, served by
 * `examples/mcp-server.ts` over stdio (the process is started for the session
 * and stopped with it). The model sees `notes.count_words` and
 * `notes.archive_note`; the destructive one asks for an approval first, which
 * a callback provider answers. The scripted model plays the model.
 *
 *   npx tsx examples/mcp.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Option } from "effect"
import { fileURLToPath } from "node:url"
import { Agent, McpToolsets, Principal, Sessions, Toolset, Troupe } from "troupe"

const principal = new Principal.Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

// The same shape as `mcpServers` in an agents file (or Claude Desktop's configuration).
const servers = {
  notes: { command: process.execPath, args: ["--import", "tsx", fileURLToPath(new URL("mcp-server.ts", import.meta.url))] }
}

const agent = new Agent.Agent({
  name: "librarian",
  instructions: "Keep the notes tidy.",
  model: new Agent.ModelRef({ name: "scripted" }),
  toolsets: [new Toolset.ToolsetRef({ name: "notes" })],
  permissions: new Agent.PermissionPolicy({ capabilities: { destructive: "ask" } })
})

const call = (id: string, name: string, args: object) => ({ id, name, arguments: JSON.stringify(args) })

const program = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const session = yield* sessions.create(principal, { agent })
  // The handler is typed by the kinds it serves: here an approval request in, an approval answer out.
  yield* Effect.forkScoped(sessions.provideCallbacks(principal, session.id, ["approval"], (callback) =>
    Console.log(`  approval asked for ${callback.request.toolName}`).pipe(
      Effect.as(Option.some({ decision: "approve" as const }))
    )))
  const accepted = yield* sessions.send(principal, session.id, { text: "Count and archive the note." })
  const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!)
  yield* Console.log(`answer: ${result.output}`)
})

program.pipe(
  Effect.scoped,
  Effect.provide(Troupe.layerTest({
    toolsets: McpToolsets.layer({ toolsets: McpToolsets.fromServers(servers) }),
    scripts: {
      agents: {
        librarian: [
          { toolCalls: [call("1", "notes.count_words", { text: "the quick brown fox" })] },
          { toolCalls: [call("2", "notes.archive_note", { title: "fox" })] },
          "The note has 4 words and is archived."
        ]
      }
    }
  })),
  NodeRuntime.runMain
)
