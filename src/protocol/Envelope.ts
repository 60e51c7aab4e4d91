/**
 * The frame body: a CBOR map `{ "v": 7, "t": type, "p": bytes }` whose `p`
 * holds the payload as a second CBOR document.
 *
 * The payload is nested as bytes rather than as a value so a relay can read
 * `t` and forward `p` untouched; it also means a payload that is not CBOR is a
 * per-message error (`MalformedMessage` with the type), not a broken stream.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Cbor from "./Cbor.js"
import { InvalidPayload, MalformedMessage, UnsupportedGeneration } from "./ProtocolError.js"

/** The protocol generation this codec speaks (microsandbox agent protocol, relay side). */
export const GENERATION = 7

/** A decoded body: generation, message type and the payload's value. */
export interface Body {
  readonly v: number
  readonly t: string
  readonly payload: unknown
}

/** The shortest-form CBOR head of `major` with argument `n` (a length below 2^32). */
const head = (major: number, n: number): Uint8Array => {
  const m = major << 5
  if (n < 24) return Uint8Array.of(m | n)
  if (n < 0x100) return Uint8Array.of(m | 24, n)
  if (n < 0x10000) return Uint8Array.of(m | 25, n >> 8, n & 0xff)
  return Uint8Array.of(m | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

const textEncoder = new TextEncoder()

// `{ "v": 7, "t": type, "p": ` up to the byte string's head, per type: message types are few.
const prefixes = new Map<string, Uint8Array>()
const MAX_PREFIXES = 256
const prefixOf = (type: string): Uint8Array => {
  let prefix = prefixes.get(type)
  if (prefix === undefined) {
    const t = textEncoder.encode(type)
    prefix = Buffer.concat([
      Uint8Array.of(0xa3, 0x61, 0x76, GENERATION, 0x61, 0x74),
      head(3, t.length),
      t,
      Uint8Array.of(0x61, 0x70)
    ])
    if (prefixes.size < MAX_PREFIXES) prefixes.set(type, prefix)
  }
  return prefix
}

const encodeWith = (type: string, payload: unknown): Uint8Array | string => {
  const p = Cbor.encode(payload)
  if (Either.isLeft(p)) return p.left
  // The envelope is written by hand, byte for byte what the Encoder writes for `{ v, t, p }` in that key
  // order (the vectors hold it): the payload is copied once, and not walked a second time.
  const prefix = prefixOf(type)
  const bytesHead = head(2, p.right.length)
  const body = new Uint8Array(prefix.length + bytesHead.length + p.right.length)
  body.set(prefix, 0)
  body.set(bytesHead, prefix.length)
  body.set(p.right, prefix.length + bytesHead.length)
  return body
}

/** The body bytes for a message, or `InvalidPayload` if the payload has no CBOR form peers accept. */
export const encodeBody = (type: string, payload: unknown): Either.Either<Uint8Array, InvalidPayload> => {
  const result = encodeWith(type, payload)
  return typeof result === "string" ? Either.left(new InvalidPayload({ type, reason: result })) : Either.right(result)
}

/** Like `encodeBody`, for payloads built from schemas (JSON-like by construction); throws `InvalidPayload` otherwise. */
export const encodeBodyUnsafe = (type: string, payload: unknown): Uint8Array => {
  const result = encodeWith(type, payload)
  if (typeof result === "string") throw new InvalidPayload({ type, reason: result })
  return result
}

const isMap = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype

// `v` is an unsigned integer; a non-JavaScript peer may write it in any width, which cbor-x reads as a bigint at 64 bits.
const generationOf = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isInteger(v) && v >= 0
    ? v
    : typeof v === "bigint" && v >= 0n
    ? Number(v)
    : undefined

/**
 * The generation, type and payload of a body. Keys may come in any order and
 * unknown keys are ignored. A generation other than 7 is
 * `UnsupportedGeneration` whatever the rest holds (a later generation may
 * change the rest); anything else unreadable is `MalformedMessage`, with the
 * type once it is known.
 */
export const decodeBody = (bytes: Uint8Array): Either.Either<Body, MalformedMessage | UnsupportedGeneration> => {
  const decoded = Cbor.decode(bytes)
  if (Either.isLeft(decoded)) return Either.left(new MalformedMessage({ reason: `body: ${decoded.left}` }))
  const envelope = decoded.right
  if (!isMap(envelope)) return Either.left(new MalformedMessage({ reason: "body is not a CBOR map" }))
  const generation = generationOf(Object.hasOwn(envelope, "v") ? envelope["v"] : undefined)
  if (generation === undefined) {
    return Either.left(new MalformedMessage({ reason: "body has no unsigned integer \"v\"" }))
  }
  if (generation !== GENERATION) return Either.left(new UnsupportedGeneration({ generation }))
  const t = Object.hasOwn(envelope, "t") ? envelope["t"] : undefined
  if (typeof t !== "string") return Either.left(new MalformedMessage({ reason: "body has no text \"t\"" }))
  const p = Object.hasOwn(envelope, "p") ? envelope["p"] : undefined
  if (!(p instanceof Uint8Array)) {
    return Either.left(new MalformedMessage({ reason: "body has no byte string \"p\"", type: t }))
  }
  const payload = Cbor.decode(p)
  if (Either.isLeft(payload)) return Either.left(new MalformedMessage({ reason: `payload: ${payload.left}`, type: t }))
  return Either.right({ v: generation, t, payload: payload.right })
}
