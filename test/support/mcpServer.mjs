// An MCP server for the tests, written with the SDK's own server side: plain JavaScript so that a stdio
// child starts in a few tens of milliseconds. `node mcpServer.mjs` serves stdio; `startHttp()` serves
// Streamable HTTP in the calling process. Calls are logged (to $MCP_LOG, or the `log` given) so a test
// can see what reached the server: calls, cancellations, sessions. The `record` tools are for crash tests:
// each call is logged (its side effect), then held while the file $MCP_HOLD exists, so that a test can kill
// the daemon between the call and its receipt.
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { randomUUID } from "node:crypto"
import { appendFileSync, existsSync } from "node:fs"
import { createServer } from "node:http"

const object = (properties, required = []) => ({ type: "object", properties, required, additionalProperties: false })
const PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

const baseTools = [
  { name: "echo", description: "Echoes text.", inputSchema: object({ text: { type: "string" } }, ["text"]),
    annotations: { readOnlyHint: true, idempotentHint: true } },
  { name: "add", description: "Adds two numbers.", inputSchema: object({ a: { type: "number" }, b: { type: "number" } }, ["a", "b"]),
    outputSchema: object({ sum: { type: "number" } }, ["sum"]), annotations: { readOnlyHint: true } },
  { name: "fail", description: "Reports an error.", inputSchema: object({}), annotations: { readOnlyHint: true } },
  { name: "hang", description: "Never answers.", inputSchema: object({}), annotations: { readOnlyHint: true } },
  { name: "slow", description: "Answers after ms.", inputSchema: object({ ms: { type: "integer", minimum: 0 } }, ["ms"]),
    annotations: { readOnlyHint: true } },
  { name: "die", description: "Exits mid-call.", inputSchema: object({}), annotations: { destructiveHint: false } },
  { name: "picture", description: "Returns an image.", inputSchema: object({}), annotations: { readOnlyHint: true } },
  { name: "count", description: "Counts calls (not idempotent).", inputSchema: object({}), annotations: { destructiveHint: false } },
  { name: "delete_all", description: "Deletes everything.", inputSchema: object({}), annotations: { destructiveHint: true } },
  { name: "grow", description: "Adds the tool `late`.", inputSchema: object({}), annotations: { destructiveHint: false } },
  { name: "record", description: "Records a note (not idempotent).", inputSchema: object({ note: { type: "string" } }, ["note"]),
    annotations: { destructiveHint: false } },
  { name: "record_idempotent", description: "Records a note (idempotent).", inputSchema: object({ note: { type: "string" } }, ["note"]),
    annotations: { destructiveHint: false, idempotentHint: true } }
]

/** Resolves once the file $MCP_HOLD is gone (at once when it is not set). */
const held = () => new Promise((resolve) => {
  const hold = process.env.MCP_HOLD
  const check = () => (hold === undefined || !existsSync(hold) ? resolve() : setTimeout(check, 20))
  check()
})

/** A server with the test tools; `log(line)` hears what happens. */
export const build = (log) => {
  const server = new Server({ name: "test-tools", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } })
  const tools = [...baseTools]
  let counted = 0
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args = {} } = request.params
    log(`call ${name} ${JSON.stringify(args)}`)
    const text = (t) => ({ content: [{ type: "text", text: t }] })
    switch (name) {
      case "echo": return text(String(args.text))
      case "add": return { content: [{ type: "text", text: String(args.a + args.b) }], structuredContent: { sum: args.a + args.b } }
      case "fail": return { content: [{ type: "text", text: "the widget is broken" }], isError: true }
      case "hang": return new Promise(() => {})
      case "slow": return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(text("slept")), args.ms)
        extra.signal.addEventListener("abort", () => {
          clearTimeout(timer)
          log("cancelled slow")
        })
      })
      case "die": setTimeout(() => process.exit(3), 5); return new Promise(() => {})
      case "picture": return { content: [{ type: "text", text: "a pixel" }, { type: "image", data: PIXEL, mimeType: "image/png" }] }
      case "count": counted++; return text(`count ${counted}`)
      case "delete_all": return text("deleted")
      case "late": return text("late tool ran")
      case "record":
      case "record_idempotent": await held(); return text(`recorded ${args.note}`)
      case "grow":
        if (!tools.some((t) => t.name === "late")) {
          tools.push({ name: "late", description: "Added later.", inputSchema: object({}), annotations: { readOnlyHint: true } })
          await server.sendToolListChanged()
        }
        return text("grown")
      default: return { content: [{ type: "text", text: `unknown tool ${name}` }], isError: true }
    }
  })
  return server
}

/** Serves Streamable HTTP on a free port: `{ url, sessions, close }` (`sessions()`: how many were opened). */
export const startHttp = async (log = () => {}) => {
  const transports = new Map()
  let opened = 0
  const http = createServer(async (req, res) => {
    const id = req.headers["mcp-session-id"]
    let transport = typeof id === "string" ? transports.get(id) : undefined
    if (transport === undefined) {
      if (typeof id === "string") {
        res.writeHead(404).end()
        return
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => {
          opened++
          log(`session ${sid} ${req.headers["x-tenant"] ?? ""}`)
          transports.set(sid, transport)
        }
      })
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId)
      await build(log).connect(transport)
    }
    await transport.handleRequest(req, res)
  })
  await new Promise((resolve) => http.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${http.address().port}/mcp`,
    sessions: () => opened,
    live: () => transports.size,
    close: () => new Promise((resolve) => { http.closeAllConnections(); http.close(() => resolve()) })
  }
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  const file = process.env.MCP_LOG
  const log = (line) => file && appendFileSync(file, `${process.pid} ${line}\n`)
  log("started")
  await build(log).connect(new StdioServerTransport())
  // The client went away (a daemon killed with SIGKILL closes the pipe): a held call must not keep this process alive.
  process.stdin.on("end", () => process.exit(0))
}
