/**
 * Transport figures: request/response round trips per second on ONE unix
 * socket connection, pipelined (`--depth` requests outstanding) and one at a
 * time, against the troupe daemon (`Server` with a one-route `Router`), and
 * the same messages as JSON lines against a minimal JSON-lines echo server,
 * for a ratio. Each figure is the median of `--rounds` rounds.
 *
 *   node bench/run.mjs transport [--rounds 5] [--requests 100000] [--serial 10000] [--depth 64]
 *                              [--events 20000] [--store memory|sqlite] [--only <text>]
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
 *
 * Event streams: a daemon with the real session routes serves one session
 * whose log holds `--events` records (committed straight through the
 * `SessionStore`, 4-record turns, on `--store memory` or `sqlite`); each round
 * replays it with `session.events { follow: false }` and counts the events
 * until the TERMINAL `session.events.end`. Drivers: the raw one (every frame's
 * envelope and payload decoded), `AgentClient`, and `SessionClient` (typed:
 * every event decoded into its schema classes). The JSON-lines twin is a
 * minimal server over the same store that reads the same log and writes each
 * event, encoded by the same schema, as one `session.event` line, with one
 * `JSON.parse` per line in its driver.
 */
import { Chunk, Effect, Layer, ManagedRuntime, Schema, Stream } from "effect"
import { fork } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as AgentClient from "../src/client/AgentClient.js"
import * as SessionClient from "../src/client/SessionClient.js"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import * as Envelope from "../src/protocol/Envelope.js"
import * as Frame from "../src/protocol/Frame.js"
import * as Handshake from "../src/protocol/Handshake.js"
import * as Messages from "../src/protocol/Messages.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Durable } from "../src/schema/Event.js"
import { InputId, SessionId } from "../src/schema/Ids.js"
import { Principal } from "../src/schema/Principal.js"
import * as AgentCatalog from "../src/services/AgentCatalog.js"
import * as Authenticator from "../src/server/Authenticator.js"
import { Router } from "../src/server/Router.js"
import * as Server from "../src/server/Server.js"
import * as SessionRoutes from "../src/server/SessionRoutes.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Troupe from "../src/Troupe.js"
import { arg, fillLog, loadAverage, median } from "./support.js"

const rounds = Number(arg("rounds", "5"))
const pipelinedRequests = Number(arg("requests", "100000"))
const serialRequests = Number(arg("serial", "10000"))
const depth = Number(arg("depth", "64"))
const eventCount = Number(arg("events", "20000"))
const store = arg("store", "memory") as "memory" | "sqlite"
const only = arg("only", "")

// ---- servers (child process) ----

const local = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const benchAgent = new Agent({ name: "bench", instructions: "benchmark", model: new ModelRef({ name: "scripted" }) })

/** Commits `records` records (4-record turns, 100 records a commit) to a new session; its id. */
const populate = (records: number) =>
  Effect.map(fillLog(local, benchAgent, records, InputId.make("in-bench")), ({ head, sessionId }) => ({
    sessionId,
    records: head
  }))

/** The daemon with the session routes, over `store`, serving one populated session. */
const serveTroupeEvents = (path: string, kind: "memory" | "sqlite", records: number, dbFile: string) =>
  Effect.gen(function*() {
    const runtime = kind === "sqlite" ? Troupe.layerSqlite({ filename: dbFile }) : Troupe.layerTest()
    const routes = SessionRoutes.layer.pipe(Layer.provide(AgentCatalog.layer([benchAgent])))
    const app = Layer.provideMerge(Layer.merge(routes, Authenticator.layerTrustedLocal(local)), runtime)
    yield* Layer.launch(
      Layer.provideMerge(Server.layer({ unix: path }), app).pipe(
        Layer.tap((context) =>
          Effect.flatMap(Effect.provide(populate(records), context), (populated) =>
            Effect.sync(() => process.send?.(populated)))
        )
      )
    )
  })

/**
 * The JSON-lines twin of `session.events`: the same store and log; a request line
 * `{"id","t":"session.events","p":{"sessionId"}}` is answered with one
 * `session.event` line per event (the payload encoded by the same schema), written
 * a page (500 events) at a time with backpressure, then `session.events.end`.
 */
