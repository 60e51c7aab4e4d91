/**
 * A client's side of callbacks: `callback.answer`, and providers that
 * serve `callback.open`s to a handler, registering again on each new
 * connection.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Messages from "../../protocol/Messages.js"
import type { CallbackKind } from "../../schema/Callback.js"
import type { InvalidCallbackAnswer } from "../../schema/Errors.js"
import type { SessionId } from "../../schema/Ids.js"
import * as CallbackOffer from "../CallbackOffer.js"
import * as ForwardCompatible from "../ForwardCompatible.js"
import type { AnswerOptions, Handler } from "./Api.js"
import { jsonTooDeep, read } from "./Codec.js"
import { type SessionClientError, UnexpectedAnswer, unexpected } from "./Errors.js"
import { isClosed, type Link, type Source } from "./Link.js"
import { call } from "./Requests.js"
import { openStream } from "./Streams.js"

const { Type } = Messages

/** `callback.answer`; not repeated after a drop, since it may have taken effect. */
export const answerCallback = (source: Source, sessionId: SessionId, answer: AnswerOptions) =>
  Effect.andThen(jsonTooDeep("callback.answer result", [answer.result]), () => Effect.asVoid(call(
    source,
    Type.callbackAnswer,
    Messages.CallbackAnswer,
    { sessionId, ...answer },
    Type.callbackAccepted,
    Messages.Empty,
    false
  )))

/** Serves callbacks over one connection until the server ends the exchange. */
const provideOnce = <E, K extends CallbackKind>(
  source: Source,
  link: Link,
  sessionId: SessionId,
  kinds: ReadonlyArray<K>,
  handler: Handler<E, K>
): Effect.Effect<void, CallbackOffer.HandlerFailure<E | InvalidCallbackAnswer> | SessionClientError> =>
  Effect.scoped(Effect.gen(function*() {
    const { pull } = yield* openStream(
      link.connection,
      Type.callbackProvide,
      Messages.CallbackProvide,
      { sessionId, kinds },
      Type.callbackProvideCancel
    )
    for (;;) {
      const next = yield* pull
      if (Option.isNone(next)) return
      const body = yield* read(Type.callbackProvide, next.value)
      if (body.t === Type.callbackProvideEnd) return
      if (body.t !== Type.callbackOpen) {
        return yield* new UnexpectedAnswer({ request: Type.callbackProvide, reason: `got ${body.t}` })
      }
      const callback = yield* Either.mapLeft(
        ForwardCompatible.decodeCallbackOpen(body.payload),
        (error) => unexpected(Type.callbackProvide, body.t, error)
      )
      yield* CallbackOffer.serve(callback, handler, (id, answer) => answerCallback(source, id, answer))
    }
  }))

/** Serves callbacks until interrupted, registering again on each new connection. */
export const provideCallbacks = <E, K extends CallbackKind>(
  source: Source,
  sessionId: SessionId,
  kinds: ReadonlyArray<K>,
  handler: Handler<E, K>
) => {
  // After a drop the provider registers again; the server offers it the callbacks still open.
  const serve = (link: Link): Effect.Effect<void, CallbackOffer.HandlerFailure<E | InvalidCallbackAnswer> | SessionClientError> =>
    provideOnce(source, link, sessionId, kinds, handler).pipe(
      Effect.catchIf(isClosed, (error) => Effect.flatMap(source.renew(link, error), serve))
    )
  return Effect.flatMap(source.live, serve).pipe(
    Effect.catchAll((error): Effect.Effect<never, E | InvalidCallbackAnswer | SessionClientError> =>
      Effect.fail(error instanceof CallbackOffer.HandlerFailure ? error.error as E | InvalidCallbackAnswer : error as SessionClientError)
    )
  )
}
