/**
 * Errors of the wire codec (framing, envelope, handshake, daemon naming) and
 * the `core.error` payload they are answered with.
 *
 * They live here rather than in `schema/Errors.ts` because they describe bytes
 * on the wire, not domain failures; a server maps them to `core.error` with
 * `kindOf` / `toErrorPayload`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** A frame's declared length exceeds the maximum: the stream cannot be resynchronised. */
export class FrameTooLarge extends Schema.TaggedError<FrameTooLarge>()("FrameTooLarge", {
  /** The declared `len` (5 + body length). */
  length: Schema.Number,
  max: Schema.Number
}) {
  override get message() {
    return `frame length ${this.length} exceeds the maximum of ${this.max} bytes`
  }
}

/** A frame's declared length is below the 5 bytes of id and flags: the stream cannot be resynchronised. */
export class FrameTooShort extends Schema.TaggedError<FrameTooShort>()("FrameTooShort", {
  /** The declared `len`. */
  length: Schema.Number
}) {
  override get message() {
    return `frame length ${this.length} is below the minimum of 5 bytes`
  }
}

/** A frame uses flag bits the protocol does not define. */
export class InvalidFlags extends Schema.TaggedError<InvalidFlags>()("InvalidFlags", {
  flags: Schema.Number
}) {
  override get message() {
    return `invalid frame flags 0x${this.flags.toString(16)}`
  }
}

/** A correlation id that is not a u32, or is outside the range a client was given. */
export class InvalidId extends Schema.TaggedError<InvalidId>()("InvalidId", {
  id: Schema.Number
}) {
  override get message() {
    return `invalid correlation id ${this.id}`
  }
}

/** A body that is not the `{ v, t, p }` CBOR envelope, or whose payload is not CBOR the codec accepts. */
export class MalformedMessage extends Schema.TaggedError<MalformedMessage>()("MalformedMessage", {
  reason: Schema.String,
  /** The message type, when the envelope was readable far enough to know it. */
  type: Schema.optional(Schema.String)
}) {
  override get message() {
    return `malformed message${this.type === undefined ? "" : ` (${this.type})`}: ${this.reason}`
  }
}

/** An envelope of another protocol generation than the one spoken here. */
export class UnsupportedGeneration extends Schema.TaggedError<UnsupportedGeneration>()("UnsupportedGeneration", {
  generation: Schema.Number
}) {
  override get message() {
    return `unsupported protocol generation ${this.generation}`
  }
}

/** A well-formed payload of the wrong shape for its message type (or one that cannot be encoded). */
export class InvalidPayload extends Schema.TaggedError<InvalidPayload>()("InvalidPayload", {
  type: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `invalid ${this.type} payload: ${this.reason}`
  }
}

/** A daemon name that is not 1 to 128 bytes of well-formed UTF-8. */
export class InvalidName extends Schema.TaggedError<InvalidName>()("InvalidName", {
  /** The first 32 characters of the name: enough to recognise it, never a huge string. */
  name: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `invalid daemon name ${JSON.stringify(this.name)}: ${this.reason}`
  }
}

/** Fatal framing errors: after one the byte stream cannot be trusted and the connection is closed. */
export type FramingError = FrameTooLarge | FrameTooShort

/** Every error the codec produces for bytes received or about to be sent. */
export type CodecError =
  | FrameTooLarge
  | FrameTooShort
  | InvalidFlags
  | InvalidId
  | MalformedMessage
  | UnsupportedGeneration
  | InvalidPayload

/** The `kind` of a `core.error` payload, as listed in PROTOCOL.md. */
export const ErrorKind = Schema.Literal(
  "malformed_message",
  "unsupported_message_type",
  "unsupported_protocol_generation",
  "invalid_flags",
  "invalid_payload",
  "invalid_id",
  "unauthenticated",
  "forbidden",
  "not_found",
  "conflict",
  "stale_callback",
  "turn_mismatch",
  "session_closed",
  "busy",
  "internal"
)
/** @since 0.1.0 */
export type ErrorKind = typeof ErrorKind.Type

/** The `core.error` payload. Field names are the wire's (snake_case), shared with non-TypeScript peers. */
export const ErrorPayload = Schema.Struct({
  kind: ErrorKind,
  message: Schema.String,
  offending_type: Schema.optional(Schema.String),
  retryable: Schema.optional(Schema.Boolean),
  details: Schema.optional(Schema.Unknown)
})
/** @since 0.1.0 */
export type ErrorPayload = typeof ErrorPayload.Type

/** The `core.error` kind a codec error is answered with. */
export const kindOf = (error: CodecError): ErrorKind => {
  switch (error._tag) {
    // A framing error is answered on id 0 as malformed before the connection closes: the peer sent bytes
    // that are not frames, and there is no dedicated kind for it.
    case "FrameTooLarge":
    case "FrameTooShort":
    case "MalformedMessage":
      return "malformed_message"
    case "UnsupportedGeneration":
      return "unsupported_protocol_generation"
    case "InvalidFlags":
      return "invalid_flags"
    case "InvalidId":
      return "invalid_id"
    case "InvalidPayload":
      return "invalid_payload"
  }
}

/** Whether the connection must be closed after answering: framing errors lose the frame boundaries. */
export const isFatal = (error: CodecError): error is FramingError =>
  error._tag === "FrameTooLarge" || error._tag === "FrameTooShort"

/** The `core.error` payload for a codec error. Its message holds only lengths, flags and reasons, never payload data. */
export const toErrorPayload = (error: CodecError): ErrorPayload => {
  const offendingType = error._tag === "MalformedMessage" || error._tag === "InvalidPayload" ? error.type : undefined
  return offendingType === undefined
    ? { kind: kindOf(error), message: error.message }
    : { kind: kindOf(error), message: error.message, offending_type: offendingType }
}

/** The most UTF-8 bytes of a `core.error`'s `message` and of its `offending_type`: no error echoes more of a peer's input. */
export const MAX_ECHO_BYTES = 128

const ELLIPSIS = "…"
const ELLIPSIS_BYTES = 3

/**
 * `text` if it takes at most `maxBytes` of UTF-8, else its longest prefix that
 * fits with a trailing "…", cut between characters (never inside a surrogate
 * pair). Reads only as much of `text` as it keeps, so a 3 MiB string costs
 * what 128 bytes do.
 */
export const truncateUtf8 = (text: string, maxBytes: number = MAX_ECHO_BYTES): string => {
  // At most 3 bytes per UTF-16 unit: short strings fit without counting.
  if (text.length * 3 <= maxBytes) return text
  let bytes = 0
  let cut = -1
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    const pair = unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length &&
      (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    const size = pair ? 4 : unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3
    if (cut < 0 && bytes + size > maxBytes - ELLIPSIS_BYTES) cut = i
    bytes += size
    if (bytes > maxBytes) return `${text.slice(0, cut)}${ELLIPSIS}`
    if (pair) i++
  }
  return text
}

/** `payload` with its `message` and `offending_type` cut to `MAX_ECHO_BYTES` each. */
export const bounded = (payload: ErrorPayload): ErrorPayload => {
  const message = truncateUtf8(payload.message)
  const offending = payload.offending_type === undefined ? undefined : truncateUtf8(payload.offending_type)
  if (message === payload.message && offending === payload.offending_type) return payload
  return offending === undefined ? { ...payload, message } : { ...payload, message, offending_type: offending }
}