const serveJsonLinesEvents = (path: string, kind: "memory" | "sqlite", records: number, dbFile: string, existing: string) =>
  Effect.gen(function*() {
    const runtime = ManagedRuntime.make(kind === "sqlite" ? SqliteSessionStore.layer({ filename: dbFile }) : MemorySessionStore.layer)
    const store = yield* Effect.promise(() => runtime.runPromise(SessionStore))
    const populated = kind === "sqlite"
      ? { sessionId: SessionId.make(existing), records }
      : yield* Effect.promise(() => runtime.runPromise(populate(records)))
    const encodeFrame = Schema.encodeSync(Messages.SessionEventFrame)
    const server = net.createServer((socket) => {
      let pending = ""
      socket.on("error", () => undefined)
      const drained = () => new Promise<void>((resolve) => socket.once("drain", resolve))
      const replay = async (id: number, sessionId: SessionId) => {
        let after = 0
        for (;;) {
          const page = await runtime.runPromise(store.readLog(sessionId, { after, limit: 500 }))
          let out = ""
          for (const record of page.records) {
            const event = Durable.fromRecord(record)
            out += JSON.stringify({ id, t: "session.event", p: encodeFrame({ cursor: event.cursor, event }) }) + "\n"
          }
          after = page.cursor
          if (!page.more) {
            out += JSON.stringify({ id, t: "session.events.end", p: { reason: "done", cursor: after } }) + "\n"
            socket.write(out)
            return
          }
          if (!socket.write(out)) await drained()
        }
      }
      socket.on("data", (chunk: Buffer) => {
        pending += chunk.toString("utf8")
        let newline = pending.indexOf("\n")
        while (newline >= 0) {
          const message = JSON.parse(pending.slice(0, newline)) as { id: number; p: { sessionId: string } }
          pending = pending.slice(newline + 1)
          void replay(message.id, SessionId.make(message.p.sessionId))
          newline = pending.indexOf("\n")
        }
      })
    })
    server.listen(path, () => process.send?.(populated))
  })

const serveTroupe = (path: string) =>
  Effect.gen(function*() {
    const router = Router.of({
      route: (type) =>
        type === "bench.echo"
          ? { kind: "request", handler: (exchange) => Effect.succeed({ type: "bench.echoed", payload: exchange.payload }) }
          : undefined
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

/**
 * A raw driver's connection: it skips the server's preamble, decodes frames
 * and hands each chunk's frames to `onFrames` (the first is `core.ready`).
 */
const rawConnection = (
  path: string,
  reject: (error: Error) => void,
  onFrames: (frames: ReadonlyArray<Frame.RawFrame>) => void
): net.Socket => {
  const socket = net.connect({ path })
  const decoder = Frame.makeDecoder()
  let preamble = 0
  socket.on("error", reject)
  socket.on("data", (chunk: Buffer) => {
    const skip = Math.min(Handshake.PREAMBLE_SIZE - preamble, chunk.length)
    preamble += skip
    onFrames(decoder.push(skip > 0 ? chunk.subarray(skip) : chunk).frames)
  })
  return socket
}

/** Keeps `outstanding` requests in flight until `total` were answered; round trips per second. */
const driveTroupe = (path: string, type: string, payload: unknown, total: number, outstanding: number) =>
  new Promise<number>((resolve, reject) => {
    const frames = new Map<number, Uint8Array>()
    for (let id = 1; id <= outstanding; id++) {
      frames.set(id, Frame.encodeUnsafe({ id, flags: 0, body: Envelope.encodeBodyUnsafe(type, payload) }))
    }
    let sent = 0
    let answered = 0
    let started = 0
    const socket = rawConnection(path, reject, (received) => {
      const out: Array<Uint8Array> = []
      for (const frame of received) {
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

/** Replays the session over `session.events` with the raw driver; events per second. */
const driveEventsRaw = (path: string, sessionId: string, expected: number) =>
  new Promise<number>((resolve, reject) => {
    const open = Frame.encodeUnsafe({
      id: 1,
      flags: Frame.FLAG_SESSION_START,
      body: Envelope.encodeBodyUnsafe("session.events", { sessionId, follow: false })
    })
    let events = 0
    let started = 0
    const socket = rawConnection(path, reject, (frames) => {
      for (const frame of frames) {
        if (frame.id === 0) {
          started = performance.now()
          socket.write(open)
          continue
        }
        const body = Envelope.decodeBody(frame.body)
        if (Frame.hasFlag(frame.flags, Frame.FLAG_TERMINAL)) {
          const seconds = (performance.now() - started) / 1000
          socket.destroy()
          if (body._tag === "Left" || body.right.t !== "session.events.end" || events !== expected) {
            return reject(new Error(`replay ended after ${events} of ${expected} events`))
          }
          return resolve(events / seconds)
        }
        events++
      }
    })
  })

/** The same through `AgentClient` (Effect API): the stream's frames, each body decoded. */
const driveEventsClient = (path: string, sessionId: string, expected: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const client = yield* AgentClient.make(path)
    const started = performance.now()
    const stream = yield* client.stream(
      AgentClient.FLAG_SESSION_START,
      Envelope.encodeBodyUnsafe("session.events", { sessionId, follow: false })
    )
    let events = 0
    yield* Stream.runForEach(stream.frames, (frame) =>
      Effect.sync(() => {
        const body = Envelope.decodeBody(frame.body)
        if (body._tag === "Right" && body.right.t === "session.event") events++
      }))
    const seconds = (performance.now() - started) / 1000
    if (events !== expected) throw new Error(`AgentClient saw ${events} of ${expected} events`)
    return events / seconds
  })))

/** The same through `SessionClient.events` (typed: each event decoded into its classes). */
const driveEventsSession = (path: string, sessionId: string, expected: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const client = yield* SessionClient.connect(path)
    const started = performance.now()
    const events = yield* Stream.runCount(client.events(SessionId.make(sessionId), { follow: false }))
    const seconds = (performance.now() - started) / 1000
    if (events !== expected) throw new Error(`SessionClient saw ${events} of ${expected} events`)
    return events / seconds
  })))

/** The JSON-lines twin: one request line, one `JSON.parse` per answer line. */
const driveEventsJsonLines = (path: string, sessionId: string, expected: number) =>
  new Promise<number>((resolve, reject) => {
    const socket = net.connect({ path })
    let pending = ""
    let events = 0
    let started = 0
    socket.on("error", reject)
    socket.on("connect", () => {
      started = performance.now()
      socket.write(JSON.stringify({ id: 1, t: "session.events", p: { sessionId, follow: false } }) + "\n")
    })
    socket.on("data", (chunk: Buffer) => {
      pending += chunk.toString("utf8")
      let newline = pending.indexOf("\n")
      while (newline >= 0) {
        const message = JSON.parse(pending.slice(0, newline)) as { t: string }
        pending = pending.slice(newline + 1)
        if (message.t === "session.events.end") {
          const seconds = (performance.now() - started) / 1000
          socket.destroy()
          if (events !== expected) return reject(new Error(`JSON lines replay ended after ${events} of ${expected}`))
          return resolve(events / seconds)
        }
        events++
        newline = pending.indexOf("\n")
      }
    })
  })

const startChild = (kind: string, path: string, ...rest: Array<string>) =>
  new Promise<{ readonly child: ReturnType<typeof fork>; readonly ready: unknown }>((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ["--serve", kind, path, ...rest], {
      // BENCH_SERVER_ARGS adds node flags to the servers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
      execArgv: [...process.execArgv, ...(process.env["BENCH_SERVER_ARGS"]?.split(" ").filter(Boolean) ?? [])],
      stdio: ["ignore", "ignore", "inherit", "ipc"]
    })
    child.once("message", (ready) => resolve({ child, ready }))
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`server exited with ${code}`)))
  })

