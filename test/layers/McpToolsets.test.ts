/**
 * `McpToolsets` against real MCP servers written with the SDK's server side
 * (test/support/mcpServer.mjs): over stdio (a child process per protocol
 * session) and over Streamable HTTP, and `@modelcontextprotocol/server-everything`
 * over stdio. Listing, calling, schema checks, `isError`, images as
 * references, a hanging server (timeout), a server dying mid-call (a tool
 * error; the next call reconnects), list changes, an interrupt during a slow
 * call (cancelled on the server), and tenancy.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Scope } from "effect"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as McpToolsets from "../../src/layers/McpToolsets.js"
import type { ToolContext } from "../../src/services/Tool.js"
import type { Toolsets } from "../../src/services/Toolsets.js"
import { ToolsetRef } from "../../src/schema/Toolset.js"
import { makeOperationId, makeSessionId, makeTurnId } from "../../src/schema/Ids.js"
import { principal } from "../support/fixtures.js"
// @ts-expect-error: a plain JavaScript test server
import { startHttp } from "../support/mcpServer.mjs"

const serverScript = join(import.meta.dirname, "../support/mcpServer.mjs")
const me = principal()
const logFile = () => join(mkdtempSync(join(tmpdir(), "troupe-mcp-")), "calls.log")
const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n") : [])

const stdio = (log: string, extra: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [serverScript],
  env: { MCP_LOG: log },
  ...extra
})

const context = Effect.gen(function*() {
  return {
    sessionId: yield* makeSessionId,
    turnId: yield* makeTurnId,
    operationId: yield* makeOperationId,
    callId: "c1",
    principal: me,
    agentPath: ["a"]
  } satisfies ToolContext
})

/** Opens `refs` of `port` for a fresh session and returns its toolset, with a call helper. */
const open = (port: Toolsets["Type"], refs: ReadonlyArray<ToolsetRef>, who = me) =>
  Effect.gen(function*() {
    const toolset = yield* port.open({ sessionId: yield* makeSessionId, principal: who }, refs)
    const specs = yield* toolset.specs
    const call = (name: string, args: unknown) =>
      Effect.flatMap(context, (ctx) => {
        const runnable = toolset.get(name)
        if (runnable === undefined) return Effect.dieMessage(`no tool ${name}`)
        return runnable.run(JSON.stringify(args), ctx)
      })
    return { toolset, specs, call }
  })

const port = (toolsets: McpToolsets.Options["toolsets"]) => McpToolsets.make({ toolsets })

