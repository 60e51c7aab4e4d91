/**
 * The frames a connection writes itself: messages and their `core.error`
 * fallbacks, bounded whatever the peer sent, and the bodies that never
 * change, encoded once.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Envelope from "../../protocol/Envelope.js"
import * as Frame from "../../protocol/Frame.js"
import * as Handshake from "../../protocol/Handshake.js"
import * as Messages from "../../protocol/Messages.js"
import * as ProtocolError from "../../protocol/ProtocolError.js"
import type { WireError } from "../Router.js"

/** The body of `core.pong`, encoded once. */
export const PONG_BODY = Envelope.encodeBodyUnsafe(Messages.Type.pong, {})

/** The `core.shutdown` frame on id 0, encoded once. */
export const SHUTDOWN_FRAME = Frame.encodeUnsafe({
  id: 0,
  flags: Frame.FLAG_SHUTDOWN,
  body: Envelope.encodeBodyUnsafe(Messages.Type.shutdown, null)
})

/** The frame bytes of a message, or why it cannot be sent. */
export const encodeMessage = (id: number, flags: number, type: string, payload: unknown): Either.Either<Uint8Array, string> => {
  const body = Envelope.encodeBody(type, payload)
  if (Either.isLeft(body)) return Either.left(body.left.reason)
  return Either.mapLeft(Frame.encode({ id, flags, body: body.right }), (error) => error.message)
}

/**
 * The bytes of a `core.error` frame (always TERMINAL). Its `message` and
 * `offending_type` are cut to `ProtocolError.MAX_ECHO_BYTES`, so whatever a
 * peer sent, the frame is small; `details` that cannot be encoded are left out.
 */
export const errorFrame = (id: number, unbounded: ProtocolError.ErrorPayload): Uint8Array => {
  const payload = ProtocolError.bounded(unbounded)
  const bytes = encodeMessage(id, Frame.FLAG_TERMINAL, Messages.Type.error, payload)
  if (Either.isRight(bytes)) return bytes.right
  const { details: _details, ...rest } = payload
  return Frame.encodeUnsafe({
    id,
    flags: Frame.FLAG_TERMINAL,
    body: Envelope.encodeBodyUnsafe(Messages.Type.error, rest)
  })
}

/** The `core.error` payload of a handler's `WireError`, naming `type` where the kind is about it. */
export const wirePayload = (error: WireError, type: string): ProtocolError.ErrorPayload => ({
  kind: error.kind,
  message: error.message,
  ...(error.kind === "invalid_payload" || error.kind === "unsupported_message_type" ? { offending_type: type } : {}),
  ...(error.retryable === undefined ? {} : { retryable: error.retryable }),
  ...(error.details === undefined ? {} : { details: error.details })
})

/** What a peer is told of a defect: nothing more than that it happened. */
export const internalPayload: ProtocolError.ErrorPayload = { kind: "internal", message: "internal error" }

/** The handshake's bytes: the id-range preamble, then `core.ready`. */
export const handshakeBytes = (range: Handshake.IdRange, ready: Handshake.Ready): Uint8Array =>
  Buffer.concat([Handshake.encodePreamble(range), Frame.encodeUnsafe(Handshake.readyFrame(ready))])
