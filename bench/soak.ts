/**
 * Soak and abuse figures for the daemon (issue 13): is its memory growth under
 * long runs and hostile connections a leak (the heap after a forced GC keeps
 * growing) or the allocator keeping pages (RSS stays up while the heap after
 * GC comes back)?
 *
 *   node bench/run.mjs soak [--turns 2000] [--connections 5000] [--abusers 500]
 *                                   [--requests 2000] [--abuse-seconds 10] [--actor-idle 30]
 *   node bench/run.mjs soak --full      # 50,000 turns, 20,000 connections
 *
 * The daemon runs in a child process (started with --expose-gc) as
 * `troupe serve` would: a SQLite file store, the session routes, the
 * scripted model, a trusted-local unix socket and a TCP port with a token.
 * On request it forces a full GC and reports its heap and RSS. The drivers
 * run in this process:
 *
 * 1. warm-up (200 turns, 500 connections), then the baseline, with the
 *    session's actor live and again once it passivated;
 * 2. `--turns` sequential turns on ONE session through `SessionClient`
 *    (send, then follow the session's events until that turn ends), with the
 *    heap after GC while its actor is live and once it passivated (the host's
 *    idle timeout, `--actor-idle` seconds, 30 as `troupe serve` has it);
 * 3. `--connections` TCP connections opened and closed (16 at a time; half
 *    leave with `core.shutdown`, half hang up), as connections accepted per
 *    second;
 * 4. the latency of a good client (`session.get` through `SessionClient`
 *    on the unix socket, and `core.ping` + `session.get` on TCP after a
 *    token) alone, then while `--abusers` hostile TCP connections run for
 *    `--abuse-seconds`: silent peers, slowloris (a byte every 100 ms),
 *    garbage, oversize length prefixes, unauthenticated request floods, and
 *    ping floods that never read their answers; each reconnects when the
 *    daemon closes it.
 *
 * Each phase prints the daemon's heap after GC and RSS at its start and end.
 * `--snapshots DIR` also writes heap snapshots after the baseline, the turns
 * (live and passivated) and the connections (compare them with
 * `bench/heapdiff.ts`, or in Chrome DevTools' Memory tab).
 */
import { Context, Effect, Exit, Layer, Option, Scope, Stream } from "effect"
import { fork } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { runInNewContext } from "node:vm"
import { setFlagsFromString, writeHeapSnapshot } from "node:v8"
import * as SessionClient from "../src/client/SessionClient.js"
import * as Envelope from "../src/protocol/Envelope.js"
import * as Frame from "../src/protocol/Frame.js"
import * as Handshake from "../src/protocol/Handshake.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { SessionHost } from "../src/services/SessionHost.js"
import type { SessionId } from "../src/schema/Ids.js"
import { Principal } from "../src/schema/Principal.js"
import * as AgentCatalog from "../src/services/AgentCatalog.js"
import * as Authenticator from "../src/server/Authenticator.js"
import * as Server from "../src/server/Server.js"
import * as SessionRoutes from "../src/server/SessionRoutes.js"
import * as Troupe from "../src/Troupe.js"
import { arg, loadAverage, median, percentile } from "./support.js"

const full = process.argv.includes("--full")
const turns = Number(arg("turns", full ? "50000" : "2000"))
const connections = Number(arg("connections", full ? "20000" : "5000"))
const abusers = Number(arg("abusers", "500"))
const requests = Number(arg("requests", "2000"))
const abuseSeconds = Number(arg("abuse-seconds", "10"))
const actorIdle = Number(arg("actor-idle", "30"))

const TOKEN = "soak-token"
const local = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const agent = new Agent({ name: "bench", instructions: "benchmark", model: new ModelRef({ name: "scripted" }) })

// ---- the daemon (child process) ----

interface Memory {
  readonly heapUsed: number
  readonly heapTotal: number
  readonly external: number
  readonly rss: number
}