describe("McpToolsets over stdio", () => {
  it.scoped("lists the tools as <server>.<tool> with their schemas and annotations as metadata, and calls them", () =>
    Effect.gen(function*() {
      const log = logFile()
      const { call, specs } = yield* open(yield* port([{ name: "kit", server: stdio(log) }]), [new ToolsetRef({ name: "kit" })])
      const byName = new Map(specs.map((spec) => [spec.name, spec]))
      assert.includeMembers([...byName.keys()], ["kit.echo", "kit.add", "kit.delete_all", "kit.count"])
      const echo = byName.get("kit.echo")!
      assert.deepStrictEqual([echo.sideEffect, echo.idempotency, echo.capabilities], ["none", "supported", ["mcp", "mcp.kit"]])
      assert.deepStrictEqual(echo.parameters.required, ["text"])
      assert.deepStrictEqual(byName.get("kit.delete_all")!.capabilities, ["mcp", "mcp.kit", "destructive"])
      assert.deepStrictEqual([byName.get("kit.count")!.sideEffect, byName.get("kit.count")!.idempotency], ["external", "unsupported"])

      assert.deepStrictEqual(yield* call("kit.echo", { text: "hi" }), { output: "hi", isError: false })
      assert.deepStrictEqual(yield* call("kit.add", { a: 2, b: 3 }), {
        output: { text: "5", structuredContent: { sum: 5 } },
        isError: false
      })
      assert.deepStrictEqual(yield* call("kit.fail", {}), { output: { error: "the widget is broken" }, isError: true })
      const picture = yield* call("kit.picture", {})
      const content = (picture.output as { content: ReadonlyArray<Record<string, unknown>> }).content
      assert.deepStrictEqual(content[1], {
        type: "image",
        mimeType: "image/png",
        bytes: 70,
        sha256: content[1]!.sha256
      })
      assert.notInclude(JSON.stringify(picture.output), "iVBOR")
    }))

  it.scoped("arguments are checked against the input schema before the call: nothing reaches the server", () =>
    Effect.gen(function*() {
      const log = logFile()
      const { call } = yield* open(yield* port([{ name: "kit", server: stdio(log) }]), [new ToolsetRef({ name: "kit" })])
      const wrong = yield* call("kit.add", { a: 2, b: "three" })
      assert.isTrue(wrong.isError)
      assert.match((wrong.output as { error: string }).error, /^invalid arguments for kit\.add: .*b/)
      const extra = yield* call("kit.echo", { text: "x", more: 1 })
      assert.isTrue(extra.isError)
      assert.isFalse(lines(log).some((line) => line.includes("call ")))
    }))

  it.scoped("an allow-list offers only the tools it names", () =>
    Effect.gen(function*() {
      const { specs, toolset } = yield* open(yield* port([{ name: "kit", server: stdio(logFile()) }]), [
        new ToolsetRef({ name: "kit", tools: ["echo", "add"] })
      ])
      assert.deepStrictEqual(specs.map((spec) => spec.name).sort(), ["kit.add", "kit.echo"])
      assert.isUndefined(toolset.get("kit.delete_all"))
    }))

  it.scoped("a server that hangs: the call times out as a tool error", () =>
    Effect.gen(function*() {
      const { call } = yield* open(yield* port([{ name: "kit", server: stdio(logFile(), { timeoutMs: 300 }) }]), [
        new ToolsetRef({ name: "kit" })
      ])
      const outcome = yield* call("kit.hang", {})
      assert.deepStrictEqual(outcome, { output: { error: "kit.hang timed out: no answer within 300 ms" }, isError: true })
      // The session is still usable.
      assert.deepStrictEqual(yield* call("kit.echo", { text: "after" }), { output: "after", isError: false })
    }))

  it.scoped("a server that dies mid-call: a tool error, and the next call starts it again", () =>
    Effect.gen(function*() {
      const log = logFile()
      const { call } = yield* open(yield* port([{ name: "kit", server: stdio(log) }]), [new ToolsetRef({ name: "kit" })])
      const died = yield* call("kit.die", {})
      assert.isTrue(died.isError)
      assert.match((died.output as { error: string }).error, /^kit\.die could not run: .*the next call connects again/)
      assert.deepStrictEqual(yield* call("kit.echo", { text: "back" }), { output: "back", isError: false })
      const pids = new Set(lines(log).filter((line) => line.endsWith("started")).map((line) => line.split(" ")[0]))
      assert.strictEqual(pids.size, 2)
    }))

  it.scoped("list changes: after notifications/tools/list_changed the tools are listed again", () =>
    Effect.gen(function*() {
      const { call, specs, toolset } = yield* open(yield* port([{ name: "kit", server: stdio(logFile()) }]), [
        new ToolsetRef({ name: "kit" })
      ])
      assert.isFalse(specs.some((spec) => spec.name === "kit.late"))
      yield* call("kit.grow", {})
      // The notification may trail the call's answer by a moment.
      let names: ReadonlyArray<string> = []
      for (let i = 0; i < 50 && !names.includes("kit.late"); i++) {
        names = (yield* toolset.specs).map((spec) => spec.name)
        if (!names.includes("kit.late")) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
      }
      assert.include(names, "kit.late")
      assert.deepStrictEqual(yield* call("kit.late", {}), { output: "late tool ran", isError: false })
    }))

  it.scoped("an interrupt during a slow call cancels it on the server", () =>
    Effect.gen(function*() {
      const log = logFile()
      const { call } = yield* open(yield* port([{ name: "kit", server: stdio(log) }]), [new ToolsetRef({ name: "kit" })])
      const fiber = yield* Effect.fork(call("kit.slow", { ms: 20_000 }))
      for (let i = 0; i < 100 && !lines(log).some((line) => line.includes("call slow")); i++) {
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
      }
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      for (let i = 0; i < 100 && !lines(log).some((line) => line.endsWith("cancelled slow")); i++) {
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
      }
      assert.isTrue(lines(log).some((line) => line.endsWith("cancelled slow")))
    }))

  it.effect("closing the scope stops the server's process", () =>
    Effect.gen(function*() {
      const log = logFile()
      const scope = yield* Scope.make()
      yield* Scope.extend(open(yield* port([{ name: "kit", server: stdio(log) }]), [new ToolsetRef({ name: "kit" })]), scope)
      const pid = Number(lines(log).find((line) => line.endsWith("started"))!.split(" ")[0])
      yield* Scope.close(scope, Exit.void)
      const alive = () => {
        try {
          process.kill(pid, 0)
          return true
        } catch {
          return false
        }
      }
      for (let i = 0; i < 100 && alive(); i++) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
      assert.isFalse(alive())
    }))

  it.scoped("server-everything runs over stdio: its echo tool is listed and called", () =>
    Effect.gen(function*() {
      const require = createRequire(import.meta.url)
      const entry = join(require.resolve("@modelcontextprotocol/server-everything/package.json"), "..", "dist", "index.js")
      const { call, specs } = yield* open(
        yield* port([{ name: "everything", server: { command: process.execPath, args: [entry, "stdio"] } }]),
        [new ToolsetRef({ name: "everything" })]
      )
      assert.include(specs.map((spec) => spec.name), "everything.echo")
      const echoed = yield* call("everything.echo", { message: "hello" })
      assert.isFalse(echoed.isError)
      assert.include(JSON.stringify(echoed.output), "hello")
    }), 30_000)
})

