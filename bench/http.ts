/**
 * The HTTP API beside the CBOR socket, in one run against one daemon (a child
 * process serving both over the same memory runtime, trusted-local):
 *
 * - **a one-tool-turn session**: create + send + await (the model asks for a
 *   server tool, then answers), one session after another: latency p50/p99
 *   and CPU per session on the client (this process) and on the server (the
 *   child's `process.cpuUsage`, asked over IPC). The socket's client is
 *   `SessionClient` (await: its event stream until `turn_ended`); the HTTP
 *   client is plain `fetch` (await: `GET …/turns/{id}?wait=30`).
 * - **event delivery**: a follower on an event stream (SSE over `fetch`, or
 *   `SessionClient.events`) while turns run; latency from each event's commit
 *   (its `at`, ms) to its arrival here (`Date.now()`), p50/p99 (±1 ms).
 * - **memory per open event stream**: `--streams` idle SSE streams on one
 *   session, then 60 `SessionClient.events` streams on one socket
 *   connection (it takes at most 64); the server's heap and RSS after a GC, before and after.
 *
 *   node bench/run.mjs http [--sessions 300] [--warmup 50] [--turns 100] [--streams 500] [--only <text>]
 */
import { Context, Effect, Fiber, Layer, Option, Stream } from "effect"
import { fork } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as SessionClient from "../src/client/SessionClient.js"
import * as Sse from "../src/http/Sse.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import * as AgentCatalog from "../src/services/AgentCatalog.js"
import type * as Model from "../src/services/Model.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Authenticator from "../src/server/Authenticator.js"
import * as HttpListener from "../src/server/HttpListener.js"
import * as Server from "../src/server/Server.js"
import * as SessionRoutes from "../src/server/SessionRoutes.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal, cpuMicros, echo, loadAverage, percentile } from "./support.js"

const sessionCount = Number(arg("sessions", "300"))
const warmup = Number(arg("warmup", "50"))
const turnCount = Number(arg("turns", "100"))
const streamCount = Number(arg("streams", "500"))
const only = arg("only", "")

const benchAgent = new Agent({ name: "bench", instructions: "benchmark", model: new ModelRef({ name: "scripted" }), tools: [echo.spec] })

/** One tool call, then the answer. */
const fallback = (request: Model.Request) => {
  const last = request.messages[request.messages.length - 1]
  return last?.role === "tool" ? "done" : { toolCalls: [{ id: "call-1", name: "echo", arguments: JSON.stringify({ text: "hi" }) }] }
}

// ---- the daemon (child process) ----

const serve = (path: string) =>
  Effect.gen(function*() {
    const runtime = Troupe.layerTest({ scripts: { fallback }, tools: Toolkit.layer([echo]), agents: [benchAgent] })
    const catalog = AgentCatalog.layer([benchAgent])
    const app = Layer.provideMerge(Layer.mergeAll(SessionRoutes.layer.pipe(Layer.provide(catalog)), catalog, Authenticator.layerTrustedLocal(benchPrincipal)), runtime)
    const servers = Layer.merge(
      Server.layer({ unix: path }),
      HttpListener.layer({ listen: [{ host: "127.0.0.1", port: 0 }], trustLocal: true, streamsPerPrincipal: 1_000_000, maxConnections: 100_000 })
    )
    process.on("message", (message) => {
      if (message === "cpu") process.send?.({ cpu: cpuMicros() })
      if (message === "memory") {
        ;(globalThis as { gc?: () => void }).gc?.()
        const usage = process.memoryUsage()
        process.send?.({ heap: usage.heapUsed, rss: usage.rss })
      }
    })
    yield* Layer.launch(
      Layer.provideMerge(servers, app).pipe(
        Layer.tap((context) => Effect.sync(() => process.send?.({ port: Context.get(context, HttpListener.HttpListener).addresses[0]!.port })))
      )
    )
  })

// ---- the drivers (this process) ----

type Child = ReturnType<typeof fork>

/** Asks the child `question` and waits for the answer that has `key`. */
const ask = <A>(child: Child, question: string, key: string) =>
  new Promise<A>((resolve) => {
    const on = (message: Record<string, unknown>) => {
      if (key in message) {
        child.off("message", on)
        resolve(message as A)
      }
    }
    child.on("message", on)
    child.send(question)
  })

const post = async (base: string, path: string, body: unknown) => {
  const response = await fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  return (await response.json()) as any
}

/** A one-tool-turn session over HTTP: create, send, await. */
const httpSession = async (base: string) => {
  const { session } = await post(base, "/v1/sessions", { agent: "bench" })
  const accepted = await post(base, `/v1/sessions/${session.id}/messages`, { text: "hello" })
  const turn = (await (await fetch(`${base}/v1/sessions/${session.id}/turns/${accepted.turnId}?wait=30`)).json()) as any
  if (turn.turn?.output !== "done") throw new Error(`HTTP turn: ${JSON.stringify(turn)}`)
}

