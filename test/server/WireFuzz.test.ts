/**
 * Wire fuzzing: 100,000 frames, random or mutated from valid ones (bit flips,
 * cut or grown bodies, other flags and ids, random CBOR), written in batches
 * over many connections (unix, trusted; TCP after a hello) to a running server, plus frames that break the framing
 * itself on connections of their own. Afterwards the server is alive and a
 * client that was connected all along still gets exactly its answers.
 *
 * The generator is seeded, so a failure replays.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as net from "node:net"
import * as Cbor from "../../src/protocol/Cbor.js"
import * as Frame from "../../src/protocol/Frame.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import { random, type Random } from "../support/random.js"
import * as H from "./harness.js"

const FRAMES = 100_000
const CONNECTIONS = 16
const BATCH = 2_500
/** An id no fuzzed frame uses (they stay below 2^20): the ping that says a connection's frames were all handled. */
const SENTINEL = 0x4000_0000

/** Bodies of valid messages, the material for mutations. */
const valid: ReadonlyArray<Buffer> = [
  H.body("core.ping", {}),
  H.body("auth.hello", { token: H.TOKEN }),
  H.body("auth.hello", { token: "wrong" }),
  H.body("test.echo", { a: [1, 2, { b: "c" }], d: new Uint8Array([1, 2, 3]), e: -1.5, f: null }),
  H.body("test.count", { n: 3 }),
  H.body("test.fail", {}),
  H.body("test.whoami", {}),
  H.body("test.follow", {}),
  H.body("test.cancel", {}),
  H.body("test.gate", {}),
  H.body("session.create", { agent: "x", metadata: { deep: [[[[{ a: 1 }]]]] } }),
  H.body("core.shutdown", null),
  H.body("session.events.cancel", {})
].map((bytes) => Buffer.from(bytes))

const fuzzedFrame = (rng: Random): Buffer => {
  const id = rng.next() < 0.9 ? 1 + rng.int(64) : 1 + rng.int(1 << 20)
  // Mostly defined flags; now and then unknown bits.
  const flags = rng.next() < 0.95 ? rng.int(4) : rng.int(256)
  const choice = rng.next()
  let body: Buffer
  if (choice < 0.15) {
    body = rng.bytes(rng.int(64))
  } else if (choice < 0.25) {
    // Random CBOR documents, as a payload or as the whole body.
    const value = { v: 7, t: rng.next() < 0.5 ? "test.echo" : rng.bytes(4).toString("latin1"), p: rng.bytes(rng.int(16)) }
    body = Buffer.from(Either.getOrElse(Cbor.encode(value), () => new Uint8Array(0)))
  } else {
    body = Buffer.from(valid[rng.int(valid.length)]!)
    const mutation = rng.next()
    if (mutation < 0.35) {
      for (let flips = 1 + rng.int(4); flips > 0; flips--) body[rng.int(body.length)]! ^= 1 << rng.int(8)
    } else if (mutation < 0.5) {
      body = body.subarray(0, rng.int(body.length))
    } else if (mutation < 0.6) {
      body = Buffer.concat([body, rng.bytes(1 + rng.int(16))])
    } else if (mutation < 0.7) {
      body[rng.int(body.length)] = rng.int(256)
    }
    // Else unchanged: a valid message with fuzzed id and flags.
  }
  return Buffer.from(H.rawFrame(id, flags, body))
}

/**
 * A lean peer for volume: it counts the frames it receives (after the
 * handshake) in the socket's own callback, and `settle` waits for the frame
 * on `SENTINEL` or the end of the connection.
 */
