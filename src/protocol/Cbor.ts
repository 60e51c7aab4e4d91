/**
 * The CBOR profile of the wire: what troupe writes and what it agrees to read.
 *
 * Writing: shortest-form CBOR with definite lengths through cbor-x, without
 * its record extension and without tags for byte strings and maps, so peers
 * written against plain CBOR (microsandbox's Rust agent) read it.
 *
 * Reading: peer bytes are untrusted, and cbor-x decodes far more than plain
 * CBOR (records that define structures, shared references that build cycles,
 * `RegExp` and `Error` construction, bignums decoded in quadratic time, typed
 * arrays). So every document is first checked by `validate`, a linear scan
 * with no recursion that admits only untagged data items (integers, floats,
 * byte and text strings, arrays, maps, false, true, null, undefined), bounds
 * nesting and the estimated memory of the decoded value, and only then handed
 * to cbor-x. Maps decode to plain objects; cbor-x renames a `__proto__` key to
 * `__proto_`, so no decoded value can change a prototype.
 *
 * @since 0.1.0
 */
import type { Decoder, Encoder, Options } from "cbor-x"
import * as Either from "effect/Either"
import { createRequire } from "node:module"

/** The deepest nesting of arrays and maps a received document may have. */
export const MAX_DEPTH = 256

/**
 * The deepest a JSON value inside a payload may nest (240): the wire's
 * `MAX_DEPTH` less room for the envelopes that carry a stored value back out
 * (a `session.event`, a `session.created`, a page of sessions wrap it in up to
 * six more levels), so every value the daemon accepts can also be sent.
 */
export const MAX_JSON_DEPTH = MAX_DEPTH - 16

/**
 * The most heap a received document may decode to, by the estimate in
 * `validate` (64 MiB). A JSON-like 4 MiB payload estimates at well under this;
 * 4 MiB of one-byte empty arrays or byte strings would take 150 to 400 MB.
 */
export const MAX_DECODED_COST = 64 * 1024 * 1024

// Rough V8 (64-bit) sizes, in bytes, of what cbor-x allocates per item. Only
// their order of magnitude matters: they separate dense hostile input (an
// allocation per input byte) from ordinary data.
const SLOT = 8
const HEAP_NUMBER = 16
const ARRAY = 32
const OBJECT = 56
const BYTES = 96
const STRING = 24

// Markers for the open-container stack: a definite container counts down the
// items it still expects; an indefinite one holds one of these until its break.
const INDEFINITE_ARRAY = -1
const MAP_KEY = -2
const MAP_VALUE = -3

const writeOptions: Options & { readonly useTag259ForMaps: boolean } = {
  // cbor-x's records (tag 105 structures) and 16-bit map headers are unreadable to plain CBOR peers.
  useRecords: false,
  variableMapSize: true,
  // Uint8Array would otherwise be written as tag 64 and Map as tag 259; peers expect plain bytes and maps.
  tagUint8Array: false,
  useTag259ForMaps: false
}
/**
 * cbor-x's encoder and decoder, made at the first encode or decode: cbor-x loads then, not when
 * the client or the package is imported (docs/decisions/0049-a-bundled-dist.md).
 */
let codec: { readonly encoder: Encoder; readonly decoder: Decoder } | undefined
const cbor = () => {
  if (codec === undefined) {
    const { Decoder, Encoder } = createRequire(import.meta.url)("cbor-x") as typeof import("cbor-x")
    codec = { encoder: new Encoder(writeOptions), decoder: new Decoder({ useRecords: false, mapsAsObjects: true }) }
  }
  return codec
}

