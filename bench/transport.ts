/**
 * Transport figures: request/response round trips per second on ONE unix
 * socket connection, pipelined (`--depth` requests outstanding) and one at a
 * time, against the troupe daemon (`Server` with a one-route `Router`), and
 * the same messages as JSON lines against a minimal JSON-lines echo server,
 * for a ratio. Each figure is the median of `--rounds` rounds.
 *
 *   npx tsx bench/transport.ts [--rounds 5] [--requests 100000] [--serial 10000] [--depth 64] [--only <text>]
 *
 * `--only` runs the figures whose name contains the text.
 *
 * Servers run in a child process (the daemon as it would run), the drivers
 * in this one, so client and server do not share an event loop. Two drivers
 * measure troupe: a raw one (precomputed frames on a `net.Socket`, every
 * answer's envelope decoded, no Effect) that shows what the server sustains,
 * and `AgentClient` (the Effect API), which adds the client's own cost. The
 * JSON-lines driver is the raw driver's twin: one `JSON.parse` per answer.
 *
 * Messages: `core.ping` (answered by the connection itself), `bench.echo`
 * (a routed request: decoded, a handler fiber forked, its answer encoded),
 * and for JSON lines `{"id":n,"t":"core.ping","p":{}}` → `core.pong`.
 */
import { Chunk, Effect, Layer } from "effect"
import { fork } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as AgentClient from "../src/client/AgentClient.js"
import * as Envelope from "../src/protocol/Envelope.js"
import * as Frame from "../src/protocol/Frame.js"
import * as Handshake from "../src/protocol/Handshake.js"
import { Principal } from "../src/schema/Principal.js"
import * as Authenticator from "../src/server/Authenticator.js"
import { Router } from "../src/server/Router.js"
import * as Server from "../src/server/Server.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1]! : fallback
}
const rounds = Number(arg("rounds", "5"))
const pipelinedRequests = Number(arg("requests", "100000"))
const serialRequests = Number(arg("serial", "10000"))
const depth = Number(arg("depth", "64"))
const only = arg("only", "")

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

// ---- servers (child process) ----

const serveTroupe = (path: string) =>
  Effect.gen(function*() {
    const router = Router.of({
      route: (type) =>
        type === "bench.echo"
          ? { kind: "request", handler: (exchange) => Effect.succeed({ type: "bench.echoed", payload: exchange.payload }) }
          : undefined
    })
    const local = new Principal({
      customerId: "00000000-0000-4000-8000-000000000001",
      organizationId: "00000000-0000-4000-8000-000000000002",
      workspaceId: "00000000-0000-4000-8000-000000000003"
    })
    yield* Layer.launch(
      Server.layer({ unix: path }).pipe(
        Layer.provide(Layer.merge(Layer.succeed(Router, router), Authenticator.layerTrustedLocal(local))),
        Layer.tap(() => Effect.sync(() => process.send?.("ready")))
      )
    )
  })

const serveJsonLines = (path: string) => {
  const server = net.createServer((socket) => {
    let pending = ""
    socket.on("error", () => undefined)
    socket.on("data", (chunk: Buffer) => {
      pending += chunk.toString("utf8")
      let out = ""
      let newline = pending.indexOf("\n")
      while (newline >= 0) {
        const message = JSON.parse(pending.slice(0, newline)) as { id: number; t: string; p: unknown }
        pending = pending.slice(newline + 1)
        out += JSON.stringify({ id: message.id, t: message.t === "core.ping" ? "core.pong" : "bench.echoed", p: message.p }) +
          "\n"
        newline = pending.indexOf("\n")
      }
      if (out.length > 0) socket.write(out)
    })
  })
  server.listen(path, () => process.send?.("ready"))
}

// ---- drivers (this process) ----

