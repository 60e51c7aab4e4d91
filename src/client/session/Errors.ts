/**
 * What a call of `SessionClient` fails with: the server's `core.error`
 * (`ServerError`, by kind), an answer this client cannot read
 * (`UnexpectedAnswer`), and the raw tier's and input errors.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type * as ParseResult from "effect/ParseResult"
import * as ProtocolError from "../../protocol/ProtocolError.js"
import type { InvalidInput } from "../../schema/Errors.js"
import type * as AgentClient from "../AgentClient.js"

/** The server answered with `core.error`. */
export class ServerError extends Schema.TaggedError<ServerError>()("ServerError", {
  kind: ProtocolError.ErrorKind,
  message: Schema.String,
  /** The message type the error is about, when the server named it. */
  offendingType: Schema.optional(Schema.String),
  retryable: Schema.optional(Schema.Boolean),
  /** Fields of the error, by kind: `{ activeTurnId }` for `busy`, `{ callbackId, reason }` for `stale_callback`, … */
  details: Schema.optional(Schema.Unknown)
}) {}

/** The server answered with something this client cannot read: another type, or a payload of the wrong shape. */
export class UnexpectedAnswer extends Schema.TaggedError<UnexpectedAnswer>()("UnexpectedAnswer", {
  /** The message type sent. */
  request: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `unexpected answer to ${this.request}: ${this.reason}`
  }
}

/** What a call of this client can fail with. */
export type SessionClientError = AgentClient.ClientError | ServerError | UnexpectedAnswer | InvalidInput

/** `UnexpectedAnswer` for a payload of `type`, on an exchange of `request`, that did not decode. */
export const unexpected = (request: string, type: string, error: ParseResult.ParseError) =>
  new UnexpectedAnswer({ request, reason: `${type}: ${error.message}` })
