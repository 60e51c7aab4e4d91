/**
 * A client's messages on the wire: a value to a frame body (bounded in
 * depth, like the server's reader), and a received frame to its body, its
 * `core.error` or its payload as a schema.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Cbor from "../../protocol/Cbor.js"
import * as Envelope from "../../protocol/Envelope.js"
import * as Messages from "../../protocol/Messages.js"
import * as ProtocolError from "../../protocol/ProtocolError.js"
import { InvalidInput } from "../../schema/Errors.js"
import * as AgentClient from "../AgentClient.js"
import { ServerError, UnexpectedAnswer } from "./Errors.js"

const { Type } = Messages

/** `InvalidInput` if a JSON value the caller gave nests deeper than the daemon takes (`Cbor.MAX_JSON_DEPTH`). */
export const jsonTooDeep = (what: string, values: ReadonlyArray<unknown>): Effect.Effect<void, InvalidInput> =>
  values.some((value) => Cbor.tooDeep(value, Cbor.MAX_JSON_DEPTH))
    ? Effect.fail(new InvalidInput({ what, reason: `nested deeper than ${Cbor.MAX_JSON_DEPTH} levels, the server's limit for JSON values` }))
    : Effect.void

/**
 * The body of a message; `InvalidInput` when the value nests deeper than the
 * server reads (`Cbor.MAX_DEPTH`, checked first, in bounded stack, so no input
 * can overflow it), `InvalidFrame` when it has no other wire form.
 */
export const bodyOf = <A, I>(
  type: string,
  schema: Schema.Schema<A, I>,
  value: A
): Effect.Effect<Uint8Array, AgentClient.InvalidFrame | InvalidInput> =>
  Cbor.tooDeep(value)
    ? Effect.fail(
      new InvalidInput({ what: `${type} payload`, reason: `nested deeper than ${Cbor.MAX_DEPTH} levels, the server's limit` })
    )
    : Schema.encode(schema)(value).pipe(
      Effect.mapError((error) => new AgentClient.InvalidFrame({ reason: `${type}: ${error.message}` })),
      Effect.flatMap((payload) =>
        Either.match(Envelope.encodeBody(type, payload), {
          onLeft: (error) => Effect.fail(new AgentClient.InvalidFrame({ reason: error.message })),
          onRight: Effect.succeed
        })
      )
    )

const decodeError = Schema.decodeUnknownEither(ProtocolError.ErrorPayload)

/** `read`, synchronously. */
export const readEither = (request: string, frame: AgentClient.RawFrame): Either.Either<Envelope.Body, ServerError | UnexpectedAnswer> => {
  const body = Envelope.decodeBody(frame.body)
  if (Either.isLeft(body)) return Either.left(new UnexpectedAnswer({ request, reason: body.left.message }))
  if (body.right.t !== Type.error) return Either.right(body.right)
  const error = decodeError(body.right.payload)
  if (Either.isLeft(error)) return Either.left(new UnexpectedAnswer({ request, reason: "a core.error of an unknown form" }))
  const { offending_type, ...fields } = error.right
  return Either.left(new ServerError({ ...fields, ...(offending_type === undefined ? {} : { offendingType: offending_type }) }))
}

/** The type and payload of a frame received on an exchange of `request`; `core.error` is a `ServerError`. */
export const read = (request: string, frame: AgentClient.RawFrame): Effect.Effect<Envelope.Body, ServerError | UnexpectedAnswer> =>
  Effect.suspend(() => readEither(request, frame))

/** A payload as `schema`, or `UnexpectedAnswer`. */
export const payloadAs = <A, I>(request: string, body: Envelope.Body, schema: Schema.Schema<A, I>) =>
  Schema.decodeUnknown(schema)(body.payload).pipe(
    Effect.mapError((error) => new UnexpectedAnswer({ request, reason: `${body.t}: ${error.message}` }))
  )

/** The answer of `type`, read with `schema`. */
export const answerAs = <A, I>(request: string, type: string, schema: Schema.Schema<A, I>) => (frame: AgentClient.RawFrame) =>
  Effect.flatMap(read(request, frame), (body) =>
    body.t === type
      ? payloadAs(request, body, schema)
      : Effect.fail(new UnexpectedAnswer({ request, reason: `expected ${type}, got ${body.t}` })))
