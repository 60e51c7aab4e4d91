/**
 * Listeners and the server: the unix socket's 0600 mode and 0700 directory,
 * a stale socket file replaced, a live one refused, the socket removed on
 * shutdown, TCP on a picked port, stdio over a pair of streams, and the
 * connection limit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Option, Queue, Schedule, Scope } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, lstatSync, mkdirSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { PassThrough } from "node:stream"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as Frame from "../../src/protocol/Frame.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import * as H from "./harness.js"

const router = Effect.map(H.makeProbes, (probes) => H.routerOf(H.testRoutes(probes)))

describe("Listener", () => {
  describe("unix", () => {
    it.scopedLive("creates the socket 0600 (in a new 0700 directory) and removes it on shutdown", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "run", "d", "agent.sock")
        const scope = yield* Scope.make()
        yield* Scope.extend(H.startServer({ unix: path }, yield* router, H.localAuth), scope)
        const socket = lstatSync(path)
        assert.isTrue(socket.isSocket())
        assert.strictEqual(socket.mode & 0o777, 0o600)
        assert.strictEqual(statSync(join(dir, "run", "d")).mode & 0o777, 0o700)
        // No staging directory is left behind.
        assert.deepStrictEqual(
          (yield* Effect.promise(() => import("node:fs/promises").then((fs) => fs.readdir(join(dir, "run", "d"))))),
          ["agent.sock"]
        )
        const peer = yield* H.rawConnect({ path })
        assert.strictEqual(yield* H.ping(peer, 1), "core.pong#1/1")
        yield* Scope.close(scope, Exit.void)
        assert.isFalse(existsSync(path))
        assert.strictEqual(yield* peer.next, "closed")
      }))

    it.scopedLive("replaces a stale socket left by a dead daemon", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "agent.sock")
        // A process that binds the path and dies without cleaning up.
        const child = spawnSync(process.execPath, [
          "-e",
          `require("node:net").createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, "SIGKILL"))`
        ])
        assert.strictEqual(child.signal, "SIGKILL")
        assert.isTrue(lstatSync(path).isSocket())
        yield* H.startServer({ unix: path }, yield* router, H.localAuth)
        const peer = yield* H.rawConnect({ path })
        assert.strictEqual(yield* H.ping(peer, 1), "core.pong#1/1")
        assert.strictEqual(lstatSync(path).mode & 0o777, 0o600)
      }))

    it.scopedLive("refuses a path where a daemon is alive (AddressInUse), which keeps serving", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "agent.sock")
        yield* H.startServer({ unix: path }, yield* router, H.localAuth)
        const second = yield* Effect.either(H.startServer({ unix: path }, yield* router, H.localAuth))
        assert.isTrue(Either.isLeft(second))
        if (Either.isLeft(second)) {
          assert.strictEqual(second.left._tag, "AddressInUse")
          assert.strictEqual(second.left.address, `unix:${path}`)
        }
        const peer = yield* H.rawConnect({ path })
        assert.strictEqual(yield* H.ping(peer, 1), "core.pong#1/1")
      }))

    it.scopedLive("refuses a path that is not a socket, and leaves it alone", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "agent.sock")
        writeFileSync(path, "precious")
        const result = yield* Effect.either(H.startServer({ unix: path }, yield* router, H.localAuth))
        assert.isTrue(Either.isLeft(result) && result.left._tag === "ListenError")
        assert.isTrue(lstatSync(path).isFile())
      }))

    it.scopedLive("a path too long for a unix socket is a ListenError", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "x".repeat(120), "agent.sock")
        const result = yield* Effect.either(H.startServer({ unix: path }, yield* router, H.localAuth))
        assert.isTrue(Either.isLeft(result) && result.left._tag === "ListenError" && result.left.reason.includes("longer"))
      }))

    it.scopedLive("an existing directory keeps its mode; the socket is still 0600", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const shared = join(dir, "shared")
        mkdirSync(shared, { mode: 0o755 })
        const path = join(shared, "agent.sock")
        yield* H.startServer({ unix: path }, yield* router, H.localAuth)
        assert.strictEqual(lstatSync(path).mode & 0o777, 0o600)
      }))
  })

  describe("tcp", () => {
    it.scopedLive("port 0 binds a free port and reports it", () =>
      Effect.gen(function*() {
        const server = yield* H.startServer({ tcp: { host: "127.0.0.1", port: 0 } }, yield* router)
        const tcp = Option.getOrThrow(server.tcp)
        assert.isAbove(tcp.port, 0)
        assert.deepStrictEqual(server.addresses, [{ _tag: "Tcp", host: "127.0.0.1", port: tcp.port }])
        const peer = yield* H.rawConnect({ host: "127.0.0.1", port: tcp.port })
        assert.strictEqual(yield* H.ping(peer, 1), "core.pong#1/1")
      }))

    it.scopedLive("a port in use is a ListenError", () =>
      Effect.gen(function*() {
        const first = yield* H.startServer({ tcp: { host: "127.0.0.1", port: 0 } }, yield* router)
        const port = Option.getOrThrow(first.tcp).port
        const second = yield* Effect.either(H.startServer({ tcp: { host: "127.0.0.1", port } }, yield* router))
        assert.isTrue(Either.isLeft(second) && second.left._tag === "ListenError" && second.left.reason === "EADDRINUSE")
      }))
  })

  describe("stdio", () => {
    it.scopedLive("serves one trusted-local connection over a pair of streams; done when the input ends", () =>
      Effect.gen(function*() {
        const input = new PassThrough()
        const output = new PassThrough()
        const received = yield* Queue.unbounded<Frame.RawFrame>()
        const decoder = Frame.makeDecoder()
        let preamble = Buffer.alloc(0)
        output.on("data", (chunk: Buffer) => {
          let rest = chunk
          if (preamble.length < 8) {
            const take = Math.min(8 - preamble.length, rest.length)
            preamble = Buffer.concat([preamble, rest.subarray(0, take)])
            rest = rest.subarray(take)
          }
          for (const frame of decoder.push(rest).frames) Queue.unsafeOffer(received, frame)
        })
        const server = yield* H.startServer({ stdio: { input, output } }, yield* router, H.localAuth)
        assert.deepStrictEqual(server.addresses, [{ _tag: "Stdio" }])
        const ready = H.decode(yield* Queue.take(received))
        assert.strictEqual(ready.t, "core.ready")
        assert.deepStrictEqual(Either.getOrThrow(Handshake.decodeReadyPayload(ready.payload)).auth, [])
        assert.strictEqual(preamble.toString("hex"), "00000001ffffffff")
        input.write(H.frame(1, 0, "core.ping", {}))
        assert.strictEqual(H.decode(yield* Queue.take(received)).t, "core.pong")
        input.write(H.frame(2, 0, "test.whoami", {}))
        assert.deepStrictEqual(H.decode(yield* Queue.take(received)).payload, { listener: "stdio" })
        input.end()
        yield* server.stdioDone
      }))
  })

  describe("server", () => {
    it.scopedLive("serves unix and TCP at once", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "agent.sock")
        const server = yield* H.startServer({ unix: path, tcp: { host: "127.0.0.1", port: 0 } }, yield* router)
        assert.deepStrictEqual(server.addresses.map((a) => a._tag), ["Unix", "Tcp"])
        assert.deepStrictEqual(server.unixPath, Option.some(path))
      }))

    it.scopedLive("no listener configured is a ListenError", () =>
      Effect.gen(function*() {
        const result = yield* Effect.either(H.startServer({}, yield* router))
        assert.isTrue(Either.isLeft(result) && result.left._tag === "ListenError")
      }))

    it.scopedLive("beyond maxConnections a connection gets the preamble, then core.error busy on id 0, and is closed", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const path = join(dir, "agent.sock")
        yield* H.startServer({ unix: path, maxConnections: 1 }, yield* router, H.localAuth)
        const first = yield* H.rawConnect({ path })
        const second = yield* H.rawConnect({ path })
        assert.strictEqual(Buffer.from(second.handshake.subarray(0, 8)).toString("hex"), "00000001ffffffff")
        const refused = H.decode(second.ready)
        assert.deepStrictEqual([refused.id, refused.flags, refused.t], [0, Frame.FLAG_TERMINAL, "core.error"])
        assert.deepInclude(refused.payload as object, { kind: "busy", retryable: true })
        assert.strictEqual(yield* second.next, "closed")
        // The client API reports it as a refusal.
        const viaClient = yield* Effect.either(AgentClient.make(path))
        assert.isTrue(Either.isLeft(viaClient) && viaClient.left._tag === "Refused" && viaClient.left.kind === "busy")
        assert.strictEqual(yield* H.ping(first, 1), "core.pong#1/1")
        // Once the first leaves, its slot is free again.
        yield* first.destroy
        const third = yield* Effect.retry(
          Effect.flatMap(H.rawConnect({ path }), (peer) =>
            H.decode(peer.ready).t === "core.ready" ? Effect.succeed(peer) : Effect.fail(new Error("still busy"))),
          { schedule: Schedule.spaced("10 millis"), times: 300 }
        )
        assert.strictEqual(yield* H.ping(third, 1), "core.pong#1/1")
      }))
  })
})