/** Keeps `outstanding` requests in flight until `total` were answered; round trips per second. */
const driveTroupe = (path: string, type: string, payload: unknown, total: number, outstanding: number) =>
  new Promise<number>((resolve, reject) => {
    const frames = new Map<number, Uint8Array>()
    for (let id = 1; id <= outstanding; id++) {
      frames.set(id, Frame.encodeUnsafe({ id, flags: 0, body: Envelope.encodeBodyUnsafe(type, payload) }))
    }
    const socket = net.connect({ path })
    const decoder = Frame.makeDecoder()
    let handshake = 0
    let sent = 0
    let answered = 0
    let started = 0
    socket.on("error", reject)
    socket.on("data", (chunk: Buffer) => {
      let rest: Uint8Array = chunk
      if (handshake < Handshake.PREAMBLE_SIZE) {
        const skip = Math.min(Handshake.PREAMBLE_SIZE - handshake, rest.length)
        handshake += skip
        rest = rest.subarray(skip)
      }
      const out: Array<Uint8Array> = []
      for (const frame of decoder.push(rest).frames) {
        if (frame.id === 0) {
          // core.ready: start.
          started = performance.now()
          for (let id = 1; id <= outstanding && sent < total; id++, sent++) out.push(frames.get(id)!)
          continue
        }
        Envelope.decodeBody(frame.body)
        answered++
        if (answered === total) {
          const seconds = (performance.now() - started) / 1000
          socket.destroy()
          return resolve(total / seconds)
        }
        if (sent < total) {
          sent++
          out.push(frames.get(frame.id)!)
        }
      }
      if (out.length > 0) socket.write(Buffer.concat(out))
    })
  })

const driveJsonLines = (path: string, total: number, outstanding: number) =>
  new Promise<number>((resolve, reject) => {
    const lines = new Map<number, string>()
    for (let id = 1; id <= outstanding; id++) lines.set(id, JSON.stringify({ id, t: "core.ping", p: {} }) + "\n")
    const socket = net.connect({ path })
    let pending = ""
    let sent = 0
    let answered = 0
    let started = 0
    socket.on("error", reject)
    socket.on("connect", () => {
      started = performance.now()
      let out = ""
      for (let id = 1; id <= outstanding && sent < total; id++, sent++) out += lines.get(id)!
      socket.write(out)
    })
    socket.on("data", (chunk: Buffer) => {
      pending += chunk.toString("utf8")
      let out = ""
      let newline = pending.indexOf("\n")
      while (newline >= 0) {
        const answer = JSON.parse(pending.slice(0, newline)) as { id: number }
        pending = pending.slice(newline + 1)
        answered++
        if (answered === total) {
          const seconds = (performance.now() - started) / 1000
          socket.destroy()
          return resolve(total / seconds)
        }
        if (sent < total) {
          sent++
          out += lines.get(answer.id)!
        }
        newline = pending.indexOf("\n")
      }
      if (out.length > 0) socket.write(out)
    })
  })

/** The same through `AgentClient`'s Effect API: `outstanding` fibers each issuing requests in turn. */
const driveClient = (path: string, type: string, payload: unknown, total: number, outstanding: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const client = yield* AgentClient.make(path)
    const body = Envelope.encodeBodyUnsafe(type, payload)
    const started = performance.now()
    const perWorker = Math.ceil(total / outstanding)
    yield* Effect.forEach(
      Chunk.makeBy(outstanding, (i) => i),
      () =>
        Effect.forEach(Chunk.makeBy(perWorker, (i) => i), () => Effect.map(client.request(0, body), (f) => Envelope.decodeBody(f.body)), {
          discard: true
        }),
      { concurrency: "unbounded", discard: true }
    )
    return (perWorker * outstanding) / ((performance.now() - started) / 1000)
  })))

const startChild = (kind: "troupe" | "jsonl", path: string) =>
  new Promise<ReturnType<typeof fork>>((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ["--serve", kind, path], {
      // BENCH_SERVER_ARGS adds node flags to the servers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
      execArgv: [...process.execArgv, ...(process.env["BENCH_SERVER_ARGS"]?.split(" ").filter(Boolean) ?? [])],
      stdio: ["ignore", "ignore", "inherit", "ipc"]
    })
    child.once("message", () => resolve(child))
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`server exited with ${code}`)))
  })

