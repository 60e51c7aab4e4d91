/**
 * The agents file's `mcpServers` (the shape of Claude Desktop's and Cursor's
 * configuration) and each agent's `toolsets`: parsed into the servers a daemon
 * serves and the agents' frozen declarations; a toolset naming no server, a
 * server of the wrong shape, or one named `agents` (troupe's own tools' prefix)
 * is an `AgentsFileError` that says where.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as AgentsFile from "../../src/cli/AgentsFile.js"

const file = (extra: object, toolsets: unknown = ["github", { name: "web", tools: ["fetch"] }]) =>
  JSON.stringify({
    agents: [{ name: "helper", instructions: "Help.", toolsets }],
    mcpServers: {
      github: { command: "npx", args: ["-y", "@modelcontextprotocol/server-github"], env: { GITHUB_TOKEN: "t" } },
      web: { url: "https://mcp.example.com/mcp", headers: { authorization: "Bearer x" } }
    },
    ...extra
  })

describe("agents file: mcpServers and toolsets", () => {
  it.effect("parses servers of both shapes and the agents' toolsets", () =>
    Effect.gen(function*() {
      const declared = yield* AgentsFile.parseDeclared("a.json", file({}))
      assert.deepStrictEqual(Object.keys(declared.mcpServers), ["github", "web"])
      assert.deepStrictEqual(declared.mcpServers.web, { url: "https://mcp.example.com/mcp", headers: { authorization: "Bearer x" } })
      assert.deepStrictEqual(declared.agents[0]!.toolsets?.map((ref) => ({ ...ref })), [{ name: "github" }, { name: "web", tools: ["fetch"] }])
    }))

  it.effect("a toolset naming no server, a server of neither shape, and a server named agents are errors that say where", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(AgentsFile.parseDeclared("a.json", file({}, ["gitlab"])))
      assert.strictEqual(missing.message, "agents file a.json: agents.0.toolsets.0: no server named gitlab in mcpServers")
      const wrong = yield* Effect.flip(AgentsFile.parseDeclared("a.json", JSON.stringify({
        agents: [{ name: "helper", instructions: "Help." }],
        mcpServers: { broken: { args: ["x"] } }
      })))
      assert.include(wrong.message, "mcpServers")
      const reserved = yield* Effect.flip(AgentsFile.parseDeclared("a.json", JSON.stringify({
        agents: [{ name: "helper", instructions: "Help." }],
        mcpServers: { agents: { command: "x" }, "my server": { command: "x" } }
      })))
      assert.strictEqual(reserved.message, [
        "agents file a.json: mcpServers.agents: agents is reserved: troupe's own agents.* tools have those names",
        "mcpServers.my server: expected a server name: a letter, then up to 31 letters, digits, '_' or '-'"
      ].join("; "))
      assert.strictEqual((yield* AgentsFile.parse("a.json", file({}))).length, 1)
    }))
})
