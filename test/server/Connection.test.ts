/**
 * One connection, end to end over real sockets (a unix socket in a temp dir,
 * and TCP on 127.0.0.1): the handshake byte for byte, ping, authentication,
 * every kind of bad frame with the answer PROTOCOL.md specifies (error kind,
 * id, whether the connection stays up) while a second client on the same
 * daemon keeps working, streams with follow-ups, interruption of handlers
 * when a connection goes away, the per-connection limits, and random garbage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, FastCheck as fc, Option, Queue, Schema } from "effect"
import { join } from "node:path"
import * as Cbor from "../../src/protocol/Cbor.js"
import * as Frame from "../../src/protocol/Frame.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import * as Messages from "../../src/protocol/Messages.js"
import { Principal } from "../../src/schema/Principal.js"
import type * as Connection from "../../src/server/Connection.js"
import * as H from "./harness.js"

const { FLAG_SESSION_START: START, FLAG_SHUTDOWN: SHUTDOWN, FLAG_TERMINAL: TERMINAL } = Frame

const encodePrincipal = Schema.encodeSync(Principal)

type Kind = "unix" | "tcp"

/** A daemon with the test routes on a unix socket (trusted-local) and on TCP (token). */
const daemon = (connection?: Connection.Options) =>
  Effect.gen(function*() {
    const { path, port, probes } = yield* H.testDaemon(connection)
    const target = (kind: Kind): H.Target => kind === "unix" ? { path } : { host: "127.0.0.1", port }
    /** A peer ready for routed messages: TCP peers say hello with the token first. */
    const peer = (kind: Kind) =>
      Effect.gen(function*() {
        const raw = yield* H.rawConnect(target(kind))
        if (kind === "tcp") {
          const welcome = yield* raw.exchange(1, 0, "auth.hello", { token: H.TOKEN })
          assert.strictEqual(welcome.t, "auth.welcome")
        }
        return raw
      })
    return { probes, path, port, target, peer }
  })

