/**
 * Frames: the PROTOCOL.md vectors byte for byte, the encoder's refusals, and
 * the incremental decoder on partial reads, packed chunks, byte-by-byte
 * delivery and arbitrary (also hostile) byte streams cut anywhere.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import * as Frame from "../../src/protocol/Frame.js"
import { FrameTooLarge, FrameTooShort, InvalidFlags, InvalidId } from "../../src/protocol/ProtocolError.js"

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")
const unhex = (text: string) => new Uint8Array(Buffer.from(text.replace(/\s+/g, ""), "hex"))
const concat = (parts: ReadonlyArray<Uint8Array>) => new Uint8Array(Buffer.concat(parts))
const plain = (frame: Frame.RawFrame) => ({ id: frame.id, flags: frame.flags, body: hex(frame.body) })

/** Splits `bytes` at the given cut points (any order, duplicates allowed). */
const split = (bytes: Uint8Array, cuts: ReadonlyArray<number>): Array<Uint8Array> => {
  const points = [...new Set(cuts.map((cut) => Math.min(bytes.length, Math.max(0, cut))))].sort((a, b) => a - b)
  const out: Array<Uint8Array> = []
  let from = 0
  for (const point of [...points, bytes.length]) {
    out.push(bytes.subarray(from, point))
    from = point
  }
  return out
}

/** Pushes every chunk, checking the buffering bound after each push; returns all frames and the error. */
const decodeAll = (chunks: ReadonlyArray<Uint8Array>) => {
  const decoder = Frame.makeDecoder()
  const frames: Array<Frame.RawFrame> = []
  let error: Frame.Decoded["error"]
  for (const chunk of chunks) {
    const result = decoder.push(chunk)
    frames.push(...result.frames)
    if (error !== undefined) {
      // Once broken, the decoder accepts nothing more and repeats the same error.
      assert.strictEqual(result.frames.length, 0)
      assert.strictEqual(result.error, error)
    }
    error = result.error
    // Never more than one incomplete frame: its 4-byte prefix plus at most MAX_FRAME_LEN - 1 bytes.
    assert.isAtMost(decoder.bufferedBytes, Frame.LENGTH_SIZE + Frame.MAX_FRAME_LEN - 1)
    if (error !== undefined) assert.strictEqual(decoder.bufferedBytes, 0)
  }
  return { frames, error, buffered: decoder.bufferedBytes }
}

/** The specification written as simply as possible, over the whole stream at once. */
const reference = (bytes: Uint8Array) => {
  const frames: Array<{ id: number; flags: number; body: string }> = []
  let pos = 0
  while (bytes.length - pos >= 4) {
    const len = Buffer.from(bytes).readUInt32BE(pos)
    if (len > Frame.MAX_FRAME_LEN) return { frames, error: { _tag: "FrameTooLarge", length: len } }
    if (len < 5) return { frames, error: { _tag: "FrameTooShort", length: len } }
    if (bytes.length - pos - 4 < len) break
    const view = Buffer.from(bytes.subarray(pos + 4, pos + 4 + len))
    frames.push({ id: view.readUInt32BE(0), flags: view[4]!, body: hex(view.subarray(5)) })
    pos += 4 + len
  }
  return { frames, error: undefined, buffered: bytes.length - pos }
}

const arbitraryFrame = fc.record({
  id: fc.oneof(fc.constantFrom(0, 1, Frame.MAX_ID), fc.integer({ min: 0, max: Frame.MAX_ID })),
  flags: fc.integer({ min: 0, max: Frame.KNOWN_FLAGS }),
  body: fc.uint8Array({ maxLength: 300 })
})

