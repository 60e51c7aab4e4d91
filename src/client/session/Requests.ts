/**
 * Requests of a client: one message, one answer, sent again on a new
 * connection after a drop when that is harmless.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as Messages from "../../protocol/Messages.js"
import type { SessionClientError } from "./Errors.js"
import { answerAs, bodyOf } from "./Codec.js"
import { isClosed, type Source } from "./Link.js"

const { Type } = Messages

/**
 * One request. A `repeatable` one (reading, setting a value, or carrying an
 * idempotency key) that fails because the connection dropped is sent once
 * more on a new connection; any other fails with `Closed`, since it may or
 * may not have taken effect.
 */
export const call = <A, I, B, J>(
  source: Source,
  type: string,
  schema: Schema.Schema<A, I>,
  value: A,
  answerType: string,
  answer: Schema.Schema<B, J>,
  repeatable = true
): Effect.Effect<B, SessionClientError> =>
  bodyOf(type, schema, value).pipe(
    Effect.flatMap((body) =>
      Effect.flatMap(source.live, (link) =>
        repeatable
          ? link.connection.request(0, body).pipe(
            Effect.catchIf(isClosed, (error) =>
              Effect.flatMap(source.renew(link, error), (renewed) => renewed.connection.request(0, body)))
          )
          : link.connection.request(0, body))
    ),
    Effect.flatMap(answerAs(type, answerType, answer))
  )

/** A request answered with a session's summary: the session. */
export const summary = <A, I>(source: Source, type: string, schema: Schema.Schema<A, I>, value: A, repeatable = true) =>
  Effect.map(
    call(source, type, schema, value, Type.sessionSummary, Messages.SessionSummary, repeatable),
    (answer) => answer.session
  )