describe("Connection", () => {
  describe("handshake", () => {
    it.scopedLive("sends the id range, then core.ready (id 0, flags 0), byte for byte", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        for (const kind of ["unix", "tcp"] as const) {
          const peer = yield* H.rawConnect(d.target(kind))
          // [1, 2^32-1): every id but 0.
          assert.strictEqual(Buffer.from(peer.handshake.subarray(0, 8)).toString("hex"), "00000001ffffffff")
          assert.deepStrictEqual([peer.range.start, peer.range.endExclusive], [1, 0xffff_ffff])
          assert.strictEqual(peer.ready.id, 0)
          assert.strictEqual(peer.ready.flags, 0)
          const message = H.decode(peer.ready)
          assert.strictEqual(message.t, "core.ready")
          const ready = Either.getOrThrow(Handshake.decodeReadyPayload(message.payload))
          assert.strictEqual(ready.protocol, "troupe/1")
          assert.deepStrictEqual(ready.auth, kind === "unix" ? [] : ["token"])
          assert.isTrue(ready.boot_time_ns <= ready.init_time_ns && ready.init_time_ns <= ready.ready_time_ns)
          // The rest of the bytes are exactly what the codec writes for that payload: shortest-form CBOR, keys in order.
          const expected = Buffer.concat([
            Handshake.encodePreamble(Handshake.IdRange.whole),
            Frame.encodeUnsafe(Handshake.readyFrame(ready))
          ])
          assert.strictEqual(Buffer.from(peer.handshake).toString("hex"), expected.toString("hex"))
          // The payload's keys in order, as the table in PROTOCOL.md lists them.
          assert.deepStrictEqual(Object.keys(Cbor.decode(peer.ready.body).pipe(Either.getOrThrow) as object), ["v", "t", "p"])
          assert.deepStrictEqual(Object.keys(message.payload as object), [
            "boot_time_ns",
            "init_time_ns",
            "ready_time_ns",
            "agent_version",
            "protocol",
            "auth"
          ])
        }
      }))

    it.scopedLive("announces a configured id range and enforces it", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ idRange: new Handshake.IdRange({ start: 100, endExclusive: 200 }) })
        const peer = yield* H.rawConnect({ path: d.path })
        assert.strictEqual(Buffer.from(peer.handshake.subarray(0, 8)).toString("hex"), "00000064000000c8")
        assert.strictEqual(yield* H.ping(peer, 199), "core.pong#199/1")
        yield* peer.write(H.frame(200, 0, "core.ping", {}))
        const { closed, error } = yield* H.expectClosedAfter(peer)
        assert.deepStrictEqual([error.id, error.flags, error.t], [0, TERMINAL, "core.error"])
        assert.strictEqual((error.payload as { kind: string }).kind, "invalid_id")
        assert.isTrue(closed)
      }))
  })

  describe("ping", () => {
    for (const kind of ["unix", "tcp"] as const) {
      it.scopedLive(`core.ping is answered with core.pong {} (TERMINAL) over ${kind}, before authentication too`, () =>
        Effect.gen(function*() {
          const d = yield* daemon()
          const peer = yield* H.rawConnect(d.target(kind))
          yield* peer.write(Buffer.from("0000001900000001" + "00" + "a3617607617469636f72652e70696e67617041a0", "hex"))
          const pong = yield* peer.next
          assert.notStrictEqual(pong, "closed")
          if (pong === "closed") return
          assert.strictEqual(Buffer.from(Frame.encodeUnsafe(pong)).toString("hex"), "000000190000000101a3617607617469636f72652e706f6e67617041a0")
          // Many in one write, answered in order.
          yield* peer.write(Buffer.concat([2, 3, 4].map((id) => H.frame(id, 0, "core.ping", {}))))
          for (const id of [2, 3, 4]) assert.strictEqual(H.decode((yield* peer.next) as Frame.RawFrame).id, id)
        }))
    }
  })

  describe("authentication", () => {
    it.scopedLive("over TCP only core.* and auth.hello are answered before a valid token", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* H.rawConnect(d.target("tcp"))
        const before = yield* peer.exchange(1, 0, "test.echo", { x: 1 })
        assert.deepStrictEqual([before.t, before.flags, (before.payload as { kind: string }).kind], [
          "core.error",
          TERMINAL,
          "unauthenticated"
        ])
        // An unknown type is not revealed as such before authentication.
        assert.strictEqual((yield* peer.exchange(2, 0, "nope.nothing", {})).payload instanceof Object, true)
        assert.strictEqual(yield* H.ping(peer, 3), "core.pong#3/1")

        const missing = yield* peer.exchange(4, 0, "auth.hello", {})
        assert.strictEqual((missing.payload as { kind: string }).kind, "unauthenticated")
        const wrong = yield* peer.exchange(5, 0, "auth.hello", { token: "guess" })
        assert.strictEqual((wrong.payload as { kind: string }).kind, "unauthenticated")
        assert.notInclude(JSON.stringify(wrong.payload), "guess")
        const malformed = yield* peer.exchange(6, 0, "auth.hello", { token: 42 })
        assert.deepInclude(malformed.payload as object, { kind: "invalid_payload", offending_type: "auth.hello" })
        assert.strictEqual((yield* peer.exchange(7, 0, "test.echo", {})).t, "core.error")

        const welcome = yield* peer.exchange(8, 0, "auth.hello", {
          token: H.TOKEN,
          client: "test",
          excludeFromAnalytics: true
        })
        assert.deepStrictEqual([welcome.t, welcome.flags], ["auth.welcome", TERMINAL])
        assert.deepStrictEqual(welcome.payload, { principal: encodePrincipal(H.tokenPrincipal) })
        const echoed = yield* peer.exchange(9, 0, "test.echo", { x: 1 })
        assert.deepStrictEqual([echoed.t, echoed.payload], ["test.echoed", { x: 1 }])
        yield* peer.exchange(10, 0, "test.whoami", {})
        const seen = yield* Queue.take(d.probes.peers)
        assert.deepStrictEqual(seen, { principal: Option.some(H.tokenPrincipal), excludeFromAnalytics: true })
      }))

    it.scopedLive("a trusted-local unix peer is the local principal without a token", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* H.rawConnect({ path: d.path })
        const you = yield* peer.exchange(1, 0, "test.whoami", {})
        assert.deepStrictEqual([you.t, you.payload], ["test.you", { listener: "unix" }])
        assert.deepStrictEqual(yield* Queue.take(d.probes.peers), {
          principal: Option.some(H.localPrincipal),
          excludeFromAnalytics: false
        })
        // A token still switches to its principal.
        const welcome = yield* peer.exchange(2, 0, "auth.hello", { token: H.TOKEN })
        assert.deepStrictEqual(welcome.payload, { principal: encodePrincipal(H.tokenPrincipal) })
      }))

    it.scopedLive("a unix listener without a local principal asks for a token", () =>
      Effect.gen(function*() {
        const dir = yield* H.tempDir
        const probes = yield* H.makeProbes
        const path = join(dir, "agent.sock")
        yield* H.startServer({ unix: path }, H.routerOf(H.testRoutes(probes)), H.tokenAuth)
        const peer = yield* H.rawConnect({ path })
        const ready = Either.getOrThrow(Handshake.decodeReadyPayload(H.decode(peer.ready).payload))
        assert.deepStrictEqual(ready.auth, ["token"])
        assert.strictEqual(((yield* peer.exchange(1, 0, "test.echo", {})).payload as { kind: string }).kind, "unauthenticated")
      }))
  })

  describe("bad frames", () => {
    /** A bad input: the bytes to send, and what must come back. */
    interface Case {
      readonly name: string
      readonly bytes: Uint8Array
      readonly id: number
      readonly kind: string
      readonly open: boolean
      readonly offendingType?: string
    }
    const rawFrame = H.rawFrame
    const envelope = (fields: Record<string, unknown>) => Either.getOrThrow(Cbor.encode(fields))
    const cases: ReadonlyArray<Case> = [
      { name: "oversize length", bytes: Buffer.from("00400001000000", "hex"), id: 0, kind: "malformed_message", open: false },
      { name: "short length", bytes: Buffer.from("00000003000000", "hex"), id: 0, kind: "malformed_message", open: false },
      { name: "bad CBOR", bytes: rawFrame(5, 0, Buffer.from("ffff", "hex")), id: 5, kind: "malformed_message", open: true },
      {
        name: "not an envelope",
        bytes: rawFrame(5, 0, envelope({ v: 7, t: "core.ping" })),
        id: 5,
        kind: "malformed_message",
        open: true
      },
      {
        name: "payload not CBOR",
        bytes: rawFrame(5, 0, envelope({ v: 7, t: "test.echo", p: Buffer.from("ff", "hex") })),
        id: 5,
        kind: "malformed_message",
        open: true,
        offendingType: "test.echo"
      },
      {
        name: "unknown type",
        bytes: H.frame(6, 0, "nope.nothing", {}),
        id: 6,
        kind: "unsupported_message_type",
        open: true,
        offendingType: "nope.nothing"
      },
      {
        name: "core type the server does not take",
        bytes: H.frame(6, 0, "core.pong", {}),
        id: 6,
        kind: "unsupported_message_type",
        open: true
      },
      { name: "unknown flag bits", bytes: H.frame(7, 0x08, "core.ping", {}), id: 7, kind: "invalid_flags", open: true },
      { name: "SHUTDOWN on a request id", bytes: H.frame(7, SHUTDOWN, "core.ping", {}), id: 7, kind: "invalid_flags", open: true },
      {
        name: "a stream without SESSION_START",
        bytes: H.frame(7, 0, "test.follow", {}),
        id: 7,
        kind: "invalid_flags",
        open: true
      },
      {
        name: "a request with SESSION_START",
        bytes: H.frame(7, START, "test.echo", {}),
        id: 7,
        kind: "invalid_flags",
        open: true
      },
      {
        name: "bad payload",
        bytes: H.frame(8, 0, "test.count", { n: "many" }),
        id: 8,
        kind: "invalid_payload",
        open: true,
        offendingType: "test.count"
      },
      {
        name: "v != 7",
        bytes: rawFrame(9, 0, envelope({ v: 8, t: "core.ping", p: Buffer.from("a0", "hex") })),
        id: 9,
        kind: "unsupported_protocol_generation",
        open: true
      },
      { name: "id 0 without SHUTDOWN", bytes: H.frame(0, 0, "core.ping", {}), id: 0, kind: "invalid_id", open: false },
      { name: "id outside the range", bytes: H.frame(0xffff_ffff, 0, "core.ping", {}), id: 0, kind: "invalid_id", open: false }
    ]

    for (const kind of ["unix", "tcp"] as const) {
      it.scopedLive(`each is answered as specified over ${kind}, and a second client is unaffected`, () =>
        Effect.gen(function*() {
          const d = yield* daemon()
          const bystander = yield* d.peer(kind)
          let pings = 100
          for (const c of cases) {
            const peer = yield* d.peer(kind)
            assert.strictEqual(yield* H.ping(bystander, pings++), `core.pong#${pings - 1}/1`, c.name)
            yield* peer.write(c.bytes)
            const answer = yield* peer.nextMessage
            assert.deepStrictEqual([answer.id, answer.flags, answer.t], [c.id, TERMINAL, "core.error"], c.name)
            const payload = answer.payload as { kind: string; message: string; offending_type?: string }
            assert.strictEqual(payload.kind, c.kind, c.name)
            assert.isString(payload.message, c.name)
            if (c.offendingType !== undefined) assert.strictEqual(payload.offending_type, c.offendingType, c.name)
            if (c.open) {
              assert.strictEqual(yield* H.ping(peer, 11), "core.pong#11/1", c.name)
            } else {
              assert.strictEqual(yield* peer.next, "closed", c.name)
            }
            assert.strictEqual(yield* H.ping(bystander, pings++), `core.pong#${pings - 1}/1`, c.name)
          }
        }))
    }

    it.scopedLive("a frame split across writes and frames packed in one are all handled", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("unix")
        const bytes = Buffer.concat([H.frame(1, 0, "test.echo", { a: 1 }), H.frame(2, 0, "core.ping", {})])
        for (let i = 0; i < bytes.length; i++) yield* peer.write(bytes.subarray(i, i + 1))
        assert.strictEqual((yield* peer.nextMessage).t, "test.echoed")
        assert.strictEqual((yield* peer.nextMessage).t, "core.pong")
      }))

    it.scopedLive("a request on an id in use is an error on that id and ends what ran there", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("unix")
        yield* peer.write(H.frame(7, 0, "test.hang", {}))
        assert.strictEqual(yield* Queue.take(d.probes.hangStarted), 7)
        const answer = yield* peer.exchange(7, 0, "test.echo", {})
        assert.deepStrictEqual([answer.id, answer.t, (answer.payload as { kind: string }).kind], [7, "core.error", "invalid_id"])
        assert.strictEqual(yield* Queue.take(d.probes.hangInterrupted), 7)
        // The id is free again, and the connection is fine.
        assert.strictEqual((yield* peer.exchange(7, 0, "test.echo", {})).t, "test.echoed")
      }))

    it.scopedLive("handler errors are core.error; a defect is `internal` without its message, and the connection stays", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("tcp")
        const failed = yield* peer.exchange(2, 0, "test.fail", {})
        assert.deepStrictEqual(failed.payload, { kind: "not_found", message: "nothing here" })
        const died = yield* peer.exchange(3, 0, "test.die", {})
        assert.deepStrictEqual([died.id, died.flags, died.t], [3, TERMINAL, "core.error"])
        assert.deepStrictEqual(died.payload, { kind: "internal", message: "internal error" })
        assert.notInclude(JSON.stringify(died.payload), "hunter2")
        assert.strictEqual(yield* H.ping(peer, 4), "core.pong#4/1")
      }))
  })

  describe("streams", () => {
    it.scopedLive("a stream sends its frames without TERMINAL, then the TERMINAL result", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("tcp")
        yield* peer.write(H.frame(5, START, "test.items", { n: 3 }))
        for (let i = 0; i < 3; i++) {
          const item = yield* peer.nextMessage
          assert.deepStrictEqual([item.id, item.flags, item.t, item.payload], [5, 0, "test.item", { i }])
        }
        const end = yield* peer.nextMessage
        assert.deepStrictEqual([end.id, end.flags, end.t], [5, TERMINAL, "test.end"])
      }))

    it.scopedLive("follow-up frames reach the handler; a cancel ends the stream", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("unix")
        yield* peer.write(H.frame(5, START, "test.follow", {}))
        assert.strictEqual((yield* peer.nextMessage).t, "test.open")
        const got = yield* peer.exchange(5, 0, "test.note", { text: "hi" })
        assert.deepStrictEqual([got.id, got.flags, got.t, got.payload], [5, 0, "test.got", {
          type: "test.note",
          payload: { text: "hi" }
        }])
        const cancelled = yield* peer.exchange(5, 0, "test.cancel", {})
        assert.deepStrictEqual([cancelled.id, cancelled.flags, cancelled.t], [5, TERMINAL, "test.cancelled"])
        // The id is free: a new exchange may use it.
        assert.strictEqual((yield* peer.exchange(5, 0, "test.echo", {})).t, "test.echoed")
      }))

    it.scopedLive("a malformed follow-up ends the stream with the error on its id", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("unix")
        yield* peer.write(H.frame(5, START, "test.follow", {}))
        assert.strictEqual((yield* peer.nextMessage).t, "test.open")
        yield* peer.write(Buffer.from("0000000700000005" + "00" + "ffff", "hex"))
        const error = yield* peer.nextMessage
        assert.deepStrictEqual([error.id, error.flags, (error.payload as { kind: string }).kind], [5, TERMINAL, "malformed_message"])
        assert.strictEqual(yield* Queue.take(d.probes.streamInterrupted), 5)
        assert.strictEqual(yield* H.ping(peer, 6), "core.pong#6/1")
      }))
  })

  describe("lifetime", () => {
    it.scopedLive("closing a connection interrupts its handlers; other connections keep theirs", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const leaving = yield* d.peer("unix")
        const staying = yield* d.peer("unix")
        yield* leaving.write(H.frame(3, 0, "test.hang", {}))
        yield* leaving.write(H.frame(4, START, "test.follow", {}))
        yield* staying.write(H.frame(9, 0, "test.hang", {}))
        const started = [yield* Queue.take(d.probes.hangStarted), yield* Queue.take(d.probes.hangStarted)]
        assert.sameMembers(started, [3, 9])
        yield* leaving.destroy
        assert.strictEqual(yield* Queue.take(d.probes.hangInterrupted), 3)
        assert.strictEqual(yield* Queue.take(d.probes.streamInterrupted), 4)
        assert.isTrue(Option.isNone(yield* Queue.poll(d.probes.hangInterrupted)))
        assert.strictEqual(yield* H.ping(staying, 10), "core.pong#10/1")
      }))

    it.scopedLive("core.shutdown (id 0, SHUTDOWN) closes the connection and interrupts its handlers", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const peer = yield* d.peer("tcp")
        yield* peer.write(H.frame(3, 0, "test.hang", {}))
        assert.strictEqual(yield* Queue.take(d.probes.hangStarted), 3)
        yield* peer.write(Buffer.from("0000001d0000000004a361760761746d636f72652e73687574646f776e617041f6", "hex"))
        assert.strictEqual(yield* peer.next, "closed")
        assert.strictEqual(yield* Queue.take(d.probes.hangInterrupted), 3)
      }))
  })

  describe("limits", () => {
    it.scopedLive("open streams beyond the limit are busy", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ maxStreams: 2 })
        const peer = yield* d.peer("unix")
        for (const id of [1, 2]) {
          yield* peer.write(H.frame(id, START, "test.follow", {}))
          assert.strictEqual((yield* peer.nextMessage).t, "test.open")
        }
        const busy = yield* peer.exchange(3, START, "test.follow", {})
        assert.deepStrictEqual([busy.id, busy.flags, busy.t], [3, TERMINAL, "core.error"])
        assert.deepInclude(busy.payload as object, { kind: "busy", retryable: true })
        // Requests are not streams: still answered.
        assert.strictEqual((yield* peer.exchange(4, 0, "test.echo", {})).t, "test.echoed")
        assert.strictEqual((yield* peer.exchange(1, 0, "test.cancel", {})).t, "test.cancelled")
        yield* peer.write(H.frame(3, START, "test.follow", {}))
        assert.strictEqual((yield* peer.nextMessage).t, "test.open")
      }))

    it.scopedLive("requests in flight beyond the limit are busy", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ maxInFlight: 3 })
        const peer = yield* d.peer("unix")
        yield* peer.write(Buffer.concat([1, 2, 3].map((id) => H.frame(id, 0, "test.gate", {}))))
        const busy = yield* peer.exchange(4, 0, "test.echo", {})
        assert.deepStrictEqual([busy.id, (busy.payload as { kind: string }).kind], [4, "busy"])
        assert.strictEqual(yield* H.ping(peer, 5), "core.pong#5/1")
        yield* Deferred.succeed(d.probes.gate, undefined)
        const opened = [yield* peer.nextMessage, yield* peer.nextMessage, yield* peer.nextMessage]
        assert.sameMembers(opened.map((m) => `${m.id}:${m.t}`), ["1:test.opened", "2:test.opened", "3:test.opened"])
        assert.strictEqual((yield* peer.exchange(4, 0, "test.echo", {})).t, "test.echoed")
      }))

    it.scopedLive("unread follow-ups beyond the limit end the stream with busy", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ maxFollowUps: 2 })
        const peer = yield* d.peer("unix")
        yield* peer.write(H.frame(1, START, "test.deaf", {}))
        assert.strictEqual((yield* peer.nextMessage).t, "test.open")
        yield* peer.write(Buffer.concat([1, 2, 3].map(() => H.frame(1, 0, "test.note", {}))))
        const busy = yield* peer.nextMessage
        assert.deepStrictEqual([busy.id, busy.flags, (busy.payload as { kind: string }).kind], [1, TERMINAL, "busy"])
        assert.strictEqual(yield* Queue.take(d.probes.streamInterrupted), 1)
      }))

    it.scopedLive("a configured smaller frame limit closes the connection with malformed_message", () =>
      Effect.gen(function*() {
        const d = yield* daemon({ maxFrameSize: 64 })
        const peer = yield* d.peer("unix")
        assert.strictEqual((yield* peer.exchange(1, 0, "test.echo", { s: "x".repeat(10) })).t, "test.echoed")
        yield* peer.write(H.frame(2, 0, "test.echo", { s: "x".repeat(100) }))
        const { closed, error } = yield* H.expectClosedAfter(peer)
        assert.deepStrictEqual([error.id, (error.payload as { kind: string }).kind, closed], [0, "malformed_message", true])
      }))

    it.scopedLive("a client that does not read stops the server's writes instead of growing its buffer", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const probes = d.probes
        const peer = yield* d.peer("unix")
        // The raw peer reads eagerly; pause its socket by opening a second raw connection we never read from.
        const net = yield* Effect.promise(() => import("node:net"))
        const silent = yield* Effect.acquireRelease(
          Effect.async<InstanceType<typeof net.Socket>>((resume) => {
            const socket = net.connect({ path: d.path }, () => resume(Effect.succeed(socket)))
          }),
          (socket) => Effect.sync(() => socket.destroy())
        )
        silent.pause()
        // ~6 MB of stream frames: far more than the socket buffers hold.
        silent.write(H.frame(1, START, "test.items", { n: 300_000 }))
        // A real wait: nothing observable happens while the handler is (correctly) stuck.
        yield* Effect.sleep("300 millis")
        // Still emitting: blocked on the full buffer rather than buffering 6 MB.
        assert.isTrue(Option.isNone(yield* Queue.poll(probes.itemsEmitted)))
        let frames = 0
        let terminal = false
        yield* Effect.async<void>((resume) => {
          const decoder = Frame.makeDecoder()
          let seenHandshake = 0
          silent.on("data", (chunk: Buffer) => {
            let rest = chunk
            if (seenHandshake < 8) {
              const skip = Math.min(8 - seenHandshake, rest.length)
              seenHandshake += skip
              rest = rest.subarray(skip)
            }
            for (const frame of decoder.push(rest).frames) {
              frames++
              if (frame.id === 1 && Frame.hasFlag(frame.flags, TERMINAL)) {
                terminal = true
                resume(Effect.void)
              }
            }
          })
          silent.resume()
        })
        // core.ready, 300,000 items, the end.
        assert.strictEqual(frames, 300_002)
        assert.isTrue(terminal)
        assert.strictEqual(yield* Queue.take(probes.itemsEmitted), 1)
        assert.strictEqual(yield* H.ping(peer, 2), "core.pong#2/1")
      }), { timeout: 60_000 })
  })

  describe("garbage", () => {
    it.scopedLive("random bytes never crash the server; another client still pings", () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const bystander = yield* d.peer("unix")
        let n = 1
        const checkBystander = Effect.gen(function*() {
          const id = n++
          assert.strictEqual(yield* H.ping(bystander, id), `core.pong#${id}/1`)
        })
        // Arbitrary bytes.
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 2048 }), (bytes) =>
              Effect.runPromise(Effect.scoped(Effect.gen(function*() {
                const peer = yield* H.rawConnect({ path: d.path })
                yield* peer.write(bytes)
                yield* checkBystander
              })))),
            { numRuns: 60 }
          )
        )
        // Well-framed frames with arbitrary ids, flags and bodies (CBOR-ish or not), authenticated over TCP.
        const frameArb = fc.record({
          id: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 0xffff_ffff })),
          flags: fc.integer({ min: 0, max: 255 }),
          body: fc.oneof(
            fc.uint8Array({ maxLength: 64 }),
            fc.record({
              v: fc.oneof(fc.constant(7), fc.integer()),
              t: fc.constantFrom("core.ping", "test.echo", "test.items", "test.follow", "test.count", "auth.hello", "x"),
              p: fc.anything().map((value) => Either.getOrElse(Cbor.encode(value), () => new Uint8Array([0xff])))
            }).map((envelope) => Either.getOrElse(Cbor.encode(envelope), () => new Uint8Array()))
          )
        })
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.array(frameArb, { minLength: 1, maxLength: 20 }), (frames) =>
              Effect.runPromise(Effect.scoped(Effect.gen(function*() {
                const peer = yield* d.peer("tcp")
                yield* peer.write(Buffer.concat(frames.map((f) => H.rawFrame(f.id, f.flags, f.body))))
                yield* checkBystander
              })))),
            { numRuns: 60 }
          )
        )
        yield* checkBystander
      }), { timeout: 120_000 })
  })
})

// Keeps the import of the message table honest: the types used here are the protocol's.
void Messages.Type.ping