const floodPeer = (target: H.Target) =>
  Effect.acquireRelease(
    Effect.async<{
      readonly socket: net.Socket
      readonly answers: () => number
      readonly settle: Effect.Effect<"settled" | "closed">
    }, Error>((resume) => {
      const socket = net.connect(target)
      const decoder = Frame.makeDecoder()
      let skip = Handshake.PREAMBLE_SIZE
      let answers = -1 // core.ready is not an answer
      let closed = false
      let waiter: ((outcome: "settled" | "closed") => void) | undefined
      socket.on("data", (chunk: Buffer) => {
        const rest = skip > 0 ? chunk.subarray(Math.min(skip, chunk.length)) : chunk
        skip = Math.max(0, skip - chunk.length)
        for (const frame of decoder.push(rest).frames) {
          answers++
          if (frame.id === SENTINEL) waiter?.("settled")
        }
      })
      socket.on("error", () => undefined)
      socket.on("close", () => {
        closed = true
        waiter?.("closed")
      })
      socket.once("connect", () =>
        resume(Effect.succeed({
          socket,
          answers: () => answers,
          settle: Effect.async<"settled" | "closed">((done) => {
            if (closed) return done(Effect.succeed("closed"))
            waiter = (outcome) => {
              waiter = undefined
              done(Effect.succeed(outcome))
            }
          })
        })))
      socket.once("error", (error) => resume(Effect.fail(error)))
    }),
    (peer) => Effect.sync(() => peer.socket.destroy())
  )

describe("wire fuzzing", () => {
  it.scopedLive("100,000 random and mutated frames leave the server alive and a good client unaffected", () =>
    Effect.gen(function*() {
      const d = yield* H.testDaemon()
      const rng = random(0x13_13_13)
      const good = yield* H.rawConnect({ path: d.path })
      const tcp: H.Target = { host: "127.0.0.1", port: d.port }
      let checks = 0
      const check = Effect.gen(function*() {
        const id = ++checks
        const answer = yield* good.exchange(id, 0, "test.echo", { check: id })
        assert.deepStrictEqual([answer.id, answer.t, answer.payload], [id, "test.echoed", { check: id }])
      })

      let sent = 0
      let answered = 0
      const perConnection = Math.ceil(FRAMES / CONNECTIONS)
      for (let c = 0; c < CONNECTIONS; c++) {
        yield* Effect.scoped(Effect.gen(function*() {
          const peer = yield* floodPeer(c % 2 === 0 ? { path: d.path } : tcp)
          for (let done = 0; done < perConnection && sent < FRAMES; done += BATCH) {
            // TCP peers authenticate first: before that, only 32 frames are answered (the rest would close the connection).
            const frames: Array<Buffer> = c % 2 === 1 && done === 0 ? [Buffer.from(H.frame(SENTINEL + 1, 0, "auth.hello", { token: H.TOKEN }))] : []
            for (let i = 0; i < BATCH && sent < FRAMES; i++, sent++) frames.push(fuzzedFrame(rng))
            // The sentinel ping is handled after the batch: its answer says the whole batch was read.
            frames.push(Buffer.from(H.frame(SENTINEL, 0, "core.ping", {})))
            peer.socket.write(Buffer.concat(frames))
            // No fuzzed frame closes a connection (ids stay in range, lengths are right), so each batch settles.
            assert.strictEqual(yield* peer.settle, "settled")
          }
          answered += peer.answers()
        }))
        yield* check
      }
      assert.strictEqual(sent, FRAMES)
      // Most frames were answered one by one (streams and follow-ups are not), so the server read them all.
      assert.isAbove(answered, FRAMES / 2)

      // Frames that break the framing: a length beyond 4 MiB or below 5, random prefixes, half a frame then EOF.
      for (let i = 0; i < 50; i++) {
        const peer = yield* H.rawConnect(i % 2 === 0 ? { path: d.path } : tcp)
        const prefix = i % 3 === 0 ? Buffer.from([0x00, 0x40, 0x00, 0x01]) : i % 3 === 1 ? Buffer.from([0, 0, 0, rng.int(5)]) : rng.bytes(4)
        yield* peer.write(Buffer.concat([prefix, rng.bytes(rng.int(64))]))
        if (i % 5 === 0) yield* peer.destroy
      }
      for (let i = 0; i < 10; i++) yield* check
      // And a new client is served as the first one was.
      const late = yield* H.rawConnect(tcp)
      assert.strictEqual((yield* late.exchange(1, 0, "auth.hello", { token: H.TOKEN })).t, "auth.welcome")
      assert.strictEqual(yield* H.ping(late, 2), "core.pong#2/1")
    }), { timeout: 120_000 })
})