const format = (value: number) => Math.round(value).toLocaleString("en-US")

const main = async () => {
  console.log(`load average at start: ${loadAverage()} (${cpus().length} CPUs)`)
  console.log(`rounds ${rounds}, pipelined ${pipelinedRequests} requests at depth ${depth}, serial ${serialRequests}`)
  console.log(`event streams: ${eventCount} events replayed from a ${store} store`)
  const dir = mkdtempSync(join(tmpdir(), "tb-"))
  const troupePath = join(dir, "troupe.sock")
  const jsonPath = join(dir, "jsonl.sock")
  const eventsPath = join(dir, "events.sock")
  const jsonEventsPath = join(dir, "jsonl-events.sock")
  const dbFile = join(dir, "events.db")
  const children: Array<ReturnType<typeof fork>> = []
  try {
    const troupe = await startChild("troupe", troupePath)
    const jsonl = await startChild("jsonl", jsonPath)
    const events = await startChild("troupe-events", eventsPath, store, String(eventCount), dbFile)
    const populated = events.ready as { readonly sessionId: string; readonly records: number }
    const jsonEvents = await startChild("jsonl-events", jsonEventsPath, store, String(populated.records), dbFile, populated.sessionId)
    children.push(troupe.child, jsonl.child, events.child, jsonEvents.child)
    const jsonSession = (jsonEvents.ready as { readonly sessionId: string }).sessionId
    const n = populated.records
    const figures: Array<[string, string, () => Promise<number>]> = [
      ["troupe core.ping, raw driver, pipelined", "req/s", () => driveTroupe(troupePath, "core.ping", {}, pipelinedRequests, depth)],
      ["troupe core.ping, raw driver, one at a time", "req/s", () => driveTroupe(troupePath, "core.ping", {}, serialRequests, 1)],
      ["troupe bench.echo (routed), raw driver, pipelined", "req/s", () =>
        driveTroupe(troupePath, "bench.echo", { n: 1 }, pipelinedRequests, depth)],
      ["troupe bench.echo (routed), raw driver, one at a time", "req/s", () =>
        driveTroupe(troupePath, "bench.echo", { n: 1 }, serialRequests, 1)],
      ["troupe bench.echo (routed), AgentClient, pipelined", "req/s", () =>
        driveClient(troupePath, "bench.echo", { n: 1 }, pipelinedRequests, depth)],
      ["troupe bench.echo (routed), AgentClient, one at a time", "req/s", () =>
        driveClient(troupePath, "bench.echo", { n: 1 }, serialRequests, 1)],
      ["JSON lines ping, pipelined", "req/s", () => driveJsonLines(jsonPath, pipelinedRequests, depth)],
      ["JSON lines ping, one at a time", "req/s", () => driveJsonLines(jsonPath, serialRequests, 1)],
      ["troupe session.events replay, raw driver", "events/s", () => driveEventsRaw(eventsPath, populated.sessionId, n)],
      ["troupe session.events replay, AgentClient", "events/s", () => driveEventsClient(eventsPath, populated.sessionId, n)],
      ["troupe session.events replay, SessionClient", "events/s", () => driveEventsSession(eventsPath, populated.sessionId, n)],
      ["JSON lines session.events replay", "events/s", () => driveEventsJsonLines(jsonEventsPath, jsonSession, n)]
    ]
    // What a round handles: its events, or its requests.
    const items = (name: string) => name.includes("session.events") ? n : name.includes("pipelined") ? pipelinedRequests : serialRequests
    const results = new Map<string, number>()
    for (const [name, unit, run] of figures.filter(([name]) => name.includes(only))) {
      // Warm-up rounds (JIT), then the measured ones. A replay round is short (~0.2 s), so it gets three.
      for (let i = unit === "events/s" ? 3 : 1; i > 0; i--) await run()
      const samples: Array<number> = []
      // The driver's own CPU per event or request (this process: user + system, connection set-up included),
      // which the machine's load disturbs less than the rate does.
      const cpu: Array<number> = []
      for (let i = 0; i < rounds; i++) {
        const before = process.cpuUsage()
        samples.push(await run())
        const used = process.cpuUsage(before)
        cpu.push((used.user + used.system) / items(name))
      }
      const value = median(samples)
      results.set(name, value)
      console.log(
        `${name.padEnd(58)} ${format(value).padStart(9)} ${unit.padEnd(8)} (${samples.map(format).join(", ")}); driver CPU ${
          median(cpu).toFixed(2)
        } µs each`
      )
    }
    const ratio = (a: string, b: string) =>
      results.has(a) && results.has(b) ? (results.get(a)! / results.get(b)!).toFixed(2) : "-"
    console.log("")
    console.log(`ratio troupe ping / JSON lines, pipelined:     ${ratio("troupe core.ping, raw driver, pipelined", "JSON lines ping, pipelined")}`)
    console.log(`ratio troupe ping / JSON lines, one at a time: ${ratio("troupe core.ping, raw driver, one at a time", "JSON lines ping, one at a time")}`)
    console.log(`ratio routed / ping, pipelined:                ${ratio("troupe bench.echo (routed), raw driver, pipelined", "troupe core.ping, raw driver, pipelined")}`)
    console.log(`ratio troupe events (raw) / JSON lines:        ${ratio("troupe session.events replay, raw driver", "JSON lines session.events replay")}`)
    console.log(`ratio troupe events (SessionClient) / JSON:    ${ratio("troupe session.events replay, SessionClient", "JSON lines session.events replay")}`)
    console.log(`load average at end: ${loadAverage()}`)
  } finally {
    for (const child of children) child.kill()
    rmSync(dir, { recursive: true, force: true })
  }
}

const serveIndex = process.argv.indexOf("--serve")
if (serveIndex >= 0) {
  // Exit normally on kill, so --cpu-prof can write its profile.
  process.on("SIGTERM", () => process.exit(0))
  const [kind, path, storeKind, records, dbFile, sessionId] = process.argv.slice(serveIndex + 1) as Array<string>
  if (kind === "troupe") Effect.runFork(serveTroupe(path!))
  else if (kind === "jsonl") serveJsonLines(path!)
  else if (kind === "troupe-events") {
    Effect.runFork(serveTroupeEvents(path!, storeKind as "memory" | "sqlite", Number(records), dbFile!))
  } else {
    Effect.runFork(serveJsonLinesEvents(path!, storeKind as "memory" | "sqlite", Number(records), dbFile!, sessionId!))
  }
} else {
  void main().then(() => process.exit(0), (error) => {
    console.error(error)
    process.exit(1)
  })
}

