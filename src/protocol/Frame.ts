/**
 * Frames: `[len: u32 BE][id: u32 BE][flags: u8][body]`, `len = 5 + body length`.
 *
 * `encode` builds one frame; `Decoder` cuts a byte stream (chunks of any size,
 * split anywhere) back into frames. Both sit on every message's path, so they
 * are plain synchronous functions; errors are values (`Either`, or a field of
 * the decoder's result), never exceptions, except in `encodeUnsafe`.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import { FrameTooLarge, FrameTooShort, type FramingError, InvalidFlags, InvalidId } from "./ProtocolError.js"

/** The largest `len` a frame may declare: 4 MiB. */
export const MAX_FRAME_LEN = 4_194_304

/** Bytes of the `len` prefix. */
export const LENGTH_SIZE = 4

/** Bytes counted by `len` before the body: id (4) and flags (1). */
export const ID_FLAGS_SIZE = 5

/** Bytes before the body: len, id and flags. */
export const HEADER_SIZE = LENGTH_SIZE + ID_FLAGS_SIZE

/** The smallest `len`: a frame with an empty body. */
export const MIN_FRAME_LEN = ID_FLAGS_SIZE

/** The largest body a frame can carry. */
export const MAX_BODY_SIZE = MAX_FRAME_LEN - ID_FLAGS_SIZE

/** Flag: the last frame for this id. */
export const FLAG_TERMINAL = 0x01

/** Flag: the first frame of a streaming exchange. */
export const FLAG_SESSION_START = 0x02

/** Flag: the client is leaving (id 0). */
export const FLAG_SHUTDOWN = 0x04

/** Every flag bit the protocol defines; any other bit is `invalid_flags`. */
export const KNOWN_FLAGS = FLAG_TERMINAL | FLAG_SESSION_START | FLAG_SHUTDOWN

/** The largest correlation id (ids are u32). */
export const MAX_ID = 0xffff_ffff

/** One frame, its body still undecoded: enough for a relay to route by id. */
export interface RawFrame {
  readonly id: number
  readonly flags: number
  readonly body: Uint8Array
}

/** Whether `flags` has every bit of `flag` set. */
export const hasFlag = (flags: number, flag: number): boolean => (flags & flag) === flag

/** The frame if its flags use only defined bits, else `InvalidFlags` (answered on the frame's id; not fatal). */
export const validateFlags = (frame: RawFrame): Either.Either<RawFrame, InvalidFlags> =>
  (frame.flags & ~KNOWN_FLAGS) === 0 ? Either.right(frame) : Either.left(new InvalidFlags({ flags: frame.flags }))

const check = (frame: RawFrame): FrameTooLarge | InvalidFlags | InvalidId | undefined => {
  if (!Number.isInteger(frame.id) || frame.id < 0 || frame.id > MAX_ID) return new InvalidId({ id: frame.id })
  if (!Number.isInteger(frame.flags) || frame.flags < 0 || (frame.flags & ~KNOWN_FLAGS) !== 0) {
    return new InvalidFlags({ flags: frame.flags })
  }
  if (frame.body.length > MAX_BODY_SIZE) {
    return new FrameTooLarge({ length: ID_FLAGS_SIZE + frame.body.length, max: MAX_FRAME_LEN })
  }
  return undefined
}

const write = (frame: RawFrame): Uint8Array => {
  const size = HEADER_SIZE + frame.body.length
  // allocUnsafe takes small frames from Node's pooled slab; every byte is written below.
  const out = Buffer.allocUnsafe(size)
  out.writeUInt32BE(size - LENGTH_SIZE, 0)
  out.writeUInt32BE(frame.id, 4)
  out[8] = frame.flags
  out.set(frame.body, HEADER_SIZE)
  return out
}

/** The frame's bytes, or why no peer would accept it (oversize body, unknown flag bits, id not a u32). */
export const encode = (frame: RawFrame): Either.Either<Uint8Array, FrameTooLarge | InvalidFlags | InvalidId> => {
  const error = check(frame)
  return error === undefined ? Either.right(write(frame)) : Either.left(error)
}

/** Like `encode`, for callers whose frames are valid by construction; throws the typed error otherwise. */
export const encodeUnsafe = (frame: RawFrame): Uint8Array => {
  const error = check(frame)
  if (error !== undefined) throw error
  return write(frame)
}

/** What one `Decoder.push` produced: the frames completed so far and, once the stream is broken, why. */
export interface Decoded {
  readonly frames: ReadonlyArray<RawFrame>
  /** Set once a framing error was seen; the decoder then refuses every further chunk with the same error. */
  readonly error?: FramingError
}

