/**
 * One protocol session with one MCP server, on the official SDK client: a
 * child process over stdio, or Streamable HTTP. It connects on first use and
 * again after the server went away (a process that died, a session the server
 * dropped), lists the tools at connect and again after
 * `notifications/tools/list_changed` (the list is marked stale and read again
 * on its next use), and bounds every call by a timeout. An interrupted call is
 * cancelled on the server (`notifications/cancelled`, through the SDK's
 * `AbortSignal`). Everything it opens belongs to the scope it was made in:
 * closing that scope closes the session and stops the process.
 *
 * @since 0.1.0
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { isHttp, type McpServer } from "../../schema/Toolset.js"
import type { CallResult, ListedTool } from "../../tools/mcp/McpTools.js"

/** Why a call got no result: the server could not be reached, went away, timed out, or answered with an error. */
export interface CallFailure {
  readonly reason: "unavailable" | "closed" | "timeout" | "error"
  readonly message: string
}

/** A protocol session with one server. */
export interface McpConnection {
  /** The tools listed now (connecting, or listing again after a change, first). */
  readonly tools: Effect.Effect<ReadonlyArray<ListedTool>, CallFailure>
  /** Calls `tool` with `args`; a call not answered within `timeoutMs` is cancelled and fails. */
  readonly call: (tool: string, args: Record<string, unknown>, timeoutMs: number) => Effect.Effect<CallResult, CallFailure>
  /** How many times it connected (the first time included). */
  readonly connects: () => number
}

/** Default bounds, in milliseconds. */
export const defaults = { timeoutMs: 60_000, connectTimeoutMs: 10_000 } as const

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** The parts of the MCP SDK a connection uses. */
interface Sdk {
  readonly Client: typeof import("@modelcontextprotocol/sdk/client/index.js").Client
  readonly Stdio: typeof import("@modelcontextprotocol/sdk/client/stdio.js")
  readonly StreamableHTTPClientTransport: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPClientTransport
  readonly Types: typeof import("@modelcontextprotocol/sdk/types.js")
}

/**
 * The MCP SDK, loaded at the first connect, not when troupe is imported: it
 * brings zod, ajv and an HTTP stack with it (docs/decisions/0044-drivers-load-when-used.md).
 */
const sdk: Effect.Effect<Sdk, CallFailure> = Effect.tryPromise({
  try: async () => {
    const [client, Stdio, http, Types] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      import("@modelcontextprotocol/sdk/client/stdio.js"),
      import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
      import("@modelcontextprotocol/sdk/types.js")
    ])
    return { Client: client.Client, Stdio, StreamableHTTPClientTransport: http.StreamableHTTPClientTransport, Types }
  },
  catch: (error): CallFailure => ({ reason: "unavailable", message: `the MCP SDK did not load: ${messageOf(error)}` })
})

interface Live {
  readonly sdk: Sdk
  readonly client: Client
  readonly scope: Scope.CloseableScope
  tools: ReadonlyArray<ListedTool> | undefined
  closed: boolean
}

const transportOf = ({ Stdio, StreamableHTTPClientTransport }: Sdk, config: McpServer) =>
  isHttp(config)
    ? new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: { ...config.headers } } })
    : new Stdio.StdioClientTransport({
      command: config.command,
      args: [...(config.args ?? [])],
      // A minimal environment (PATH, HOME, …) and what the configuration adds: never the whole of the host's.
      env: { ...Stdio.getDefaultEnvironment(), ...config.env },
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      stderr: "inherit"
    })

const listAll = (client: Client) =>
  Effect.tryPromise({
    try: async (signal) => {
      const tools: Array<ListedTool> = []
      let cursor: string | undefined
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor }, { signal })
        tools.push(...(page.tools as ReadonlyArray<ListedTool>))
        cursor = page.nextCursor
      } while (cursor !== undefined)
      return tools
    },
    catch: (error): CallFailure => ({ reason: "unavailable", message: `listing the tools failed: ${messageOf(error)}` })
  })