const u32 = (bytes: Uint8Array, at: number): number =>
  bytes[at]! * 0x1000000 + ((bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!)

/**
 * Why `bytes` is not exactly one CBOR data item of the accepted profile, or
 * `undefined` if it is. Runs in time linear in `bytes.length`, in constant
 * stack, and allocates at most one small integer per open container.
 */
export const validate = (bytes: Uint8Array): string | undefined => {
  const end = bytes.length
  // Items still expected by each open container, innermost last; the root "container" expects one item.
  const open: Array<number> = [1]
  let pos = 0
  let cost = 0
  while (open.length > 0) {
    const level = open.length - 1
    const left = open[level]!
    if (left === 0) {
      open.pop()
      continue
    }
    if (pos >= end) return "truncated CBOR"
    const initial = bytes[pos++]!
    if (left < 0) {
      if (initial === 0xff) {
        if (left === MAP_VALUE) return "an indefinite-length map ends between a key and its value"
        open.pop()
        continue
      }
      if (left === MAP_KEY) open[level] = MAP_VALUE
      else if (left === MAP_VALUE) open[level] = MAP_KEY
    } else {
      open[level] = left - 1
    }
    const major = initial >> 5
    const info = initial & 0x1f
    cost += SLOT
    if (info === 31) {
      if (major === 4 || major === 5) {
        if (open.length > MAX_DEPTH) return `nesting deeper than ${MAX_DEPTH}`
        open.push(major === 4 ? INDEFINITE_ARRAY : MAP_KEY)
        cost += major === 4 ? ARRAY : OBJECT
        continue
      }
      if (major === 7) return "a break outside an indefinite-length array or map"
      if (major === 2 || major === 3) return "indefinite-length strings are not accepted"
      return "reserved additional information"
    }
    if (info > 27) return "reserved additional information"
    let arg = info
    if (info >= 24) {
      const size = 1 << (info - 24)
      if (size > end - pos) return "truncated CBOR"
      if (info === 24) arg = bytes[pos]!
      else if (info === 25) arg = (bytes[pos]! << 8) | bytes[pos + 1]!
      else {
        arg = u32(bytes, pos)
        // An 8-byte argument only matters as a length, where anything at or above 2^32 is out of reach anyway;
        // beyond 2^53 the sum is approximate, which changes no comparison.
        if (info === 27) arg = arg * 0x1_0000_0000 + u32(bytes, pos + 4)
      }
      pos += size
    }
    switch (major) {
      case 0:
      case 1:
        if (info >= 26) cost += HEAP_NUMBER
        break
      case 2:
      case 3:
        if (arg > end - pos) return "truncated CBOR"
        pos += arg
        // Empty and one-character strings are shared by V8; longer ones and every byte string are new objects.
        if (major === 2) cost += BYTES
        else if (arg > 1) cost += STRING + arg
        break
      case 4:
        // Every element takes at least one byte: a longer count is a lie, refused before anything is allocated.
        if (arg > end - pos) return "truncated CBOR"
        cost += ARRAY
        if (arg > 0) {
          if (open.length > MAX_DEPTH) return `nesting deeper than ${MAX_DEPTH}`
          open.push(arg)
        }
        break
      case 5:
        if (arg > (end - pos) / 2) return "truncated CBOR"
        cost += OBJECT
        if (arg > 0) {
          if (open.length > MAX_DEPTH) return `nesting deeper than ${MAX_DEPTH}`
          open.push(arg * 2)
        }
        break
      case 6:
        return "tagged values are not accepted"
      default:
        // Major type 7: 20..23 are false, true, null, undefined; 25..27 are floats; other simple values are refused.
        if (info < 20 || info === 24) return "simple values other than false, true, null and undefined are not accepted"
        if (info >= 25) cost += HEAP_NUMBER
    }
    if (cost > MAX_DECODED_COST) return `decodes to more than ${MAX_DECODED_COST} bytes of values`
  }
  if (pos !== end) return "bytes after the end of the CBOR item"
  return undefined
}

/** The value of one CBOR document of the accepted profile, or why it is refused. */
export const decode = (bytes: Uint8Array): Either.Either<unknown, string> => {
  const invalid = validate(bytes)
  if (invalid !== undefined) return Either.left(invalid)
  try {
    return Either.right(cbor().decoder.decode(bytes))
  } catch (error) {
    // What the scan lets through and cbor-x still refuses: a map key that is an array or a map.
    return Either.left(error instanceof Error ? error.message : "not CBOR")
  }
}

// Recursion bounded by `max`: at most `max + 1` frames deep, whatever the value (a cycle included).
const deeper = (item: object, level: number, max: number): boolean => {
  if (Array.isArray(item)) {
    if (item.length === 0) return false
    if (level > max) return true
    for (let i = 0; i < item.length; i++) {
      const child: unknown = item[i]
      if (typeof child === "object" && child !== null && deeper(child, level + 1, max)) return true
    }
    return false
  }
  if (ArrayBuffer.isView(item) || item instanceof ArrayBuffer) return false
  if (item instanceof Map) {
    if (item.size === 0) return false
    if (level > max) return true
    for (const [key, child] of item) {
      if (typeof key === "object" && key !== null && deeper(key, level + 1, max)) return true
      if (typeof child === "object" && child !== null && deeper(child, level + 1, max)) return true
    }
    return false
  }
  for (const key in item) {
    if (level > max) return true
    const child: unknown = (item as Record<string, unknown>)[key]
    if (typeof child === "object" && child !== null && deeper(child, level + 1, max)) return true
  }
  return false
}

/**
 * Whether `value` nests non-empty arrays, maps or objects more than `max`
 * levels deep, the rule `validate` applies to a received document (the value
 * itself is level 1; byte strings are not containers). It stops at the first
 * level past `max`, so it runs in bounded stack on any input, a cyclic value
 * included (which is too deep).
 */
export const tooDeep = (value: unknown, max: number = MAX_DEPTH): boolean =>
  typeof value === "object" && value !== null && deeper(value, 1, max)

/**
 * Shortest-form CBOR for a JSON-like value (plus `Uint8Array` as bytes, bigint
 * within 64 bits, `undefined`, `Map`), or why it cannot be sent: a value
 * cbor-x cannot encode, or one it can only encode as a tagged item (a `Date`,
 * a `Set`, another typed array, a wider bigint) that peers would refuse, or
 * one nested deeper than `MAX_DEPTH` (checked first, without recursion).
 * Integral numbers from 2^32 up are written as floats by cbor-x; pass a
 * bigint to get a CBOR integer.
 */
export const encode = (value: unknown): Either.Either<Uint8Array, string> => {
  // cbor-x encodes recursively: a value nested some thousands deep would overflow the stack.
  if (tooDeep(value)) return Either.left(`nesting deeper than ${MAX_DEPTH}`)
  let bytes: Uint8Array
  try {
    bytes = cbor().encoder.encode(value)
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : "not encodable")
  }
  const invalid = validate(bytes)
  return invalid === undefined ? Either.right(bytes) : Either.left(invalid)
}
