/**
 * The agents file's `builtins` (issue 32's wiring): names and groups become the
 * built-ins' frozen specs (server tools with their policy metadata); a name that
 * is no built-in, or a declared tool of a built-in's name, is an error that
 * says where; and the host toolkit `troupe run`/`serve` build
 * (`WorkspaceToolkit.toolkit`) runs them on the `--workspace` directory (the
 * daemon's own front door is test/cli/AgentsTree.test.ts's file).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, HashMap, Option } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as AgentsFile from "../../src/cli/AgentsFile.js"
import * as WorkspaceToolkit from "../../src/cli/WorkspaceToolkit.js"
import { Principal } from "../../src/schema/Principal.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import { context } from "../tools/harness.js"
import * as Troupe from "../../src/Troupe.js"

const file = (builtins: unknown, tools?: unknown) =>
  JSON.stringify({ agents: [{ name: "coder", instructions: "Code.", builtins, ...(tools === undefined ? {} : { tools }) }] })

describe("agents file: builtins", () => {
  it.effect("names and groups become the built-ins' specs, run by the host", () =>
    Effect.gen(function*() {
      const [agent] = yield* AgentsFile.parse("a.json", file(["read", "bash"]))
      const names = agent!.tools.map((tool) => tool.name)
      assert.deepStrictEqual(names, ["read_file", "find_files", "search_files", "bash", "read_artifact"])
      assert.isTrue(agent!.tools.every((tool) => !tool.client))
      assert.strictEqual(agent!.tools.find((tool) => tool.name === "bash")!.sideEffect, "execute")
      assert.isTrue(WorkspaceToolkit.usesBuiltins([agent!]))
      const [ops] = yield* AgentsFile.parse("a.json", file(["process", "process.read"]))
      assert.deepStrictEqual(ops!.tools.map((tool) => [tool.name, tool.sideEffect]), [
        ["process.start", "execute"],
        ["process.list", "none"],
        ["process.read", "none"],
        ["process.write", "execute"],
        ["process.signal", "execute"]
      ])
    }))

  it.effect("an unknown name, and a declared tool of a built-in's name, are errors that say where", () =>
    Effect.gen(function*() {
      const unknown = yield* Effect.flip(AgentsFile.parse("a.json", file(["read", "rm_rf"])))
      assert.isTrue(unknown.problems.some((p) => p.startsWith("agents.0.builtins.1: expected")), unknown.problems.join(" | "))
      const twice = yield* Effect.flip(AgentsFile.parse("a.json", file(["files"], [{ name: "write_file" }])))
      assert.deepStrictEqual(twice.problems, ["agents.0.tools.0.name: write_file is one of its builtins: leave one out"])
    }))

  it.live("an agent's env and --env reach its bash, the agent's over --env; a bad variable name says where", () =>
    Effect.gen(function*() {
      const text = JSON.stringify({
        agents: [
          { name: "coder", instructions: "Code.", builtins: ["bash"], env: { STAGE: "agent", ONLY: "coder" } },
          { name: "other", instructions: "Other.", builtins: ["bash"] }
        ]
      })
      const declared = yield* AgentsFile.parseDeclared("a.json", text)
      assert.deepStrictEqual(declared.env, { coder: { STAGE: "agent", ONLY: "coder" } })
      const root = mkdtempSync(join(tmpdir(), "troupe-env-"))
      const tools = WorkspaceToolkit.toolkit(
        { workspace: Option.some(root), env: Option.some(HashMap.make(["STAGE", "run"], ["RUN", "yes"])), agentEnv: declared.env },
        declared.agents,
        undefined
      )!
      const echo = (agent: string) =>
        Effect.flatMap(Toolkit.Toolkit, (toolkit) =>
          toolkit.get("bash")!.run(JSON.stringify({ command: "echo \"$STAGE $RUN $ONLY\"" }), { ...context(), agentPath: ["lead", agent] }))
      const [coder, other] = yield* Effect.all([echo("coder"), echo("other")]).pipe(Effect.provide(tools))
      assert.strictEqual((coder!.output as { output: string }).output.trim(), "agent yes coder")
      assert.strictEqual((other!.output as { output: string }).output.trim(), "run yes")
      const bad = yield* Effect.flip(AgentsFile.parse("a.json", JSON.stringify({ agents: [{ name: "x", instructions: "X.", env: { "NOT-A-NAME": "1" } }] })))
      assert.isTrue(bad.problems.some((p) => p.startsWith("agents.0.env") && p.includes("variable name")), bad.problems.join(" | "))
    }))

  it.live("the host's toolkit runs them in --workspace, and leaves the tools alone without builtins", () =>
    Effect.gen(function*() {
      const root = mkdtempSync(join(tmpdir(), "troupe-builtins-"))
      writeFileSync(join(root, "notes.txt"), "the answer is 42\n")
      const [coder] = yield* AgentsFile.parse("a.json", file(["files"]))
      assert.isUndefined(WorkspaceToolkit.toolkit({}, [], undefined), "no builtins, no --workspace: no workspace opened")
      const tools = WorkspaceToolkit.toolkit({ workspace: Option.some(root) }, [coder!], undefined)
      const scripts = {
        fallback: (request: { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: string }> }) => {
          const last = request.messages.at(-1)!
          if (last.role === "tool") return `read: ${last.content}`
          return { toolCalls: [{ id: "c1", name: "read_file", arguments: JSON.stringify({ path: "notes.txt" }) }] }
        }
      }
      const me = new Principal({
        customerId: "00000000-0000-4000-8000-000000000001",
        organizationId: "00000000-0000-4000-8000-000000000002",
        workspaceId: "00000000-0000-4000-8000-000000000003"
      })
      const result = yield* Effect.gen(function*() {
        const sessions = yield* Sessions
        const session = yield* sessions.create(me, { agent: coder! })
        return yield* sessions.prompt(me, session.id, "what is the answer?")
      }).pipe(Effect.provide(Troupe.layerTest({ agents: [coder!], tools, scripts: scripts as never })))
      assert.include(result.text, "the answer is 42")
    }))
})