/** The same over the socket with `SessionClient`; the turn awaited on its event stream. */
const socketSession = (client: SessionClient.SessionClient) =>
  Effect.gen(function*() {
    const session = yield* client.create({ agent: "bench" })
    const accepted = yield* client.send(session.id, { text: "hello" })
    const ended = yield* client.events(session.id, { after: (accepted.cursor ?? 1) - 1 }).pipe(
      Stream.filterMap((frame) =>
        frame.event._tag === "durable" && frame.event.record._tag === "turn_ended" ? Option.some(frame.event.record) : Option.none()
      ),
      Stream.runHead
    )
    if (Option.getOrUndefined(ended)?.output !== "done") throw new Error("socket turn did not end with done")
  })

interface Figures {
  readonly p50: number
  readonly p99: number
  readonly clientCpu: number
  readonly serverCpu: number
}

/** Runs `one` `warmup` times, then `sessionCount` times measured. */
const measure = async (child: Child, one: () => Promise<void>): Promise<Figures> => {
  for (let i = 0; i < warmup; i++) await one()
  const latencies: Array<number> = []
  const server0 = (await ask<{ cpu: number }>(child, "cpu", "cpu")).cpu
  const client0 = cpuMicros()
  for (let i = 0; i < sessionCount; i++) {
    const started = performance.now()
    await one()
    latencies.push(performance.now() - started)
  }
  const clientCpu = (cpuMicros() - client0) / sessionCount
  const serverCpu = ((await ask<{ cpu: number }>(child, "cpu", "cpu")).cpu - server0) / sessionCount
  latencies.sort((a, b) => a - b)
  return { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), clientCpu, serverCpu }
}

/** Follows `sessionId` over SSE while `turnCount` turns run one after another; commit-to-arrival latencies (ms). */
const sseDelivery = async (base: string) => {
  const { session } = await post(base, "/v1/sessions", { agent: "bench" })
  const controller = new AbortController()
  const response = await fetch(`${base}/v1/sessions/${session.id}/events`, { signal: controller.signal })
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const parser = new Sse.Parser()
  const latencies: Array<number> = []
  let ended = 0
  const reading = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return
        const now = Date.now()
        for (const event of parser.push(decoder.decode(value, { stream: true }))) {
          if (event.id === undefined || event.event === "end") continue
          const data = JSON.parse(event.data)
          if (data.cursor > 1) latencies.push(now - data.event.at)
          if (event.event === "turn_ended") ended++
        }
      }
    } catch {
      // aborted
    }
  })()
  for (let i = 0; i < turnCount; i++) {
    const accepted = await post(base, `/v1/sessions/${session.id}/messages`, { text: "hello" })
    await fetch(`${base}/v1/sessions/${session.id}/turns/${accepted.turnId}?wait=30`).then((r) => r.json())
    while (ended <= i) await new Promise((resolve) => setTimeout(resolve, 1))
  }
  controller.abort()
  await reading
  return latencies.sort((a, b) => a - b)
}

/** The same follower over the socket (`SessionClient.events`). */
const socketDelivery = (client: SessionClient.SessionClient) =>
  Effect.gen(function*() {
    const session = yield* client.create({ agent: "bench" })
    const latencies: Array<number> = []
    let ended = 0
    const follower = yield* client.events(session.id).pipe(
      Stream.runForEach((frame) =>
        Effect.sync(() => {
          const now = Date.now()
          if (frame.event._tag !== "durable" || frame.event.cursor <= 1) return
          latencies.push(now - frame.event.at)
          if (frame.event.record._tag === "turn_ended") ended++
        })
      ),
      Effect.fork
    )
    for (let i = 0; i < turnCount; i++) {
      yield* client.send(session.id, { text: "hello" })
      while (ended <= i) yield* Effect.sleep("1 millis")
    }
    yield* Fiber.interrupt(follower)
    return latencies.sort((a, b) => a - b)
  })

/** Opens `n` idle SSE streams on one session; the server's heap and RSS per stream (after a GC). */
const streamMemory = async (child: Child, base: string, port: number, n: number) => {
  const { session } = await post(base, "/v1/sessions", { agent: "bench" })
  const before = await ask<{ heap: number; rss: number }>(child, "memory", "heap")
  const requests: Array<http.ClientRequest> = []
  for (let i = 0; i < n; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, n - i) }, () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port, path: `/v1/sessions/${session.id}/events`, agent: false }, (res) => {
          res.resume()
          if (res.statusCode === 200) resolve()
          else reject(new Error(`stream ${res.statusCode}`))
        })
        req.on("error", () => undefined)
        requests.push(req)
        req.end()
      })))
  }
  await new Promise((resolve) => setTimeout(resolve, 500))
  const after = await ask<{ heap: number; rss: number }>(child, "memory", "heap")
  requests.forEach((req) => req.destroy())
  return { heap: (after.heap - before.heap) / n, rss: (after.rss - before.rss) / n }
}

