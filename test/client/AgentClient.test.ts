/**
 * The raw client against a real daemon, through both its Effect API and its
 * Promise API: the handshake, request, stream (as an Effect `Stream` and as an
 * async iterator), follow-ups with `send`, id allocation inside the server's
 * range, `close` (twice), and pending calls failing with `Closed` when either
 * side goes away.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, ConfigProvider, Effect, Either, Exit, Fiber, Option, Queue, Scope, Stream } from "effect"
import * as net from "node:net"
import { join } from "node:path"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import * as Naming from "../../src/protocol/Naming.js"
import * as H from "../server/harness.js"

const { FLAG_SESSION_START: START, FLAG_TERMINAL: TERMINAL } = AgentClient

const ping = H.body("core.ping", {})

/** A daemon on a unix socket (trusted-local) and TCP (token) in this scope. */
const daemon = H.testDaemon

describe("AgentClient (Effect API)", () => {
  it.scopedLive("connects, keeps the core.ready body, and answers requests on sequential ids", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const client = yield* AgentClient.make(d.path)
      const raw = yield* H.rawConnect({ path: d.path })
      assert.strictEqual(Buffer.from(client.readyBytes()).toString("hex"), Buffer.from(raw.ready.body).toString("hex"))
      assert.deepStrictEqual([client.idRange.start, client.idRange.endExclusive], [1, 0xffff_ffff])
      assert.strictEqual(client.address, `unix:${d.path}`)
      const answers = yield* Effect.forEach([1, 2, 3], () => client.request(0, ping))
      assert.deepStrictEqual(answers.map((f) => [f.id, f.flags, H.decode(f).t]), [
        [1, TERMINAL, "core.pong"],
        [2, TERMINAL, "core.pong"],
        [3, TERMINAL, "core.pong"]
      ])
      // Pipelined.
      const many = yield* Effect.forEach(Array.from({ length: 100 }, (_, i) => i), (i) =>
        Effect.map(client.request(0, H.body("test.echo", { i })), (f) => H.decode(f).payload), { concurrency: "unbounded" })
      assert.deepStrictEqual(many, Array.from({ length: 100 }, (_, i) => ({ i })))
    }))

  it.scopedLive("a stream is an Effect Stream ending after its TERMINAL frame", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const client = yield* AgentClient.make(d.path)
      const stream = yield* client.stream(START, H.body("test.items", { n: 5 }))
      const frames = Chunk.toReadonlyArray(yield* Stream.runCollect(stream.frames))
      assert.deepStrictEqual(frames.map((f) => [f.id, f.flags, H.decode(f).t]), [
        ...Array.from({ length: 5 }, () => [stream.id, 0, "test.item"]),
        [stream.id, TERMINAL, "test.end"]
      ])
      assert.deepStrictEqual(yield* stream.pull, Option.none())
    }))

  it.scopedLive("send carries follow-ups on a stream's id; a cancel ends it", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const client = yield* AgentClient.make(d.path)
      const stream = yield* client.stream(START, H.body("test.follow", {}))
      const next = Effect.map(stream.pull, (frame) => H.decode(Option.getOrThrow(frame)))
      assert.strictEqual((yield* next).t, "test.open")
      yield* client.send(stream.id, 0, H.body("test.note", { n: 1 }))
      assert.deepStrictEqual((yield* next).payload, { type: "test.note", payload: { n: 1 } })
      yield* client.send(stream.id, 0, H.body("test.cancel", {}))
      const last = yield* next
      assert.deepStrictEqual([last.t, last.flags], ["test.cancelled", TERMINAL])
      assert.deepStrictEqual(yield* stream.pull, Option.none())
    }))

  it.scopedLive("ids stay inside the server's range, skip ids in use, and run out", () =>
    Effect.gen(function*() {
      const d = yield* daemon({ idRange: new Handshake.IdRange({ start: 1, endExclusive: 4 }) })
      const client = yield* AgentClient.make(d.path)
      const hang = client.request(0, H.body("test.hang", {}))
      yield* Effect.fork(hang)
      assert.strictEqual(yield* Queue.take(d.probes.hangStarted), 1)
      const ids: Array<number> = []
      for (let i = 0; i < 3; i++) ids.push((yield* client.request(0, ping)).id)
      // 1 is held by the hanging request: 2, 3, then around (past 1) to 2.
      assert.deepStrictEqual(ids, [2, 3, 2])
      yield* Effect.fork(hang)
      yield* Effect.fork(hang)
      const started = [yield* Queue.take(d.probes.hangStarted), yield* Queue.take(d.probes.hangStarted)]
      assert.sameMembers(started, [2, 3])
      assert.strictEqual((yield* Effect.flip(client.request(0, ping)))._tag, "IdRangeExhausted")
      assert.strictEqual((yield* Effect.flip(client.stream(START, H.body("test.follow", {}))))._tag, "IdRangeExhausted")
    }))

  it.scopedLive("close is idempotent; pending and later calls fail with Closed", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const client = yield* AgentClient.make(d.path)
      const pending = yield* Effect.fork(client.request(0, H.body("test.hang", {})))
      const stream = yield* client.stream(START, H.body("test.follow", {}))
      assert.strictEqual(H.decode(Option.getOrThrow(yield* stream.pull)).t, "test.open")
      const hangId = yield* Queue.take(d.probes.hangStarted)
      yield* client.close
      yield* client.close
      const error = yield* Effect.flip(Fiber.join(pending))
      assert.strictEqual(error._tag, "Closed")
      assert.strictEqual((yield* Effect.flip(stream.pull))._tag, "Closed")
      assert.strictEqual((yield* Effect.flip(client.request(0, ping)))._tag, "Closed")
      assert.strictEqual((yield* Effect.flip(client.send(1, 0, ping)))._tag, "Closed")
      assert.strictEqual((yield* client.closed).reason, "closed by the client")
      // The server saw the shutdown and interrupted the handler.
      assert.strictEqual(yield* Queue.take(d.probes.hangInterrupted), hangId)
    }))

  it.scopedLive("pending calls fail with Closed when the server goes away", () =>
    Effect.gen(function*() {
      const dir = yield* H.tempDir
      const probes = yield* H.makeProbes
      const path = join(dir, "agent.sock")
      const serverScope = yield* Scope.make()
      yield* Scope.extend(H.startServer({ unix: path }, H.routerOf(H.testRoutes(probes)), H.localAuth), serverScope)
      const client = yield* AgentClient.make(path)
      const pending = yield* Effect.fork(client.request(0, H.body("test.hang", {})))
      const stream = yield* client.stream(START, H.body("test.follow", {}))
      assert.strictEqual(H.decode(Option.getOrThrow(yield* stream.pull)).t, "test.open")
      yield* Queue.take(probes.hangStarted)
      yield* Scope.close(serverScope, Exit.void)
      const error = yield* Effect.flip(Fiber.join(pending))
      assert.deepStrictEqual([error._tag, error._tag === "Closed" ? error.reason : ""], [
        "Closed",
        "the server closed the connection"
      ])
      assert.strictEqual((yield* Effect.flip(stream.pull))._tag, "Closed")
      assert.strictEqual((yield* Effect.flip(client.request(0, ping)))._tag, "Closed")
      yield* client.close
    }))

  it.scopedLive("a fatal error from the server is the Closed reason", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const client = yield* AgentClient.make(d.path)
      // An id outside the range: the server answers on id 0 and hangs up.
      yield* client.send(0xffff_ffff, 0, ping)
      const closed = yield* client.closed
      assert.include(closed.reason, "invalid_id")
    }))

  it.scopedLive("over TCP: hello with the token, then routed requests", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const client = yield* AgentClient.makeTcp("127.0.0.1", d.port)
      assert.strictEqual(client.address, `tcp:127.0.0.1:${d.port}`)
      const refused = H.decode(yield* client.request(0, H.body("test.echo", {})))
      assert.strictEqual((refused.payload as { kind: string }).kind, "unauthenticated")
      assert.strictEqual(H.decode(yield* client.request(0, H.body("auth.hello", { token: H.TOKEN }))).t, "auth.welcome")
      assert.deepStrictEqual(H.decode(yield* client.request(0, H.body("test.echo", { a: [1, 2] }))).payload, { a: [1, 2] })
    }))

  it.scopedLive("connect errors: no socket, nothing listening, no handshake in time", () =>
    Effect.gen(function*() {
      const dir = yield* H.tempDir
      const missing = yield* Effect.flip(AgentClient.make(join(dir, "absent.sock")))
      assert.deepStrictEqual([missing._tag, missing._tag === "ConnectError" ? missing.reason : ""], ["ConnectError", "ENOENT"])
      // A server that accepts and says nothing.
      const mute = join(dir, "mute.sock")
      const sockets: Array<net.Socket> = []
      yield* Effect.acquireRelease(
        Effect.async<net.Server>((resume) => {
          const server = net.createServer((socket) => sockets.push(socket))
          server.listen(mute, () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.sync(() => {
          for (const socket of sockets) socket.destroy()
          server.close()
        })
      )
      const silent = yield* Effect.flip(AgentClient.make(mute, { timeout: "200 millis" }))
      assert.strictEqual(silent._tag, "HandshakeError")
    }))

  it.scopedLive("makeNamed and socketPath resolve the daemon's name under the troupe home", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const home = join(d.dir, "home")
      const path = Either.getOrThrow(Naming.socketPathIn(home, "worker"))
      assert.strictEqual(path, join(home, "run", "sandboxes", "87eba76e7f3164534045ba92", "agent.sock"))
      const probes = yield* H.makeProbes
      yield* H.startServer({ unix: path }, H.routerOf(H.testRoutes(probes)), H.localAuth)
      const client = yield* AgentClient.makeNamed("worker").pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TROUPE_HOME", home]])))
      )
      assert.strictEqual(client.address, `unix:${path}`)
      assert.strictEqual(H.decode(yield* client.request(0, ping)).t, "core.pong")
      const previous = process.env["TROUPE_HOME"]
      process.env["TROUPE_HOME"] = home
      try {
        assert.strictEqual(AgentClient.socketPath("worker"), path)
      } finally {
        if (previous === undefined) delete process.env["TROUPE_HOME"]
        else process.env["TROUPE_HOME"] = previous
      }
      assert.throws(() => AgentClient.socketPath(""))
    }))
})

