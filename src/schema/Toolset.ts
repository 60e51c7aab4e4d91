/**
 * Toolsets: named groups of tools that an agent declares and a session binds
 * at create (DESIGN §10), and the MCP servers a host serves them from, in the
 * shape people already write (`mcpServers: { name: { command, args, env } |
 * { url, headers } }`, as in Claude Desktop's or Cursor's configuration).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A toolset as an agent declares it or a session binds it: by `name` (looked
 * up among the toolsets the session's workspace sees) or by `id`; with
 * `tools`, only those of its tools (by the server's own names).
 */
export class ToolsetRef extends Schema.Class<ToolsetRef>("troupe/ToolsetRef")(
  Schema.Struct({
    name: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128))),
    id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128))),
    tools: Schema.optional(Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128))))
  }).pipe(Schema.filter((ref) => ref.name !== undefined || ref.id !== undefined || "a toolset is named by name or id"))
) {}

/** A `ToolsetRef` as a plain value, as `session.create` and `POST /v1/sessions` carry it (`toolsets`). */
export const ToolsetBinding = Schema.encodedSchema(ToolsetRef)
/** @since 0.1.0 */
export type ToolsetBinding = typeof ToolsetBinding.Type

/** The `ToolsetRef`s of a create request's bindings (already decoded, so already checked). */
export const refsOf = (bindings: ReadonlyArray<ToolsetBinding> | undefined): ReadonlyArray<ToolsetRef> | undefined =>
  bindings?.map((binding) => new ToolsetRef(binding))

/** How long one call may take, and connecting, in milliseconds (both optional). */
const timeouts = {
  /** A call not answered by then is a tool error (default 60 000). */
  timeoutMs: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 3_600_000))),
  /** Connecting and listing the tools (default 10 000). */
  connectTimeoutMs: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 600_000)))
}

/** An MCP server run as a child process, spoken to over its stdin and stdout. */
export const StdioServer = Schema.Struct({
  type: Schema.optional(Schema.Literal("stdio")),
  command: Schema.String.pipe(Schema.minLength(1)),
  args: Schema.optional(Schema.Array(Schema.String)),
  /** Added to a minimal inherited environment (`PATH`, `HOME`, …), never the whole of the host's. */
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  cwd: Schema.optional(Schema.String),
  ...timeouts
})
/** @since 0.1.0 */
export type StdioServer = typeof StdioServer.Type

/** An MCP server reached over Streamable HTTP. */
export const HttpServer = Schema.Struct({
  type: Schema.optional(Schema.Literal("http", "streamable-http")),
  url: Schema.String.pipe(Schema.pattern(/^https?:\/\//, { message: () => "expected an http:// or https:// URL" })),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  ...timeouts
})
/** @since 0.1.0 */
export type HttpServer = typeof HttpServer.Type

/** An MCP server: a command to run, or a URL. */
export const McpServer = Schema.Union(StdioServer, HttpServer)
/** @since 0.1.0 */
export type McpServer = typeof McpServer.Type

/** The server name troupe's own `agents.*` tools take. */
export const RESERVED_SERVER_NAME = "agents"

/**
 * A server name: it prefixes its tools' names (`<server>.<tool>`), so it is a
 * tool-name prefix; `agents` is not one, since its tools would take the names
 * of troupe's own `agents.*` tools.
 */
export const ServerName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/, {
    message: () => "expected a server name: a letter, then up to 31 letters, digits, '_' or '-'"
  }),
  Schema.filter((name) => name !== RESERVED_SERVER_NAME || "agents is reserved: troupe's own agents.* tools have those names")
)

/** The `mcpServers` object of a configuration file. */
export const McpServers = Schema.Record({ key: ServerName, value: McpServer })

/**
 * A toolset a host serves: an MCP server under a name (the prefix of its
 * tools), an id (default: the name), and, when it belongs to one workspace
 * only, that workspace (other workspaces neither see nor bind it).
 */
export interface ToolsetDefinition {
  readonly name: string
  readonly id?: string | undefined
  readonly workspaceId?: string | undefined
  readonly server: McpServer
}

/** Whether a server definition is an HTTP one. */
export const isHttp = (server: McpServer): server is HttpServer => "url" in server

/**
 * The toolset declarations of a child: its own, then its parent's that it
 * does not already declare (a child inherits its parent's declarations; it
 * opens its own protocol sessions for them).
 */
export const inherit = (
  own: ReadonlyArray<ToolsetRef> | undefined,
  parent: ReadonlyArray<ToolsetRef> | undefined
): ReadonlyArray<ToolsetRef> | undefined => {
  if (parent === undefined || parent.length === 0) return own
  const key = (ref: ToolsetRef) => `${ref.id ?? ""}/${ref.name ?? ""}`
  const seen = new Set((own ?? []).map(key))
  const merged = [...(own ?? []), ...parent.filter((ref) => !seen.has(key(ref)))]
  return merged
}