/** The same with `n` `SessionClient.events` streams on one socket connection. */
const socketStreamMemory = (child: Child, client: SessionClient.SessionClient, n: number) =>
  Effect.gen(function*() {
    const session = yield* client.create({ agent: "bench" })
    const before = yield* Effect.promise(() => ask<{ heap: number; rss: number }>(child, "memory", "heap"))
    let seen = 0
    const followers = yield* Effect.forEach(Array.from({ length: n }), () =>
      Effect.fork(Stream.runForEach(client.events(session.id), () => Effect.sync(() => void seen++))))
    while (seen < n) yield* Effect.sleep("10 millis")
    yield* Effect.sleep("500 millis")
    const after = yield* Effect.promise(() => ask<{ heap: number; rss: number }>(child, "memory", "heap"))
    yield* Fiber.interruptAll(followers)
    return { heap: (after.heap - before.heap) / n, rss: (after.rss - before.rss) / n }
  })

const ms = (x: number) => x.toFixed(2)
const us = (x: number) => Math.round(x).toLocaleString("en-US")

const main = async () => {
  console.log(`load average at start: ${loadAverage()} (${cpus().length} CPUs)`)
  console.log(`${sessionCount} one-tool-turn sessions (after ${warmup} to warm up), ${turnCount} followed turns, ${streamCount} idle streams`)
  const dir = mkdtempSync(join(tmpdir(), "th-"))
  const path = join(dir, "troupe.sock")
  const child = fork(fileURLToPath(import.meta.url), ["--serve", path], {
    execArgv: [...process.execArgv, "--expose-gc", ...(process.env["BENCH_SERVER_ARGS"]?.split(" ").filter(Boolean) ?? [])],
    stdio: ["ignore", "ignore", "inherit", "ipc"]
  })
  try {
    const { port } = await new Promise<{ port: number }>((resolve, reject) => {
      child.once("message", (message) => resolve(message as { port: number }))
      child.once("exit", (code) => reject(new Error(`server exited with ${code}`)))
    })
    const base = `http://127.0.0.1:${port}`
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const client = yield* SessionClient.connect(path)
      const run = (name: string, use: () => Promise<void>) => (only === "" || name.includes(only) ? Effect.promise(use) : Effect.void)
      yield* run("session", async () => {
        const socket = await measure(child, () => Effect.runPromise(socketSession(client)))
        const overHttp = await measure(child, () => httpSession(base))
        for (const [name, f] of [["socket (SessionClient)", socket], ["HTTP (fetch)", overHttp]] as const) {
          console.log(
            `session create+send+await, ${name}: p50 ${ms(f.p50)} ms, p99 ${ms(f.p99)} ms; CPU per session: client ${us(f.clientCpu)} µs, server ${us(f.serverCpu)} µs`
          )
        }
        console.log(`HTTP/socket CPU per session: server ${(overHttp.serverCpu / socket.serverCpu).toFixed(2)}x, client ${(overHttp.clientCpu / socket.clientCpu).toFixed(2)}x, both ${((overHttp.serverCpu + overHttp.clientCpu) / (socket.serverCpu + socket.clientCpu)).toFixed(2)}x`)
      })
      yield* run("delivery", async () => {
        const sse = await sseDelivery(base)
        const socket = await Effect.runPromise(socketDelivery(client))
        console.log(`event delivery, SSE: p50 ${percentile(sse, 0.5)} ms, p99 ${percentile(sse, 0.99)} ms (${sse.length} events)`)
        console.log(`event delivery, socket: p50 ${percentile(socket, 0.5)} ms, p99 ${percentile(socket, 0.99)} ms (${socket.length} events)`)
      })
      yield* run("memory", async () => {
        const memory = await streamMemory(child, base, port, streamCount)
        console.log(`memory per open SSE stream (${streamCount} idle): heap ${us(memory.heap)} B, RSS ${us(memory.rss)} B`)
        // A socket connection takes at most 64 streams (`maxStreams`): 60 on one connection.
        const socket = await Effect.runPromise(socketStreamMemory(child, client, 60))
        console.log(`memory per open socket event stream (60 idle, one connection): heap ${us(socket.heap)} B, RSS ${us(socket.rss)} B`)
      })
    })))
    console.log(`load average at end: ${loadAverage()}`)
  } finally {
    child.kill()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[2] === "--serve") {
  Effect.runFork(serve(process.argv[3]!))
} else {
  void main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