const NO_FRAMES: ReadonlyArray<RawFrame> = []
const EMPTY = new Uint8Array(0)

/**
 * An incremental frame decoder for one connection.
 *
 * Chunks are kept as they arrive and copied once, when the frame they belong
 * to is complete (a frame inside a single chunk is not copied at all: its body
 * is a view of the chunk, so a pushed chunk must not be modified afterwards).
 * A declared length is checked as soon as its four bytes are in, so the
 * decoder never buffers more than one incomplete frame (at most
 * `LENGTH_SIZE + MAX_FRAME_LEN - 1` bytes) besides the chunk being pushed.
 */
export class Decoder {
  // Pending chunks from `head` on; `offset` bytes of chunks[head] are already consumed.
  private chunks: Array<Uint8Array> = []
  private head = 0
  private offset = 0
  private buffered = 0
  // `len` of the frame being assembled, once its prefix is in; -1 before that.
  private expected = -1
  private failure: FramingError | undefined = undefined

  /** Bytes received and not yet returned as frames. */
  get bufferedBytes(): number {
    // The length prefix of the frame being assembled is already consumed but still counts as held.
    return this.expected < 0 ? this.buffered : this.buffered + LENGTH_SIZE
  }

  /** The framing error that stopped this decoder, if any. */
  get error(): FramingError | undefined {
    return this.failure
  }

  /** Feeds the next chunk of the stream; returns every frame it completed, and a framing error if the stream broke. */
  push(chunk: Uint8Array): Decoded {
    if (this.failure !== undefined) return { frames: NO_FRAMES, error: this.failure }
    if (chunk.length > 0) {
      this.chunks.push(chunk)
      this.buffered += chunk.length
    }
    let frames: Array<RawFrame> | undefined
    for (;;) {
      if (this.expected < 0) {
        if (this.buffered < LENGTH_SIZE) break
        const len = this.readLength()
        if (len > MAX_FRAME_LEN || len < MIN_FRAME_LEN) {
          this.failure = len > MAX_FRAME_LEN
            ? new FrameTooLarge({ length: len, max: MAX_FRAME_LEN })
            : new FrameTooShort({ length: len })
          this.release()
          return frames === undefined ? { frames: NO_FRAMES, error: this.failure } : { frames, error: this.failure }
        }
        this.expected = len
      }
      if (this.buffered < this.expected) break
      const bytes = this.take(this.expected)
      this.expected = -1
      const frame: RawFrame = {
        id: ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0,
        flags: bytes[4]!,
        body: bytes.subarray(ID_FLAGS_SIZE)
      }
      if (frames === undefined) frames = [frame]
      else frames.push(frame)
    }
    return { frames: frames ?? NO_FRAMES }
  }

  // Reads and consumes the 4-byte length prefix, which may straddle chunks.
  private readLength(): number {
    let value = 0
    for (let i = 0; i < LENGTH_SIZE; i++) {
      const chunk = this.chunks[this.head]!
      value = value * 256 + chunk[this.offset]!
      this.advance(1)
    }
    return value
  }

  // Consumes `n` bytes (n <= available in the head chunk).
  private advance(n: number): void {
    this.offset += n
    this.buffered -= n
    if (this.offset === this.chunks[this.head]!.length) this.nextChunk()
  }

  private nextChunk(): void {
    // Forget the consumed chunk now, so its memory is not held until the list is compacted.
    this.chunks[this.head] = EMPTY
    this.offset = 0
    this.head++
    if (this.head === this.chunks.length) {
      this.chunks = []
      this.head = 0
    } else if (this.head >= 1024 && this.head * 2 >= this.chunks.length) {
      // Drop consumed chunks in bulk: shifting one at a time is quadratic when a frame arrives byte by byte.
      this.chunks = this.chunks.slice(this.head)
      this.head = 0
    }
  }

  // Consumes `n` buffered bytes: a view when they lie in one chunk, else one copy.
  private take(n: number): Uint8Array {
    const first = this.chunks[this.head]!
    if (first.length - this.offset >= n) {
      const view = first.subarray(this.offset, this.offset + n)
      this.advance(n)
      return view
    }
    const out = Buffer.allocUnsafe(n)
    let filled = 0
    while (filled < n) {
      const chunk = this.chunks[this.head]!
      const count = Math.min(chunk.length - this.offset, n - filled)
      out.set(chunk.subarray(this.offset, this.offset + count), filled)
      filled += count
      this.advance(count)
    }
    return out
  }

  private release(): void {
    this.chunks = []
    this.head = 0
    this.offset = 0
    this.buffered = 0
  }
}

/** A fresh decoder for one connection's byte stream. */
export const makeDecoder = (): Decoder => new Decoder()
