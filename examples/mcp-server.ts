/**
 * A small MCP server written with the official SDK's server side, over stdio:
 * the tools `examples/mcp.ts` gives an agent. `count_words` only reads;
 * `archive_note` is destructive, so a policy can ask before it runs.
 *
 *   npx tsx examples/mcp-server.ts   (it speaks MCP on stdin/stdout)
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"

const server = new Server({ name: "notes", version: "1.0.0" }, { capabilities: { tools: {} } })
const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] })

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "count_words",
      description: "Counts the words of a text.",
      inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      annotations: { readOnlyHint: true, idempotentHint: true }
    },
    {
      name: "archive_note",
      description: "Archives a note for good.",
      inputSchema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
      annotations: { destructiveHint: true }
    }
  ]
}))

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const args = (request.params.arguments ?? {}) as Record<string, string>
  switch (request.params.name) {
    case "count_words":
      return text(`${args.text!.split(/\s+/).filter(Boolean).length} words`)
    case "archive_note":
      return text(`archived "${args.title}"`)
    default:
      return { ...text(`unknown tool ${request.params.name}`), isError: true }
  }
})

await server.connect(new StdioServerTransport())
// The client went away (its host was killed, and the pipe closed): stop, rather than live on as an orphan.
process.stdin.on("end", () => process.exit(0))
