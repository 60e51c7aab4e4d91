/**
 * The handshake: the id-range preamble and the `core.ready` payload, whose
 * nanosecond clocks need all 64 bits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc, Schema } from "effect"
import * as Cbor from "../../src/protocol/Cbor.js"
import * as Envelope from "../../src/protocol/Envelope.js"
import * as Frame from "../../src/protocol/Frame.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import { InvalidId, InvalidPayload, MalformedMessage } from "../../src/protocol/ProtocolError.js"

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")
const unhex = (text: string) => new Uint8Array(Buffer.from(text.replace(/\s+/g, ""), "hex"))

const ready = (overrides: Partial<ConstructorParameters<typeof Handshake.Ready>[0]> = {}) =>
  new Handshake.Ready({
    boot_time_ns: 1_700_000_000_123_456_789n,
    init_time_ns: 1_700_000_000_223_456_789n,
    ready_time_ns: 1_700_000_000_323_456_789n,
    agent_version: "0.1.0",
    protocol: "troupe/1",
    auth: ["token"],
    ...overrides
  })

describe("Handshake preamble", () => {
  it("is [id_start u32 BE][id_end_exclusive u32 BE], both ways", () => {
    assert.strictEqual(hex(Handshake.encodePreamble(Handshake.IdRange.whole)), "00000001ffffffff")
    assert.strictEqual(hex(Handshake.encodePreamble(new Handshake.IdRange({ start: 0x100, endExclusive: 0x200 }))), "0000010000000200")
    assert.deepStrictEqual(
      Handshake.decodePreamble(unhex("0000010000000200")),
      Either.right(new Handshake.IdRange({ start: 256, endExclusive: 512 }))
    )
  })

  it("reads the first 8 bytes of a longer read, leaving the frames after them", () => {
    const ping = Frame.encodeUnsafe({ id: 1, flags: 0, body: Either.getOrThrow(Envelope.encodeBody("core.ping", {})) })
    const stream = Buffer.concat([Handshake.encodePreamble(Handshake.IdRange.whole), ping])
    assert.deepStrictEqual(Handshake.decodePreamble(stream), Either.right(Handshake.IdRange.whole))
    assert.strictEqual(Frame.makeDecoder().push(stream.subarray(Handshake.PREAMBLE_SIZE)).frames.length, 1)
  })

  it("a short or empty range is MalformedMessage; a range cannot be built empty", () => {
    const short = Handshake.decodePreamble(unhex("00000001"))
    assert.isTrue(Either.isLeft(short) && short.left instanceof MalformedMessage && short.left.reason.includes("needs 8 bytes"))
    assert.include(
      (Handshake.decodePreamble(unhex("0000000500000005")) as Either.Left<MalformedMessage, Handshake.IdRange>).left.reason,
      "empty id range"
    )
    assert.throws(() => new Handshake.IdRange({ start: 5, endExclusive: 5 }))
    assert.throws(() => new Handshake.IdRange({ start: 0, endExclusive: 2 ** 32 }))
  })

  it("checkId accepts ids inside the range only", () => {
    const range = new Handshake.IdRange({ start: 10, endExclusive: 20 })
    assert.deepStrictEqual(Handshake.checkId(range, 10), Either.right(10))
    assert.deepStrictEqual(Handshake.checkId(range, 19), Either.right(19))
    assert.deepStrictEqual(Handshake.checkId(range, 20), Either.left(new InvalidId({ id: 20 })))
    assert.deepStrictEqual(Handshake.checkId(range, 0), Either.left(new InvalidId({ id: 0 })))
    assert.isFalse(Handshake.IdRange.whole.contains(0))
    assert.isFalse(Handshake.IdRange.whole.contains(Frame.MAX_ID))
    assert.isTrue(Handshake.IdRange.whole.contains(Frame.MAX_ID - 1))
  })
})

describe("Handshake core.ready", () => {
  it("is id 0, flags 0, and writes nanosecond clocks as 64-bit CBOR integers", () => {
    const frame = Handshake.readyFrame(ready())
    assert.deepStrictEqual([frame.id, frame.flags], [0, 0])
    const body = Either.getOrThrow(Envelope.decodeBody(frame.body))
    assert.strictEqual(body.t, "core.ready")
    assert.deepStrictEqual(body.payload, {
      boot_time_ns: 1_700_000_000_123_456_789n,
      init_time_ns: 1_700_000_000_223_456_789n,
      ready_time_ns: 1_700_000_000_323_456_789n,
      agent_version: "0.1.0",
      protocol: "troupe/1",
      auth: ["token"]
    })
    // 1b + 8 bytes: an integer, not a float that would lose the low digits.
    assert.include(hex(frame.body), "6c626f6f745f74696d655f6e73" + "1b" + 1_700_000_000_123_456_789n.toString(16).padStart(16, "0"))
  })

  it("writes small clocks in the shortest width and reads them back as bigints", () => {
    const small = ready({ boot_time_ns: 0n, init_time_ns: 23n, ready_time_ns: 0xffff_ffffn, auth: [] })
    const payload = Either.getOrThrow(Envelope.decodeBody(Handshake.readyFrame(small).body)).payload
    assert.deepStrictEqual(payload, { boot_time_ns: 0, init_time_ns: 23, ready_time_ns: 0xffff_ffff, agent_version: "0.1.0", protocol: "troupe/1", auth: [] })
    assert.deepStrictEqual(Handshake.decodeReadyPayload(payload), Either.right(small))
  })

  it.prop(
    "any u64 clock round-trips exactly",
    { ns: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) },
    ({ ns }) => {
      const value = ready({ boot_time_ns: ns, init_time_ns: ns, ready_time_ns: ns })
      const payload = Either.getOrThrow(Envelope.decodeBody(Handshake.readyFrame(value).body)).payload
      assert.deepStrictEqual(Handshake.decodeReadyPayload(payload), Either.right(value))
    }
  )

  it("decodes a peer's payload ignoring unknown fields, and refuses wrong shapes with InvalidPayload", () => {
    const base = Schema.encodeSync(Handshake.Ready)(ready()) as Record<string, unknown>
    const decoded = Handshake.decodeReadyPayload({ ...base, extra: { future: true } })
    assert.deepStrictEqual(decoded, Either.right(ready()))
    for (const bad of [
      { ...base, protocol: "troupe/2" },
      { ...base, auth: ["password"] },
      { ...base, boot_time_ns: -1 },
      { ...base, boot_time_ns: 1.5 },
      { ...base, boot_time_ns: 2n ** 64n },
      { ...base, boot_time_ns: "1" },
      { ...base, agent_version: undefined },
      null
    ]) {
      const result = Handshake.decodeReadyPayload(bad)
      assert.isTrue(Either.isLeft(result) && result.left instanceof InvalidPayload && result.left.type === "core.ready")
    }
  })

  it("reads a 64-bit clock written by a peer in any integer width", () => {
    const payload = Either.getOrThrow(Cbor.decode(unhex(
      "a6" + "6c626f6f745f74696d655f6e73" + "1b0000000000000005" + "6c696e69745f74696d655f6e73" + "1a00000006" +
        "6d72656164795f74696d655f6e73" + "07" + "6d6167656e745f76657273696f6e" + "6131" +
        "6870726f746f636f6c" + "6874726f7570652f31" + "6461757468" + "80"
    )))
    assert.deepStrictEqual(
      Handshake.decodeReadyPayload(payload),
      Either.right(ready({ boot_time_ns: 5n, init_time_ns: 6n, ready_time_ns: 7n, agent_version: "1", auth: [] }))
    )
  })
})
