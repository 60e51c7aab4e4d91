/**
 * The daemon under hostile connections (issue 13): peers that never
 * authenticate cannot lock anyone out (per-listener limits, a smaller limit
 * for unauthenticated peers, the oldest of them giving way); the
 * authentication deadline and the idle timeout, on the TestClock; errors that
 * echo a peer's input stay at 128 bytes whatever it sent, the connection
 * stays up, and bad input costs one rate-limited warning line, never a stack
 * trace.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Either, Logger, Option, TestClock } from "effect"
import { join } from "node:path"
import * as Frame from "../../src/protocol/Frame.js"
import * as ProtocolError from "../../src/protocol/ProtocolError.js"
import * as Connection from "../../src/server/Connection.js"
import type * as Server from "../../src/server/Server.js"
import * as H from "./harness.js"

const { FLAG_SESSION_START: START, FLAG_SHUTDOWN: SHUTDOWN, FLAG_TERMINAL: TERMINAL } = Frame

interface Line {
  readonly level: string
  readonly message: string
  readonly cause: Cause.Cause<unknown>
}

/** A daemon with the test routes on a trusted-local unix socket and on TCP (token), logging into `lines`. */
const daemon = (options: Omit<Server.Options, "unix" | "tcp"> = {}) =>
  Effect.gen(function*() {
    const lines: Array<Line> = []
    const logger = Logger.make(({ cause, logLevel, message }) => {
      lines.push({ level: logLevel.label, message: String(Array.isArray(message) ? message.join(" ") : message), cause })
    })
    const dir = yield* H.tempDir
    const probes = yield* H.makeProbes
    const path = join(dir, "agent.sock")
    const server = yield* H.startServer(
      { ...options, unix: path, tcp: { host: "127.0.0.1", port: 0 } },
      H.routerOf(H.testRoutes(probes)),
      H.localAuth
    ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    const tcp: H.Target = { host: "127.0.0.1", port: Option.getOrThrow(server.tcp).port }
    return { path, tcp, lines, probes }
  })

const errorOf = (message: ReturnType<typeof H.decode>) =>
  message.payload as { kind: string; message: string; offending_type?: string; retryable?: boolean }

describe("hardening", () => {
  describe("idle lock-out", () => {
    it.scopedLive("peers that never authenticate hold no slot another client needs, on TCP or on the unix socket", () =>
      Effect.gen(function*() {
        // Limits small enough to exceed in a test; the defaults are 1024 and 64 per listener.
        const d = yield* daemon({ maxConnections: 24, maxUnauthenticated: 8 })
        const idle: Array<H.RawPeer> = []
        for (let i = 0; i < 40; i++) idle.push(yield* H.rawConnect(d.tcp))
        // At most 8 are still waiting: the others gave way, oldest first, with a retryable busy.
        const first = yield* H.expectClosedAfter(idle[0]!)
        assert.deepStrictEqual([first.error.id, first.error.flags, errorOf(first.error).kind], [0, TERMINAL, "busy"])
        assert.isTrue(errorOf(first.error).retryable)
        assert.isTrue(first.closed)

        // A client that authenticates is served on TCP…
        const good = yield* H.rawConnect(d.tcp)
        assert.strictEqual((yield* good.exchange(1, 0, "auth.hello", { token: H.TOKEN })).t, "auth.welcome")
        assert.strictEqual((yield* good.exchange(2, 0, "test.echo", { ok: true })).t, "test.echoed")
        // …and on the unix socket, whose limits are its own.
        const local = yield* H.rawConnect({ path: d.path })
        assert.strictEqual((yield* local.exchange(1, 0, "test.echo", { ok: true })).t, "test.echoed")
        // The newest idle peers are still connected (they have time left to authenticate).
        assert.strictEqual(yield* H.ping(idle[39]!, 5), "core.pong#5/1")
      }), { timeout: 30_000 })

    it.scopedLive("authenticated connections fill their listener's limit only: the unix socket still serves", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ maxConnections: 4 })
        for (let i = 0; i < 4; i++) {
          const peer = yield* H.rawConnect(d.tcp)
          assert.strictEqual((yield* peer.exchange(1, 0, "auth.hello", { token: H.TOKEN })).t, "auth.welcome")
        }
        const refused = yield* H.rawConnect(d.tcp)
        assert.strictEqual(H.decode(refused.ready).t, "core.error")
        assert.strictEqual(errorOf(H.decode(refused.ready)).kind, "busy")
        const local = yield* H.rawConnect({ path: d.path })
        assert.strictEqual(yield* H.ping(local, 1), "core.pong#1/1")
      }), { timeout: 30_000 })
  })

  describe("deadlines", () => {
    it.scoped("a peer that has not authenticated within 10 s gets core.error unauthenticated on id 0 and is closed", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const silent = yield* H.rawConnect(d.tcp)
        const authenticated = yield* H.rawConnect(d.tcp)
        assert.strictEqual((yield* authenticated.exchange(1, 0, "auth.hello", { token: H.TOKEN })).t, "auth.welcome")
        // A trusted-local peer is authenticated from the start.
        const local = yield* H.rawConnect({ path: d.path })
        // Pings do not authenticate: the deadline still runs.
        assert.strictEqual(yield* H.ping(silent, 1), "core.pong#1/1")
        yield* TestClock.adjust("9900 millis")
        assert.strictEqual(yield* H.ping(silent, 2), "core.pong#2/1")
        yield* TestClock.adjust("200 millis")
        const { closed, error } = yield* H.expectClosedAfter(silent)
        assert.deepStrictEqual([error.id, error.flags, error.t, errorOf(error).kind], [0, TERMINAL, "core.error", "unauthenticated"])
        assert.isTrue(closed)
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(yield* H.ping(authenticated, 3), "core.pong#3/1")
        assert.strictEqual(yield* H.ping(local, 3), "core.pong#3/1")
      }))

    it.scopedLive("a peer without a token gets 32 frames answered, then unauthenticated on id 0 and the close", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const flood = yield* H.rawConnect(d.tcp)
        yield* flood.write(Buffer.concat(Array.from({ length: 40 }, (_, i) => H.frame(i + 1, 0, "auth.hello", { token: `guess-${i}` }))))
        for (let i = 0; i < 32; i++) assert.strictEqual(errorOf(yield* flood.nextMessage).kind, "unauthenticated")
        const { closed, error } = yield* H.expectClosedAfter(flood)
        assert.deepStrictEqual([error.id, errorOf(error).kind, closed], [0, "unauthenticated", true])
        // Once authenticated, frames are not counted.
        const good = yield* H.rawConnect(d.tcp)
        assert.strictEqual((yield* good.exchange(1, 0, "auth.hello", { token: H.TOKEN })).t, "auth.welcome")
        for (let i = 2; i < 100; i++) assert.strictEqual(yield* H.ping(good, i), `core.pong#${i}/1`)
      }))

    it.scoped("the deadline is configurable per listener, and can be switched off", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ connection: { authTimeout: "2 seconds" } })
        const silent = yield* H.rawConnect(d.tcp)
        assert.strictEqual(yield* H.ping(silent, 1), "core.pong#1/1")
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(errorOf((yield* H.expectClosedAfter(silent)).error).kind, "unauthenticated")
        const patient = yield* daemon({ connection: { authTimeout: Duration.infinity } })
        const waiting = yield* H.rawConnect(patient.tcp)
        yield* TestClock.adjust("1 hour")
        assert.strictEqual(yield* H.ping(waiting, 1), "core.pong#1/1")
      }))

    it.scoped("an idle connection is closed after the idle timeout; an open stream or a request in flight is never idle", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ connection: { idleTimeout: "30 seconds" } })
        const idle = yield* H.rawConnect({ path: d.path })
        const chatty = yield* H.rawConnect({ path: d.path })
        const streaming = yield* H.rawConnect({ path: d.path })
        const waiting = yield* H.rawConnect({ path: d.path })
        assert.strictEqual((yield* streaming.exchange(1, START, "test.follow", {})).t, "test.open")
        yield* waiting.write(H.frame(1, 0, "test.hang", {}))
        yield* H.ping(waiting, 2)
        for (let i = 1; i <= 5; i++) {
          yield* TestClock.adjust("20 seconds")
          // Activity restarts the count.
          assert.strictEqual(yield* H.ping(chatty, i), `core.pong#${i}/1`)
        }
        const ended = yield* H.expectClosedAfter(idle)
        assert.deepStrictEqual([ended.error.id, ended.error.flags, ended.error.t], [0, SHUTDOWN, "core.shutdown"])
        assert.isTrue(ended.closed)
        // 100 s later the stream and the hanging request still have their connections.
        const got = yield* streaming.exchange(1, 0, "test.ping-through", { n: 1 })
        assert.strictEqual(got.t, "test.got")
        assert.strictEqual(yield* H.ping(waiting, 3), "core.pong#3/1")
        // Once the stream ends, its connection is idle like any other.
        assert.strictEqual((yield* streaming.exchange(1, 0, "test.cancel", {})).t, "test.cancelled")
        yield* TestClock.adjust("31 seconds")
        assert.strictEqual((yield* H.expectClosedAfter(streaming)).error.t, "core.shutdown")
      }))
  })

  describe("errors that echo input", () => {
    it.scopedLive("a 3 MiB type name is answered with a bounded error, the connection stays, the log gets no stack trace", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* H.rawConnect({ path: d.path })
        for (const unit of ["x", "é", "😀"]) {
          const type = unit.repeat(Math.floor((3 * 1024 * 1024) / Buffer.byteLength(unit)))
          const answer = yield* peer.exchange(7, 0, type, {})
          assert.deepStrictEqual([answer.id, answer.flags, answer.t], [7, TERMINAL, "core.error"])
          const error = errorOf(answer)
          assert.strictEqual(error.kind, "unsupported_message_type")
          assert.isAtMost(Buffer.byteLength(error.message), ProtocolError.MAX_ECHO_BYTES)
          assert.isAtMost(Buffer.byteLength(error.offending_type!), ProtocolError.MAX_ECHO_BYTES)
          // Cut between characters: what is kept is a prefix of the type, without a broken surrogate pair.
          const kept = error.offending_type!.replace(/…$/, "")
          assert.isTrue(type.startsWith(kept), unit)
          assert.isTrue(kept.length > 10)
          assert.strictEqual(Buffer.from(kept, "utf8").toString("utf8"), kept)
          assert.strictEqual(yield* H.ping(peer, 8), "core.pong#8/1")
        }
        // The same on an invalid-flags answer and before authentication over TCP.
        const tcp = yield* H.rawConnect(d.tcp)
        const huge = `core.${"y".repeat(3 * 1024 * 1024)}`
        const refused = errorOf(yield* tcp.exchange(3, START, huge, {}))
        assert.isAtMost(Buffer.byteLength(refused.message), ProtocolError.MAX_ECHO_BYTES)
        assert.strictEqual(yield* H.ping(tcp, 4), "core.pong#4/1")
        assert.deepStrictEqual(d.lines.filter((line) => line.level === "ERROR" || !Cause.isEmpty(line.cause)), [])
      }), { timeout: 30_000 })

    it.scopedLive("a flood of malformed frames is answered frame by frame and logged as one warning line", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* H.rawConnect({ path: d.path })
        const bad = Buffer.concat(Array.from({ length: 200 }, (_, i) => H.rawFrame(i + 1, 0, Buffer.from("ff", "hex"))))
        yield* peer.write(bad)
        for (let i = 0; i < 200; i++) assert.strictEqual(errorOf(yield* peer.nextMessage).kind, "malformed_message")
        // Fatal framing errors on other connections count against the same limit.
        for (let i = 0; i < 5; i++) {
          const broken = yield* H.rawConnect({ path: d.path })
          yield* broken.write(Buffer.from("00400001000000", "hex"))
          assert.isTrue((yield* H.expectClosedAfter(broken)).closed)
        }
        const warnings = d.lines.filter((line) => line.level === "WARN")
        assert.isAtLeast(warnings.length, 1)
        assert.isAtMost(warnings.length, 2)
        assert.deepStrictEqual(d.lines.filter((line) => line.level === "ERROR" || !Cause.isEmpty(line.cause)), [])
      }), { timeout: 30_000 })

    it("no core.error the server builds exceeds the bound, whatever it carries", () => {
      const big = "z".repeat(5 * 1024 * 1024)
      const bytes = Connection.errorFrame(9, {
        kind: "invalid_payload",
        message: big,
        offending_type: big,
        details: { blob: big }
      })
      assert.isBelow(bytes.length, 1024)
      const decoded = H.decode(Either.getOrThrow(Either.right({ id: 9, flags: bytes[8]!, body: bytes.subarray(9) })))
      assert.isAtMost(Buffer.byteLength(errorOf(decoded).message), ProtocolError.MAX_ECHO_BYTES)
      assert.strictEqual(ProtocolError.truncateUtf8("short"), "short")
      assert.strictEqual(Buffer.byteLength(ProtocolError.truncateUtf8("😀".repeat(100), 10)), 7)
    })
  })
})
