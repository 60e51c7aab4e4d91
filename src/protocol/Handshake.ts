/**
 * The connection handshake, server to client, before any frame: an 8-byte
 * preamble `[id_start: u32 BE][id_end_exclusive: u32 BE]` naming the
 * correlation ids the client may use, then the `core.ready` frame.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Envelope from "./Envelope.js"
import { MAX_ID, type RawFrame } from "./Frame.js"
import { InvalidId, InvalidPayload, MalformedMessage } from "./ProtocolError.js"

/** Bytes of the id-range preamble. */
export const PREAMBLE_SIZE = 8

/** The `protocol` a `core.ready` announces. */
export const PROTOCOL = "troupe/1"

/** The message type of the ready frame. */
export const READY_TYPE = "core.ready"

const U32 = Schema.Int.pipe(Schema.between(0, MAX_ID))

/** The correlation ids a client may use: `start` (inclusive) to `endExclusive`, non-empty. */
export class IdRange extends Schema.Class<IdRange>("troupe/IdRange")(
  Schema.Struct({ start: U32, endExclusive: U32 }).pipe(
    Schema.filter(({ endExclusive, start }) => start < endExclusive || "an id range holds at least one id")
  )
) {
  /** Every id but 0 (reserved for connection-level messages) and 2^32-1 (the exclusive end must fit a u32). */
  static readonly whole = new IdRange({ start: 1, endExclusive: MAX_ID })

  /** Whether `id` is inside the range. */
  contains(id: number): boolean {
    return id >= this.start && id < this.endExclusive
  }
}

/** The 8 preamble bytes announcing `range`. */
export const encodePreamble = (range: IdRange): Uint8Array => {
  const out = Buffer.alloc(PREAMBLE_SIZE)
  out.writeUInt32BE(range.start, 0)
  out.writeUInt32BE(range.endExclusive, 4)
  return out
}

/**
 * The id range in the first 8 bytes of the stream; the bytes after them are
 * frames. Fewer than 8 bytes, or an empty range, is `MalformedMessage`.
 */
export const decodePreamble = (bytes: Uint8Array): Either.Either<IdRange, MalformedMessage> => {
  if (bytes.length < PREAMBLE_SIZE) {
    return Either.left(new MalformedMessage({ reason: `id-range preamble needs 8 bytes, got ${bytes.length}` }))
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, PREAMBLE_SIZE)
  const start = view.getUint32(0)
  const endExclusive = view.getUint32(4)
  return start < endExclusive
    ? Either.right(new IdRange({ start, endExclusive }))
    : Either.left(new MalformedMessage({ reason: `empty id range [${start}, ${endExclusive})` }))
}

/** The id if `range` holds it, else `InvalidId`; id 0 passes only as a `SHUTDOWN` frame's id, checked by the caller. */
export const checkId = (range: IdRange, id: number): Either.Either<number, InvalidId> =>
  range.contains(id) ? Either.right(id) : Either.left(new InvalidId({ id }))

const U64_MAX = 2n ** 64n - 1n

/**
 * A u64 nanosecond count. On the wire it is a CBOR unsigned integer of the
 * shortest width: a number up to 2^32-1 (cbor-x writes larger numbers as
 * floats, and nanosecond clocks exceed 2^53 anyway), a bigint above. Decoded
 * from either form, as a bigint.
 */
export const U64 = Schema.transformOrFail(
  Schema.Union(Schema.BigIntFromSelf, Schema.NonNegativeInt),
  Schema.BigIntFromSelf.pipe(Schema.betweenBigInt(0n, U64_MAX)),
  {
    strict: true,
    decode: (value) => ParseResult.succeed(typeof value === "bigint" ? value : BigInt(value)),
    encode: (value) => ParseResult.succeed(value <= 0xffff_ffffn ? Number(value) : value)
  }
)

/** The `core.ready` payload: clock readings of the daemon's start, the agent's version, the protocol and auth methods. */
export class Ready extends Schema.Class<Ready>("troupe/Ready")({
  boot_time_ns: U64,
  init_time_ns: U64,
  ready_time_ns: U64,
  agent_version: Schema.String,
  protocol: Schema.Literal(PROTOCOL),
  /** `["token"]` when `auth.hello` must carry a token, `[]` on a trusted-local listener. */
  auth: Schema.Array(Schema.Literal("token"))
}) {}

const encodeReady = Schema.encodeSync(Ready)
const decodeReady = Schema.decodeUnknownEither(Ready)

/** The `core.ready` payload as it goes into CBOR (u64 fields as numbers or bigints, by size). */
export const readyPayload = (ready: Ready): unknown => encodeReady(ready)

/** The `core.ready` frame: id 0, flags 0. */
export const readyFrame = (ready: Ready): RawFrame => ({
  id: 0,
  flags: 0,
  body: Envelope.encodeBodyUnsafe(READY_TYPE, readyPayload(ready))
})

/** A received `core.ready` payload; unknown fields are ignored. */
export const decodeReadyPayload = (payload: unknown): Either.Either<Ready, InvalidPayload> =>
  Either.mapLeft(decodeReady(payload), (error) => new InvalidPayload({ type: READY_TYPE, reason: error.message }))