describe("Frame.encode", () => {
  it("writes the raw frame vector", () => {
    const bytes = Frame.encodeUnsafe({ id: 0xdeadbeef, flags: Frame.FLAG_TERMINAL, body: unhex("0102030405") })
    assert.strictEqual(hex(bytes), "0000000adeadbeef010102030405")
    assert.deepStrictEqual(Either.map(Frame.encode({ id: 0xdeadbeef, flags: 1, body: unhex("0102030405") }), hex), Either.right("0000000adeadbeef010102030405"))
  })

  it("writes an empty body as len 5", () => {
    assert.strictEqual(hex(Frame.encodeUnsafe({ id: 7, flags: 0, body: new Uint8Array(0) })), "000000050000000700")
  })

  it("flag constants are the protocol's bits", () => {
    assert.deepStrictEqual(
      [Frame.FLAG_TERMINAL, Frame.FLAG_SESSION_START, Frame.FLAG_SHUTDOWN, Frame.KNOWN_FLAGS, Frame.MAX_FRAME_LEN],
      [1, 2, 4, 7, 4_194_304]
    )
    assert.isTrue(Frame.hasFlag(Frame.FLAG_TERMINAL | Frame.FLAG_SHUTDOWN, Frame.FLAG_SHUTDOWN))
    assert.isFalse(Frame.hasFlag(Frame.FLAG_TERMINAL, Frame.FLAG_SESSION_START))
  })

  it("accepts the largest body and refuses one byte more with FrameTooLarge", () => {
    const largest = Frame.encode({ id: 1, flags: 0, body: new Uint8Array(Frame.MAX_BODY_SIZE) })
    assert.isTrue(Either.isRight(largest))
    assert.strictEqual(Either.getOrThrow(largest).length, 4 + Frame.MAX_FRAME_LEN)
    assert.strictEqual(hex(Either.getOrThrow(largest).subarray(0, 4)), "00400000")
    const tooLarge = Frame.encode({ id: 1, flags: 0, body: new Uint8Array(Frame.MAX_BODY_SIZE + 1) })
    assert.deepStrictEqual(tooLarge, Either.left(new FrameTooLarge({ length: Frame.MAX_FRAME_LEN + 1, max: Frame.MAX_FRAME_LEN })))
  })

  it("refuses unknown flag bits and ids that are not u32s", () => {
    const body = new Uint8Array(0)
    for (const flags of [8, 0x80, 0xff, 0x100, -1, 1.5]) {
      assert.deepStrictEqual(Frame.encode({ id: 1, flags, body }), Either.left(new InvalidFlags({ flags })))
    }
    for (const id of [-1, 2 ** 32, 1.5, Number.NaN]) {
      const result = Frame.encode({ id, flags: 0, body })
      assert.isTrue(Either.isLeft(result) && result.left instanceof InvalidId && Object.is(result.left.id, id))
    }
    assert.throws(() => Frame.encodeUnsafe({ id: 1, flags: 8, body }), /invalid frame flags 0x8/)
    try {
      Frame.encodeUnsafe({ id: 2 ** 32, flags: 0, body })
      assert.fail("expected a throw")
    } catch (error) {
      assert.instanceOf(error, InvalidId)
    }
  })

  it("validateFlags passes defined bits and reports others", () => {
    const frame = { id: 3, flags: 0x0a, body: new Uint8Array(0) }
    assert.deepStrictEqual(Frame.validateFlags(frame), Either.left(new InvalidFlags({ flags: 0x0a })))
    const good = { ...frame, flags: 7 }
    assert.deepStrictEqual(Frame.validateFlags(good), Either.right(good))
  })
})