const failureOf = ({ Types: { ErrorCode, McpError } }: Sdk, error: unknown, timeoutMs: number): CallFailure => {
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return { reason: "timeout", message: `no answer within ${timeoutMs} ms` }
    if (error.code === ErrorCode.ConnectionClosed) return { reason: "closed", message: "the server closed the connection" }
    return { reason: "error", message: error.message }
  }
  return { reason: "closed", message: messageOf(error) }
}

/** A connection to `config` (named `server` in messages), owned by the current scope; nothing connects yet. */
export const make = (server: string, config: McpServer): Effect.Effect<McpConnection, never, Scope.Scope> =>
  Effect.gen(function*() {
    const parent = yield* Effect.scope
    const lock = yield* Effect.makeSemaphore(1)
    const connectTimeoutMs = config.connectTimeoutMs ?? defaults.connectTimeoutMs
    let live: Live | undefined
    let connects = 0

    const open = Effect.gen(function*() {
      const loaded = yield* sdk
      const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
      const client = new loaded.Client({ name: "troupe", version: "0.1.0" }, { capabilities: {} })
      const transport = transportOf(loaded, config)
      const entry: Live = { sdk: loaded, client, scope, tools: undefined, closed: false }
      // Any end of the transport (a process that exited, a dropped HTTP session) means: connect again next time.
      client.onclose = () => {
        entry.closed = true
      }
      client.setNotificationHandler(loaded.Types.ToolListChangedNotificationSchema, () => {
        entry.tools = undefined
      })
      // Before connecting: a connect that fails or times out still stops the process it started.
      yield* Scope.addFinalizer(scope, Effect.promise(async () => {
        if (transport instanceof loaded.StreamableHTTPClientTransport) await transport.terminateSession().catch(() => undefined)
        await client.close().catch(() => undefined)
      }))
      const connected = yield* Effect.tryPromise({
        try: (signal) => client.connect(transport, { signal, timeout: connectTimeoutMs }),
        catch: (error): CallFailure => ({ reason: "unavailable", message: `cannot connect to ${server}: ${messageOf(error)}` })
      }).pipe(
        Effect.timeoutFail({
          duration: connectTimeoutMs,
          onTimeout: (): CallFailure => ({ reason: "unavailable", message: `${server} did not connect within ${connectTimeoutMs} ms` })
        }),
        Effect.exit
      )
      if (Exit.isFailure(connected)) {
        yield* Scope.close(scope, Exit.void)
        return yield* Effect.failCause(connected.cause)
      }
      connects++
      return entry
    })

    // The live session, or a new one in place of a closed one (whose process and session are ended first).
    const current = lock.withPermits(1)(Effect.suspend(() => {
      const known = live
      if (known !== undefined && !known.closed) return Effect.succeed(known)
      live = undefined
      return Effect.zipRight(
        known === undefined ? Effect.void : Scope.close(known.scope, Exit.void),
        Effect.tap(open, (entry) => Effect.sync(() => (live = entry)))
      )
    }))

    const tools = Effect.flatMap(current, (entry) =>
      entry.tools !== undefined
        ? Effect.succeed(entry.tools)
        : Effect.tap(listAll(entry.client), (listed) => Effect.sync(() => (entry.tools = listed)))
    )

    const call = (tool: string, args: Record<string, unknown>, timeoutMs: number) =>
      Effect.flatMap(current, (entry) =>
        Effect.tryPromise({
          try: (signal) => entry.client.callTool({ name: tool, arguments: args }, undefined, { signal, timeout: timeoutMs }),
          catch: (error) => failureOf(entry.sdk, error, timeoutMs)
        }).pipe(
          Effect.map((result) => result as CallResult),
          Effect.tapError((failure) => Effect.sync(() => {
            if (failure.reason === "closed") entry.closed = true
          }))
        ))

    return { tools, call, connects: () => connects }
  })