const serve = (dir: string) => {
  setFlagsFromString("--expose-gc")
  const gc = runInNewContext("gc") as () => void
  const runtime = Troupe.layerSqlite({ filename: join(dir, "soak.db") }, { host: { idleTimeout: `${actorIdle} seconds` } })
  let host: SessionHost["Type"] | undefined
  const routes = SessionRoutes.layer.pipe(Layer.provide(AgentCatalog.layer([agent])))
  const auth = Authenticator.layerTrustedLocal(local, Authenticator.layerStatic({ [TOKEN]: local }))
  const server = Server.layer({ unix: join(dir, "agent.sock"), tcp: { host: "127.0.0.1", port: 0 } })
  process.on("message", (message) => {
    if (typeof message === "object" && message !== null && "snapshot" in message) {
      gc()
      gc()
      process.send!({ written: writeHeapSnapshot(String(message.snapshot)) })
      return
    }
    if (message === "running") {
      // How many actors are live: 0 once the session's actor passivated.
      void Effect.runPromise(host!.running).then((running) => process.send!({ running: running.length }))
      return
    }
    if (message !== "gc") return
    // Twice: the first pass may only queue finalizers (sockets, buffers) that free more on the second.
    gc()
    gc()
    const { external, heapTotal, heapUsed, rss } = process.memoryUsage()
    process.send!({ heapUsed, heapTotal, external, rss } satisfies Memory)
  })
  Effect.runFork(Layer.launch(
    Layer.provideMerge(server, Layer.provideMerge(Layer.merge(routes, auth), runtime)).pipe(
      Layer.tap((context) =>
        Effect.sync(() => {
          host = Context.get(context, SessionHost)
          const tcp = Context.get(context, Server.Server).tcp
          process.send!({ port: Option.getOrThrow(tcp).port })
        })
      )
    )
  ))
}

// ---- drivers (this process) ----

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

const startDaemon = (dir: string) =>
  new Promise<{ readonly child: ReturnType<typeof fork>; readonly port: number }>((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ["--serve", dir], {
      execArgv: [...process.execArgv, "--expose-gc"],
      stdio: ["ignore", "ignore", "inherit", "ipc"]
    })
    child.once("message", (ready) => resolve({ child, port: (ready as { port: number }).port }))
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`daemon exited with ${code}`)))
  })

/** With `--snapshots DIR`: writes the daemon's heap snapshot `DIR/<name>.heapsnapshot` (after a GC), for a diff. */
const snapshot = (child: ReturnType<typeof fork>, name: string) => {
  const dir = arg("snapshots", "")
  if (dir === "") return Promise.resolve()
  return new Promise<void>((resolve) => {
    child.once("message", () => resolve())
    child.send({ snapshot: join(dir, `${name}.heapsnapshot`) })
  })
}

const memoryOf = (child: ReturnType<typeof fork>) =>
  new Promise<Memory>((resolve) => {
    child.once("message", (memory) => resolve(memory as Memory))
    child.send("gc")
  })

/** Waits until the daemon has no live actor (the session's passivated after `--actor-idle` seconds); how long it took. */
const passivated = async (child: ReturnType<typeof fork>) => {
  const started = performance.now()
  for (;;) {
    const running = await new Promise<number>((resolve) => {
      child.once("message", (answer) => resolve((answer as { running: number }).running))
      child.send("running")
    })
    if (running === 0) return (performance.now() - started) / 1000
    if (performance.now() - started > (actorIdle + 60) * 1000) throw new Error(`the actor did not passivate within ${actorIdle + 60} s`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

const report = (label: string, before: Memory, after: Memory) => {
  const growth = ((after.heapUsed / before.heapUsed - 1) * 100).toFixed(1)
  console.log(
    `  heap after GC ${mib(before.heapUsed)} → ${mib(after.heapUsed)} (${growth}%), ` +
      `V8 heap reserved ${mib(before.heapTotal)} → ${mib(after.heapTotal)}, ` +
      `external ${mib(before.external)} → ${mib(after.external)}, RSS ${mib(before.rss)} → ${mib(after.rss)}   [${label}]`
  )
}

/** Runs `count` sequential turns on one session; turns per second. */
const runTurns = (socket: string, sessionId: SessionId, count: number) =>
  Effect.scoped(Effect.gen(function*() {
    const client = yield* SessionClient.connect(socket)
    const started = performance.now()
    for (let i = 0; i < count; i++) {
      const accepted = yield* client.send(sessionId, { text: `message ${i}` })
      yield* client.events(sessionId, { after: accepted.cursor! - 1 }).pipe(
        Stream.takeUntil(({ event }) =>
          event._tag === "durable" && event.record._tag === "turn_ended" && event.record.turnId === accepted.turnId
        ),
        Stream.runDrain
      )
    }
    return count / ((performance.now() - started) / 1000)
  }))

const PREAMBLE_AND_READY = Handshake.PREAMBLE_SIZE + Frame.HEADER_SIZE
const SHUTDOWN = Frame.encodeUnsafe({ id: 0, flags: Frame.FLAG_SHUTDOWN, body: Envelope.encodeBodyUnsafe("core.shutdown", null) })
const PING = (id: number) => Frame.encodeUnsafe({ id, flags: 0, body: Envelope.encodeBodyUnsafe("core.ping", {}) })

/** Opens a TCP connection, waits for its handshake, and leaves (politely or not). */
const openAndClose = (port: number, polite: boolean) =>
  new Promise<void>((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port })
    let received = 0
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length
      if (received < PREAMBLE_AND_READY) return
      if (polite) socket.end(SHUTDOWN)
      else socket.destroy()
    })
    socket.on("error", () => undefined)
    socket.on("close", () => (received >= PREAMBLE_AND_READY ? resolve() : reject(new Error("no handshake"))))
  })

