/**
 * An HTTP daemon in the test's scope: a runtime (memory, SQLite or
 * PostgreSQL), the catalog (`echo`, which echoes; `worker`, which asks to
 * `deploy` on a message starting "deploy" and then answers "done"), a token
 * table of two workspaces, and `HttpListener` on a free loopback port; plus a
 * small `fetch` helper and an SSE reader.
 */
import { Context, Effect, Layer, Ref, type Scope } from "effect"
import type * as InProcessHost from "../../src/actors/InProcessHost.js"
import type * as Model from "../../src/services/Model.js"
import type { Principal } from "../../src/schema/Principal.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import * as HttpListener from "../../src/server/HttpListener.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Sse from "../../src/http/Sse.js"
import * as Troupe from "../../src/Troupe.js"
import { deployingAgent, deployTool } from "../support/deploy.js"
import { agent, principal } from "../support/fixtures.js"

/** Tokens of workspace A (two), and of workspace B. */
export const TOKEN_A = "token-a"
export const TOKEN_B = "token-b"
export const principalA: Principal = principal("alice")
export const principalB: Principal = principal("bob")

/** Extra tokens (`t0`…`t{n-1}`), each its own workspace, for stream-limit tests. */
export const manyTokens = (n: number): Record<string, Principal> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`t${i}`, principal(`many-${i}`)]))

/** The scripted replies: `deploy…` asks for the tool once, then "done"; anything else is echoed. */
export const fallback = (request: Model.Request) => {
  const last = request.messages[request.messages.length - 1]
  if (last?.role === "user" && last.content.startsWith("deploy")) {
    return { toolCalls: [{ id: `call-${request.messages.length}`, name: "deploy", arguments: "{}" }] }
  }
  if (last?.role === "tool") return "done"
  return `echo: ${last?.content ?? ""}`
}

/** The agents served. */
export const agents = [agent("echo"), deployingAgent("worker", "Deploys.")]

/** Which store a runtime runs on. */
export type Store = { readonly _tag: "memory" } | { readonly _tag: "sqlite"; readonly filename: string } | {
  readonly _tag: "pg"
  readonly url: string
}

/** The runtime over `store`, with the deploy tool (and `host` tuning: `runs: false` is troupe inspect's). */
export const runtime = (store: Store, runs: Ref.Ref<number>, host?: InProcessHost.Options) => {
  const options: Troupe.RuntimeOptions = {
    scripts: { fallback },
    tools: Toolkit.layer([deployTool(runs)]),
    agents,
    host
  }
  switch (store._tag) {
    case "memory":
      return Troupe.layerTest(options)
    case "sqlite":
      return Troupe.layerSqlite({ filename: store.filename }, options)
    case "pg":
      return Troupe.layerPg({ url: store.url }, options)
  }
}

/** A running daemon. */
export interface Daemon {
  readonly url: string
  readonly port: number
  readonly runs: Ref.Ref<number>
  readonly listener: HttpListener.HttpListener["Type"]
}

/** Starts a daemon over `store` in this scope. */
export const start = (
  store: Store = { _tag: "memory" },
  options: Partial<HttpListener.Options> = {},
  tokens: Record<string, Principal> = {},
  host?: InProcessHost.Options
): Effect.Effect<Daemon, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const runs = yield* Ref.make(0)
    const context = yield* Layer.build(
      HttpListener.layer({ listen: [{ host: "127.0.0.1", port: 0 }], ...options }).pipe(
        Layer.provide(AgentCatalog.layer(agents)),
        // A tokenless request on a `trustLocal` listener is alice, as the daemon's local user; elsewhere tokens only.
        Layer.provide(Authenticator.layerTrustedLocal(principalA, Authenticator.layerStatic({ [TOKEN_A]: principalA, [TOKEN_B]: principalB, ...tokens }))),
        Layer.provide(runtime(store, runs, host))
      )
    )
    const listener = Context.get(context, HttpListener.HttpListener)
    const port = listener.addresses[0]!.port
    return { url: `http://127.0.0.1:${port}`, port, runs, listener }
  })

/** An answer: status, headers and the body parsed as JSON (or the text). */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

/** One request with `fetch`; `token` A by default, `null` for none. */
export const request = (
  daemon: { readonly url: string },
  method: string,
  path: string,
  options: { readonly body?: unknown; readonly raw?: string; readonly token?: string | null; readonly headers?: Record<string, string> } = {}
): Effect.Effect<Answer> =>
  Effect.promise(async () => {
    const headers: Record<string, string> = { ...options.headers }
    const token = options.token === undefined ? TOKEN_A : options.token
    if (token !== null) headers["authorization"] = `Bearer ${token}`
    let body: string | undefined
    if (options.raw !== undefined) body = options.raw
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers["content-type"] ??= "application/json"
    }
    const response = await fetch(`${daemon.url}${path}`, { method, headers, ...(body === undefined ? {} : { body }) })
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      // not JSON: kept as text
    }
    return { status: response.status, headers: response.headers, body: parsed }
  })

/** Reads an SSE answer until `stop` says so or the stream ends; every event parsed. */
export const readEvents = (
  daemon: { readonly url: string },
  path: string,
  options: {
    readonly token?: string
    readonly headers?: Record<string, string>
    readonly until?: (event: Sse.Event) => boolean
    readonly signal?: AbortSignal
  } = {}
): Effect.Effect<{ readonly status: number; readonly events: ReadonlyArray<Sse.Event>; readonly pings: number }> =>
  Effect.promise(async () => {
    const controller = new AbortController()
    options.signal?.addEventListener("abort", () => controller.abort())
    const response = await fetch(`${daemon.url}${path}`, {
      headers: { authorization: `Bearer ${options.token ?? TOKEN_A}`, ...options.headers },
      signal: controller.signal
    })
    const events: Array<Sse.Event> = []
    let pings = 0
    if (response.status !== 200 || response.body === null) return { status: response.status, events, pings }
    const parser = new Sse.Parser()
    const decoder = new TextDecoder()
    const reader = response.body.getReader()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        const text = decoder.decode(value, { stream: true })
        pings += text.split(": ping").length - 1
        for (const event of parser.push(text)) {
          events.push(event)
          if (options.until?.(event) === true) {
            controller.abort()
            return { status: response.status, events, pings }
          }
        }
      }
    } catch {
      // aborted
    }
    return { status: response.status, events, pings }
  })