describe("AgentClient (Promise API)", () => {
  it.scopedLive("connect, request, stream with for await, send, close twice, Closed afterwards", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      yield* Effect.promise(async () => {
        const client = await AgentClient.connect(d.path, { timeoutMs: 5_000 })
        const pong = await client.request(0, ping)
        assert.deepStrictEqual([pong.id, pong.flags, H.decode(pong).t], [1, TERMINAL, "core.pong"])
        assert.isAbove(client.readyBytes().length, 0)

        const items = await client.stream(START, H.body("test.items", { n: 3 }))
        const seen: Array<string> = []
        for await (const frame of items) seen.push(`${frame.id}:${frame.flags}:${H.decode(frame).t}`)
        assert.deepStrictEqual(seen, [
          `${items.id}:0:test.item`,
          `${items.id}:0:test.item`,
          `${items.id}:0:test.item`,
          `${items.id}:1:test.end`
        ])

        const follow = await client.stream(START, H.body("test.follow", {}))
        const iterator = follow[Symbol.asyncIterator]()
        assert.strictEqual(H.decode((await iterator.next()).value as AgentClient.RawFrame).t, "test.open")
        await client.send(follow.id, 0, H.body("test.cancel", {}))
        const last = await iterator.next()
        assert.strictEqual(H.decode(last.value as AgentClient.RawFrame).t, "test.cancelled")
        assert.isTrue((await iterator.next()).done)

        // Leaving a for-await early stops delivery; the connection carries on.
        const many = await client.stream(START, H.body("test.items", { n: 1000 }))
        for await (const _frame of many) break
        assert.strictEqual(H.decode(await client.request(0, ping)).t, "core.pong")

        const pending = client.request(0, H.body("test.hang", {})).then(() => undefined, (error: unknown) => error)
        await client.close()
        await client.close()
        const rejected = await pending
        assert.instanceOf(rejected, AgentClient.Closed)
        const after = await client.request(0, ping).then(() => undefined, (error: unknown) => error)
        assert.instanceOf(after, AgentClient.Closed)
      })
    }))

  it.scopedLive("connectTcp, and typed errors from connect", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      yield* Effect.promise(async () => {
        const client = await AgentClient.connectTcp("127.0.0.1", d.port)
        assert.strictEqual(H.decode(await client.request(0, ping)).t, "core.pong")
        await client.close()
        const error = await AgentClient.connect(join(d.dir, "nope.sock")).then(() => undefined, (e: unknown) => e)
        assert.instanceOf(error, AgentClient.ConnectError)
      })
    }))
})