/** `count` connections, `width` at a time; connections accepted per second. */
const churn = async (port: number, count: number, width = 16) => {
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) {
      const i = next++
      await openAndClose(port, i % 2 === 0)
    }
  }))
  return count / ((performance.now() - started) / 1000)
}

/** Hostile TCP connections until `stop`; each reconnects when closed. */
const abuse = (port: number, count: number) => {
  let stopped = false
  const sockets = new Set<net.Socket>()
  let reconnects = 0
  let connected = 0
  const kinds = ["silent", "slowloris", "garbage", "oversize", "unauthenticated", "pingflood"] as const
  const run = (kind: (typeof kinds)[number]) => {
    if (stopped) return
    const socket = net.connect({ host: "127.0.0.1", port })
    sockets.add(socket)
    let timer: NodeJS.Timeout | undefined
    socket.on("error", () => undefined)
    socket.on("close", () => {
      sockets.delete(socket)
      if (timer !== undefined) clearInterval(timer)
      reconnects++
      // A pause before reconnecting keeps this a steady pressure, not a busy loop of the driver.
      if (!stopped) setTimeout(() => run(kind), 200)
    })
    socket.once("connect", () => {
      connected++
      // Read (and drop) what the daemon sends, so its close is seen; only the ping flood never reads.
      if (kind !== "pingflood") socket.resume()
      switch (kind) {
        case "silent":
          return
        case "slowloris": {
          const frame = PING(1)
          let at = 0
          timer = setInterval(() => {
            if (at < frame.length) socket.write(frame.subarray(at, ++at))
          }, 100)
          return
        }
        case "garbage":
          timer = setInterval(() => socket.write(Buffer.from(Array.from({ length: 64 }, () => Math.floor(Math.random() * 256)))), 20)
          return
        case "oversize":
          socket.write(Buffer.from([0x00, 0x40, 0x00, 0x01, 0, 0, 0, 1, 0]))
          return
        case "unauthenticated": {
          const frame = Frame.encodeUnsafe({ id: 7, flags: 0, body: Envelope.encodeBodyUnsafe("session.list", {}) })
          timer = setInterval(() => socket.write(Buffer.concat(Array.from({ length: 32 }, () => frame))), 20)
          return
        }
        case "pingflood": {
          // Never reads: the daemon's writes fill the socket, then it stops reading this peer.
          socket.pause()
          const burst = Buffer.concat(Array.from({ length: 256 }, (_, i) => PING(1 + i)))
          timer = setInterval(() => socket.write(burst), 20)
          return
        }
      }
    })
  }
  for (let i = 0; i < count; i++) run(kinds[i % kinds.length]!)
  return {
    stop: () => {
      stopped = true
      for (const socket of sockets) socket.destroy()
      return { reconnects, connected }
    }
  }
}

/** A good client's connections, made before any abuse starts (as a long-lived client's are). */
const goodClients = (socket: string, port: number) =>
  Effect.gen(function*() {
    const unixClient = yield* SessionClient.connect(socket)
    const tcpClient = yield* SessionClient.connectTcp("127.0.0.1", port, { token: TOKEN })
    return { unixClient, tcpClient }
  })

/** `count` requests of a good client, one at a time: latencies in ms (unix: `session.get`; TCP: ping then get). */
const goodClient = (
  { tcpClient, unixClient }: Effect.Effect.Success<ReturnType<typeof goodClients>>,
  sessionId: SessionId,
  count: number
) =>
  Effect.gen(function*() {
    const unix: Array<number> = []
    const tcp: Array<number> = []
    for (let i = 0; i < count; i++) {
      let t = performance.now()
      yield* unixClient.get(sessionId)
      unix.push(performance.now() - t)
      t = performance.now()
      yield* tcpClient.ping
      yield* tcpClient.get(sessionId)
      tcp.push(performance.now() - t)
    }
    const summary = (xs: Array<number>) => {
      const sorted = [...xs].sort((a, b) => a - b)
      return `p50 ${percentile(sorted, 0.5).toFixed(2)} ms, p99 ${percentile(sorted, 0.99).toFixed(2)} ms`
    }
    return { unix: summary(unix), tcp: summary(tcp) }
  })

