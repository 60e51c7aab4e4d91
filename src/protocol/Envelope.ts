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
import { Either } from "effect"
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

const encodeWith = (type: string, payload: unknown): Uint8Array | string => {
  const p = Cbor.encode(payload)
  if (Either.isLeft(p)) return p.left
  // Key order v, t, p as in the vectors; the Encoder never fails on a number, a string and bytes.
  const body = Cbor.encode({ v: GENERATION, t: type, p: p.right })
  return Either.isLeft(body) ? body.left : body.right
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
