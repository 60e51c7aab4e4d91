/**
 * MCP toolset figures (issue 31): the overhead of one MCP tool call over a
 * hand-written tool, at the `Runnable` level the turn loop calls (argument
 * check, protocol round trip, result mapping), over stdio and over
 * Streamable HTTP, p50/p99; and the cost of connecting a toolset at a
 * session's first turn (open, connect, list), stdio (a process started) and
 * HTTP. The server is test/support/mcpServer.mjs (the SDK's server side).
 *
 *   node bench/run.mjs mcp [--calls 2000] [--connects 20]
 */
import { Effect, Exit, Scope } from "effect"
import { join } from "node:path"
import * as McpToolsets from "../src/layers/McpToolsets.js"
import { makeOperationId, makeSessionId, makeTurnId } from "../src/schema/Ids.js"
import { ToolsetRef } from "../src/schema/Toolset.js"
import * as Toolkit from "../src/services/Toolkit.js"
import type { Runnable } from "../src/services/Toolkit.js"
import { arg, benchPrincipal, echo, loadAverage, percentile } from "./support.js"

const script = join(process.cwd(), "test/support/mcpServer.mjs")
const calls = Number(arg("calls", "2000"))
const connects = Number(arg("connects", "20"))
const { startHttp } = await import(join(process.cwd(), "test/support/mcpServer.mjs"))

const figures = (label: string, micros: Array<number>) => {
  micros.sort((a, b) => a - b)
  console.log(`${label}: p50 ${percentile(micros, 0.5).toFixed(0)} µs, p99 ${percentile(micros, 0.99).toFixed(0)} µs (n=${micros.length})`)
  return percentile(micros, 0.5)
}

const timeCalls = (runnable: Runnable) =>
  Effect.gen(function*() {
    const context = {
      sessionId: yield* makeSessionId,
      turnId: yield* makeTurnId,
      operationId: yield* makeOperationId,
      callId: "c",
      principal: benchPrincipal,
      agentPath: ["bench"]
    }
    const micros: Array<number> = []
    for (let i = 0; i < calls + 100; i++) {
      const start = process.hrtime.bigint()
      yield* runnable.run(`{"text":"hello ${i}"}`, context)
      if (i >= 100) micros.push(Number(process.hrtime.bigint() - start) / 1000)
    }
    return micros
  })

const program = Effect.gen(function*() {
  console.log(`load ${loadAverage()}`)
  const handWritten = (yield* Effect.provide(Toolkit.Toolkit, Toolkit.layer([echo]))).get("echo")!
  const base = figures("hand-written echo", yield* timeCalls(handWritten))
  const http = yield* Effect.acquireRelease(Effect.promise(() => startHttp()), (h: any) => Effect.promise(() => h.close()))
  const servers = {
    stdio: { command: process.execPath, args: [script] },
    http: { url: http.url as string }
  }
  const port = yield* McpToolsets.make({ toolsets: McpToolsets.fromServers(servers) })
  for (const name of ["stdio", "http"] as const) {
    const toolset = yield* port.open({ sessionId: yield* makeSessionId, principal: benchPrincipal }, [new ToolsetRef({ name })])
    yield* toolset.specs
    const p50 = figures(`MCP ${name} echo`, yield* timeCalls(toolset.get(`${name}.echo`)!))
    console.log(`  overhead over hand-written at p50: ${(p50 - base).toFixed(0)} µs`)
    const connect: Array<number> = []
    for (let i = 0; i < connects; i++) {
      const scope = yield* Scope.make()
      const start = process.hrtime.bigint()
      const opened = yield* Scope.extend(port.open({ sessionId: yield* makeSessionId, principal: benchPrincipal }, [new ToolsetRef({ name })]), scope)
      yield* opened.specs
      connect.push(Number(process.hrtime.bigint() - start) / 1000)
      yield* Scope.close(scope, Exit.void)
    }
    figures(`connect ${name} toolset (open + initialize + tools/list)`, connect)
  }
  console.log(`load ${loadAverage()}`)
})

await Effect.runPromise(Effect.scoped(program))