const main = async () => {
  console.log(`load average at start: ${loadAverage()} (${cpus().length} CPUs)`)
  console.log(`turns ${turns}, connections ${connections}, abusers ${abusers} for ${abuseSeconds} s, requests ${requests}`)
  const dir = mkdtempSync(join(tmpdir(), "soak-"))
  const { child, port } = await startDaemon(dir)
  const socket = join(dir, "agent.sock")
  try {
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.orDie(effect))
    const session = await run(Effect.scoped(Effect.flatMap(
      SessionClient.connect(socket),
      (client) => client.create({ agent: "bench", title: "soak" })
    )))

    await run(runTurns(socket, session.id, 200))
    await churn(port, 500)
    const baseline = await memoryOf(child)
    await snapshot(child, "baseline")
    console.log(`\nbaseline (after 200 turns and 500 connections of warm-up)`)
    report("baseline, the actor live", baseline, baseline)
    const idleBaselineAfter = await passivated(child)
    const idleBaseline = await memoryOf(child)
    report(`baseline, the actor passivated (after ${idleBaselineAfter.toFixed(1)} s)`, baseline, idleBaseline)

    // In five slices, with the heap after GC after each: a leak grows with every slice, a warming heap levels off.
    const sliced = async (total: number, what: string, unit: string, step: (n: number) => Promise<number>) => {
      const rates: Array<number> = []
      const heaps: Array<string> = []
      const slice = Math.ceil(total / 5)
      for (let done = 0; done < total; done += slice) {
        rates.push(await step(Math.min(slice, total - done)))
        const memory = await memoryOf(child)
        heaps.push(mib(memory.heapUsed))
        // As it goes: a long run shows its trend before it ends.
        console.log(`  … ${Math.min(done + slice, total)} ${what}: heap after GC ${mib(memory.heapUsed)}, RSS ${mib(memory.rss)}, ${rates.at(-1)!.toFixed(0)} ${unit}`)
      }
      const after = await memoryOf(child)
      console.log(`\n${total} ${what}: ${median(rates).toFixed(0)} ${unit} (median of ${rates.length} slices)`)
      console.log(`  heap after GC after each slice: ${heaps.join(", ")}`)
      return after
    }
    const afterTurns = await sliced(turns, "turns on one session", "turns/s", (n) => run(runTurns(socket, session.id, n)))
    await snapshot(child, "turns")
    report("turns, the actor live", baseline, afterTurns)
    const idleAfter = await passivated(child)
    const afterTurnsIdle = await memoryOf(child)
    await snapshot(child, "turns-passivated")
    report(`turns, the actor passivated (after ${idleAfter.toFixed(1)} s), from the passivated baseline`, idleBaseline, afterTurnsIdle)

    const afterConnections = await sliced(connections, "connections opened and closed", "accepted/s", (n) => churn(port, n))
    await snapshot(child, "connections")
    report("connections", afterTurnsIdle, afterConnections)
    report("connections, from the passivated baseline", idleBaseline, afterConnections)

    const scope = Effect.runSync(Scope.make())
    const clients = await run(Scope.extend(goodClients(socket, port), scope))
    const quiet = await run(goodClient(clients, session.id, requests))
    console.log(`\na good client alone: unix session.get ${quiet.unix}; TCP ping + get ${quiet.tcp}`)
    const hostile = abuse(port, abusers)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const during = await run(goodClient(clients, session.id, requests))
    // A client arriving in the middle of the abuse: how long until it is served on TCP.
    const arrival = performance.now()
    const late = await Effect.runPromise(Effect.scoped(Effect.flatMap(
      SessionClient.connectTcp("127.0.0.1", port, { token: TOKEN, timeout: "30 seconds" }),
      (client) => client.ping
    )).pipe(Effect.either))
    const lateMillis = performance.now() - arrival
    const duringMemory = await memoryOf(child)
    const remaining = Math.max(0, abuseSeconds * 1000 - 1000)
    await new Promise((resolve) => setTimeout(resolve, remaining))
    const { connected, reconnects } = hostile.stop()
    await new Promise((resolve) => setTimeout(resolve, 2500))
    const afterAbuse = await memoryOf(child)
    console.log(`with ${abusers} abusive connections (${connected} connections made, ${reconnects} closed by the daemon and reopened):`)
    console.log(`  unix session.get ${during.unix}; TCP ping + get ${during.tcp}`)
    console.log(
      `  a new TCP client during the abuse: ${late._tag === "Right" ? "served" : `failed (${late.left.message})`} after ${lateMillis.toFixed(0)} ms`
    )
    await Effect.runPromise(Scope.close(scope, Exit.void))
    report("during abuse", afterConnections, duringMemory)
    report("after abuse", afterConnections, afterAbuse)
    report("whole run, from the passivated baseline", idleBaseline, afterAbuse)
    console.log(`\nload average at end: ${loadAverage()}`)
  } finally {
    child.kill()
    rmSync(dir, { recursive: true, force: true })
  }
}

const serveIndex = process.argv.indexOf("--serve")
if (serveIndex >= 0) {
  process.on("SIGTERM", () => process.exit(0))
  serve(process.argv[serveIndex + 1]!)
} else {
  void main().then(() => process.exit(0), (error) => {
    console.error(error)
    process.exit(1)
  })
}