const main = async () => {
  console.log(`load average at start: ${loadavg().map((x) => x.toFixed(2)).join(" ")}`)
  console.log(`rounds ${rounds}, pipelined ${pipelinedRequests} requests at depth ${depth}, serial ${serialRequests}`)
  const dir = mkdtempSync(join(tmpdir(), "tb-"))
  const troupePath = join(dir, "troupe.sock")
  const jsonPath = join(dir, "jsonl.sock")
  const troupe = await startChild("troupe", troupePath)
  const jsonl = await startChild("jsonl", jsonPath)
  try {
    const figures: Array<[string, () => Promise<number>]> = [
      ["troupe core.ping, raw driver, pipelined", () => driveTroupe(troupePath, "core.ping", {}, pipelinedRequests, depth)],
      ["troupe core.ping, raw driver, one at a time", () => driveTroupe(troupePath, "core.ping", {}, serialRequests, 1)],
      ["troupe bench.echo (routed), raw driver, pipelined", () =>
        driveTroupe(troupePath, "bench.echo", { n: 1 }, pipelinedRequests, depth)],
      ["troupe bench.echo (routed), raw driver, one at a time", () =>
        driveTroupe(troupePath, "bench.echo", { n: 1 }, serialRequests, 1)],
      ["troupe bench.echo (routed), AgentClient, pipelined", () =>
        driveClient(troupePath, "bench.echo", { n: 1 }, pipelinedRequests, depth)],
      ["troupe bench.echo (routed), AgentClient, one at a time", () =>
        driveClient(troupePath, "bench.echo", { n: 1 }, serialRequests, 1)],
      ["JSON lines ping, pipelined", () => driveJsonLines(jsonPath, pipelinedRequests, depth)],
      ["JSON lines ping, one at a time", () => driveJsonLines(jsonPath, serialRequests, 1)]
    ]
    const results = new Map<string, number>()
    for (const [name, run] of figures.filter(([name]) => name.includes(only))) {
      // One warm-up round (JIT), then the measured ones.
      await run()
      const samples: Array<number> = []
      for (let i = 0; i < rounds; i++) samples.push(await run())
      const value = median(samples)
      results.set(name, value)
      console.log(`${name.padEnd(58)} ${Math.round(value).toLocaleString("en-US").padStart(9)} req/s  (${samples.map((s) => Math.round(s)).join(", ")})`)
    }
    const ratio = (a: string, b: string) =>
      results.has(a) && results.has(b) ? (results.get(a)! / results.get(b)!).toFixed(2) : "-"
    console.log("")
    console.log(`ratio troupe ping / JSON lines, pipelined:     ${ratio("troupe core.ping, raw driver, pipelined", "JSON lines ping, pipelined")}`)
    console.log(`ratio troupe ping / JSON lines, one at a time: ${ratio("troupe core.ping, raw driver, one at a time", "JSON lines ping, one at a time")}`)
    console.log(`ratio routed / ping, pipelined:                ${ratio("troupe bench.echo (routed), raw driver, pipelined", "troupe core.ping, raw driver, pipelined")}`)
  } finally {
    troupe.kill()
    jsonl.kill()
    rmSync(dir, { recursive: true, force: true })
  }
}

const serveIndex = process.argv.indexOf("--serve")
if (serveIndex >= 0) {
  // Exit normally on kill, so --cpu-prof can write its profile.
  process.on("SIGTERM", () => process.exit(0))
  const kind = process.argv[serveIndex + 1]
  const path = process.argv[serveIndex + 2]!
  if (kind === "troupe") Effect.runFork(serveTroupe(path))
  else serveJsonLines(path)
} else {
  void main().then(() => process.exit(0), (error) => {
    console.error(error)
    process.exit(1)
  })
}


