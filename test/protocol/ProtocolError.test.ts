/**
 * Codec errors and the `core.error` payloads they are answered with.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as ProtocolError from "../../src/protocol/ProtocolError.js"

describe("ProtocolError", () => {
  it("maps every codec error to its core.error kind and says which close the connection", () => {
    const cases: Array<[ProtocolError.CodecError, ProtocolError.ErrorKind, boolean]> = [
      [new ProtocolError.FrameTooLarge({ length: 5_000_000, max: 4_194_304 }), "malformed_message", true],
      [new ProtocolError.FrameTooShort({ length: 3 }), "malformed_message", true],
      [new ProtocolError.MalformedMessage({ reason: "body: truncated CBOR" }), "malformed_message", false],
      [new ProtocolError.UnsupportedGeneration({ generation: 8 }), "unsupported_protocol_generation", false],
      [new ProtocolError.InvalidFlags({ flags: 8 }), "invalid_flags", false],
      [new ProtocolError.InvalidId({ id: 0 }), "invalid_id", false],
      [new ProtocolError.InvalidPayload({ type: "session.get", reason: "missing sessionId" }), "invalid_payload", false]
    ]
    for (const [error, kind, fatal] of cases) {
      assert.strictEqual(ProtocolError.kindOf(error), kind, error._tag)
      assert.strictEqual(ProtocolError.isFatal(error), fatal, error._tag)
      assert.isTrue(Schema.is(ProtocolError.ErrorKind)(kind))
    }
  })

  it("builds core.error payloads that satisfy the schema, with offending_type when the type is known", () => {
    const payload = ProtocolError.toErrorPayload(new ProtocolError.MalformedMessage({ reason: "payload: truncated CBOR", type: "session.get" }))
    assert.deepStrictEqual(payload, {
      kind: "malformed_message",
      message: "malformed message (session.get): payload: truncated CBOR",
      offending_type: "session.get"
    })
    assert.deepStrictEqual(ProtocolError.toErrorPayload(new ProtocolError.FrameTooShort({ length: 3 })), {
      kind: "malformed_message",
      message: "frame length 3 is below the minimum of 5 bytes"
    })
    assert.deepStrictEqual(ProtocolError.toErrorPayload(new ProtocolError.InvalidFlags({ flags: 0x18 })), {
      kind: "invalid_flags",
      message: "invalid frame flags 0x18"
    })
    assert.isTrue(Schema.is(ProtocolError.ErrorPayload)(payload))
  })

  it("lists exactly the kinds of PROTOCOL.md", () => {
    assert.deepStrictEqual(ProtocolError.ErrorKind.literals, [
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
    ])
  })
})