describe("Frame.Decoder", () => {
  it("reads the raw frame vector", () => {
    const { buffered, error, frames } = decodeAll([unhex("0000000adeadbeef010102030405")])
    assert.deepStrictEqual(frames.map(plain), [{ id: 0xdeadbeef, flags: 1, body: "0102030405" }])
    assert.isUndefined(error)
    assert.strictEqual(buffered, 0)
  })

  it("a length prefix alone needs more bytes", () => {
    const decoder = Frame.makeDecoder()
    const result = decoder.push(unhex("0000000a"))
    assert.deepStrictEqual(result.frames, [])
    assert.isUndefined(result.error)
    assert.strictEqual(decoder.bufferedBytes, 4)
    const rest = decoder.push(unhex("deadbeef010102030405"))
    assert.deepStrictEqual(rest.frames.map(plain), [{ id: 0xdeadbeef, flags: 1, body: "0102030405" }])
    assert.strictEqual(decoder.bufferedBytes, 0)
  })

  it("00 40 00 01 is FrameTooLarge as soon as the prefix is in, without waiting for the body", () => {
    const decoder = Frame.makeDecoder()
    assert.deepStrictEqual(decoder.push(unhex("0040")), { frames: [] })
    const result = decoder.push(unhex("0001"))
    assert.deepStrictEqual(result.error, new FrameTooLarge({ length: 0x400001, max: Frame.MAX_FRAME_LEN }))
    assert.strictEqual(decoder.bufferedBytes, 0)
    assert.strictEqual(decoder.error, result.error)
    // The largest allowed length is not an error: the decoder waits for the rest.
    const largest = Frame.makeDecoder().push(unhex("00400000 00000001 00"))
    assert.deepStrictEqual(largest, { frames: [] })
    assert.deepStrictEqual(Frame.makeDecoder().push(unhex("ffffffff")).error, new FrameTooLarge({ length: 0xffffffff, max: Frame.MAX_FRAME_LEN }))
  })

  it("00 00 00 03 is FrameTooShort, and so is every length below 5", () => {
    assert.deepStrictEqual(Frame.makeDecoder().push(unhex("00000003 000000")).error, new FrameTooShort({ length: 3 }))
    for (const len of [0, 1, 2, 3, 4]) {
      assert.deepStrictEqual(Frame.makeDecoder().push(unhex(`0000000${len}`)).error, new FrameTooShort({ length: len }))
    }
    assert.deepStrictEqual(Frame.makeDecoder().push(unhex("00000005 00000009 04")).frames.map(plain), [
      { id: 9, flags: 4, body: "" }
    ])
  })

  it("after a framing error the decoder refuses all input, but keeps the frames that came before it", () => {
    const good = Frame.encodeUnsafe({ id: 1, flags: 0, body: unhex("a0") })
    const decoder = Frame.makeDecoder()
    const first = decoder.push(concat([good, unhex("00000001"), good]))
    assert.deepStrictEqual(first.frames.map(plain), [{ id: 1, flags: 0, body: "a0" }])
    assert.deepStrictEqual(first.error, new FrameTooShort({ length: 1 }))
    const again = decoder.push(good)
    assert.deepStrictEqual(again.frames, [])
    assert.strictEqual(again.error, first.error)
    assert.strictEqual(decoder.bufferedBytes, 0)
  })

  it("decodes several frames from one chunk, keeping a trailing partial frame", () => {
    const frames = [
      { id: 1, flags: 0, body: unhex("01") },
      { id: 2, flags: 2, body: unhex("") },
      { id: 3, flags: 1, body: unhex("030303") }
    ]
    const bytes = concat(frames.map(Frame.encodeUnsafe))
    const next = Frame.encodeUnsafe({ id: 4, flags: 4, body: unhex("0404") })
    const decoder = Frame.makeDecoder()
    const result = decoder.push(concat([bytes, next.subarray(0, 6)]))
    assert.deepStrictEqual(result.frames.map(plain), frames.map(plain))
    assert.strictEqual(decoder.bufferedBytes, 6)
    assert.deepStrictEqual(decoder.push(next.subarray(6)).frames.map(plain), [{ id: 4, flags: 4, body: "0404" }])
    assert.strictEqual(decoder.bufferedBytes, 0)
  })

  it("decodes a frame delivered one byte at a time, completing it only on its last byte", () => {
    const body = new Uint8Array(1000).map((_, i) => i * 7)
    const bytes = Frame.encodeUnsafe({ id: 0x01020304, flags: 3, body })
    const decoder = Frame.makeDecoder()
    for (let i = 0; i < bytes.length - 1; i++) {
      assert.deepStrictEqual(decoder.push(bytes.subarray(i, i + 1)), { frames: [] })
      assert.strictEqual(decoder.bufferedBytes, i + 1)
    }
    const last = decoder.push(bytes.subarray(bytes.length - 1))
    assert.deepStrictEqual(last.frames.map(plain), [{ id: 0x01020304, flags: 3, body: hex(body) }])
    assert.strictEqual(decoder.bufferedBytes, 0)
  })

  it("empty chunks change nothing", () => {
    const decoder = Frame.makeDecoder()
    assert.deepStrictEqual(decoder.push(new Uint8Array(0)), { frames: [] })
    decoder.push(unhex("000000"))
    assert.deepStrictEqual(decoder.push(new Uint8Array(0)), { frames: [] })
    assert.strictEqual(decoder.bufferedBytes, 3)
  })

  it("a frame inside one chunk is a view of it, not a copy; a frame across chunks is assembled once", () => {
    const bytes = concat([Frame.encodeUnsafe({ id: 1, flags: 0, body: unhex("aabbcc") })])
    const [frame] = Frame.makeDecoder().push(bytes).frames
    assert.strictEqual(frame!.body.buffer, bytes.buffer)
    assert.strictEqual(frame!.body.byteOffset, bytes.byteOffset + Frame.HEADER_SIZE)
    const decoder = Frame.makeDecoder()
    decoder.push(bytes.subarray(0, 10))
    const [joined] = decoder.push(bytes.subarray(10)).frames
    assert.strictEqual(hex(joined!.body), "aabbcc")
  })

  it("a maximum-size frame in 1-byte chunks and in 64 KiB chunks decodes in linear time", () => {
    const body = new Uint8Array(Frame.MAX_BODY_SIZE).map((_, i) => i & 0xff)
    const bytes = Frame.encodeUnsafe({ id: 5, flags: 1, body })
    for (const size of [65_536, 1]) {
      const decoder = Frame.makeDecoder()
      const frames: Array<Frame.RawFrame> = []
      const started = Date.now()
      for (let i = 0; i < bytes.length; i += size) frames.push(...decoder.push(bytes.subarray(i, i + size)).frames)
      // Quadratic copying would take hours over 4 million pushes; linear work takes a second or two.
      assert.isBelow(Date.now() - started, 20_000)
      assert.strictEqual(frames.length, 1)
      assert.strictEqual(frames[0]!.body.length, Frame.MAX_BODY_SIZE)
      assert.isTrue(Buffer.from(frames[0]!.body).equals(Buffer.from(body)))
    }
  }, 60_000)

  it.prop(
    "frames cut at arbitrary points decode to the same frames",
    { frames: fc.array(arbitraryFrame, { maxLength: 12 }), cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 40 }) },
    ({ cuts, frames }) => {
      const bytes = concat(frames.map(Frame.encodeUnsafe))
      const { buffered, error, frames: decoded } = decodeAll(split(bytes, cuts.map((cut) => Math.floor(cut * bytes.length))))
      assert.isUndefined(error)
      assert.strictEqual(buffered, 0)
      assert.deepStrictEqual(decoded.map(plain), frames.map(plain))
    },
    { fastCheck: { numRuns: 300 } }
  )

  it.prop(
    "frames delivered one byte at a time decode to the same frames",
    { frames: fc.array(arbitraryFrame, { maxLength: 4 }) },
    ({ frames }) => {
      const bytes = concat(frames.map(Frame.encodeUnsafe))
      const { error, frames: decoded } = decodeAll(Array.from(bytes, (_, i) => bytes.subarray(i, i + 1)))
      assert.isUndefined(error)
      assert.deepStrictEqual(decoded.map(plain), frames.map(plain))
    },
    { fastCheck: { numRuns: 100 } }
  )

  // Streams mixing valid frames, lengths near the limits and random bytes: whatever arrives, however it is cut,
  // the decoder returns what the simple whole-stream reading of the specification returns, never throws, and
  // never buffers more than one incomplete frame.
  const segment = fc.oneof(
    arbitraryFrame.map(Frame.encodeUnsafe),
    fc.constantFrom(0, 1, 4, 5, 6, Frame.MAX_FRAME_LEN, Frame.MAX_FRAME_LEN + 1, 0xffffffff).map((len) => {
      const out = new Uint8Array(4)
      new DataView(out.buffer).setUint32(0, len)
      return out
    }),
    fc.uint8Array({ maxLength: 64 })
  )

  it.prop(
    "any byte stream cut anywhere yields the specification's frames or its typed error, with bounded buffering",
    { segments: fc.array(segment, { maxLength: 10 }), cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 20 }) },
    ({ cuts, segments }) => {
      const bytes = concat(segments)
      const expected = reference(bytes)
      const actual = decodeAll(split(bytes, cuts.map((cut) => Math.floor(cut * bytes.length))))
      assert.deepStrictEqual(actual.frames.map(plain), expected.frames)
      if (expected.error === undefined) {
        assert.isUndefined(actual.error)
        assert.strictEqual(actual.buffered, expected.buffered)
      } else {
        assert.isDefined(actual.error)
        assert.isTrue(actual.error instanceof FrameTooLarge || actual.error instanceof FrameTooShort)
        assert.strictEqual(actual.error!._tag, expected.error._tag)
        assert.strictEqual(actual.error!.length, expected.error.length)
        assert.strictEqual(actual.buffered, 0)
      }
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop(
    "uniformly random bytes in random chunks never throw and end in frames, a wait, or a typed error",
    { chunks: fc.array(fc.uint8Array({ maxLength: 32 }), { maxLength: 16 }) },
    ({ chunks }) => {
      const { buffered, error } = decodeAll(chunks)
      if (error !== undefined) assert.isTrue(error instanceof FrameTooLarge || error instanceof FrameTooShort)
      else assert.isBelow(buffered, Frame.LENGTH_SIZE + Frame.MAX_FRAME_LEN)
    },
    { fastCheck: { numRuns: 500 } }
  )
})