describe("McpToolsets over Streamable HTTP", () => {
  it.scoped("lists and calls; each open is its own protocol session, ended with its scope", () =>
    Effect.gen(function*() {
      const http = yield* Effect.acquireRelease(Effect.promise(() => startHttp()), (server: any) => Effect.promise(() => server.close()))
      const toolsets = yield* port([{ name: "web", server: { url: http.url, headers: { "x-tenant": "t1" } } }])
      const first = yield* open(toolsets, [new ToolsetRef({ name: "web" })])
      assert.include(first.specs.map((spec) => spec.name), "web.add")
      assert.deepStrictEqual(yield* first.call("web.echo", { text: "over http" }), { output: "over http", isError: false })
      const scope = yield* Scope.make()
      const second = yield* Scope.extend(open(toolsets, [new ToolsetRef({ name: "web" })]), scope)
      assert.deepStrictEqual(yield* second.call("web.fail", {}), { output: { error: "the widget is broken" }, isError: true })
      assert.strictEqual(http.sessions(), 2)
      assert.strictEqual(http.live(), 2)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(http.live(), 1)
    }))
})

describe("McpToolsets definitions", () => {
  it.effect("a toolset named agents (the prefix of troupe's own tools) is a defect, as two of one name are", () =>
    Effect.gen(function*() {
      const reserved = yield* Effect.exit(port([{ name: "agents", server: stdio(logFile()) }]))
      assert.isTrue(Exit.isFailure(reserved) && String(Cause.squash(reserved.cause)).includes("agents is reserved"))
      const twice = yield* Effect.exit(port([{ name: "kit", server: stdio(logFile()) }, { name: "kit", server: stdio(logFile()) }]))
      assert.isTrue(Exit.isFailure(twice) && String(Cause.squash(twice.cause)).includes("two toolsets are named kit"))
    }))
})

describe("McpToolsets tenancy", () => {
  it.scoped("a workspace's toolset is bound and opened only by that workspace", () =>
    Effect.gen(function*() {
      const other = principal()
      const toolsets = yield* port([
        { name: "crm", id: "crm-a", workspaceId: me.workspaceId, server: stdio(logFile()) },
        { name: "shared", server: stdio(logFile()) }
      ])
      const bound = yield* toolsets.bind(me, [new ToolsetRef({ name: "crm", tools: ["echo"] })])
      assert.deepStrictEqual(bound.map((ref) => ({ ...ref })), [{ id: "crm-a", tools: ["echo"] }])
      const refused = yield* Effect.flip(toolsets.bind(other, [new ToolsetRef({ name: "crm" })]))
      assert.strictEqual(refused._tag, "InvalidInput")
      assert.include(refused.message, "no toolset crm is served to this workspace")
      assert.strictEqual((yield* Effect.flip(toolsets.bind(other, [new ToolsetRef({ id: "crm-a" })])))._tag, "InvalidInput")
      // A session of the other workspace whose agent names it gets none of its tools.
      const theirs = yield* open(toolsets, [new ToolsetRef({ id: "crm-a" }), new ToolsetRef({ name: "shared" })], other)
      assert.isTrue(theirs.specs.every((spec) => spec.name.startsWith("shared.")))
      const mine = yield* open(toolsets, bound, me)
      assert.deepStrictEqual(mine.specs.map((spec) => spec.name), ["crm.echo"])
    }))
})
