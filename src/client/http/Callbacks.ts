/**
 * A callback provider over HTTP (`GET /v1/sessions/{id}/callbacks/stream`,
 * HTTP.md): each `event: callback` (the callbacks already open in the
 * session's subtree, then those opened later) goes to the handler, and a
 * `Some` result is sent to the `answer` endpoint, as the socket client's
 * `provideCallbacks` does. An answer someone else beat (`stale_callback`,
 * `session_closed`) is dropped; a callback this client cannot read
 * (`ForwardCompatible.Unknown`) is left open for one that can. After a drop
 * or a drain the provider registers again, as the reconnect schedule allows;
 * the server offers what is still open again, so nothing is lost.
 *
 * @since 0.3.0
 */
import { type HttpClient, HttpClientRequest } from "@effect/platform"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import type * as Schedule from "effect/Schedule"
import { Callbacks } from "../../http/Api.js"
import type { CallbackKind } from "../../schema/Callback.js"
import type { InvalidCallbackAnswer } from "../../schema/Errors.js"
import type { SessionId } from "../../schema/Ids.js"
import * as CallbackOffer from "../CallbackOffer.js"
import * as ForwardCompatible from "../ForwardCompatible.js"
import type { AnswerOptions, Handler } from "../session/Api.js"
import { UnexpectedAnswer } from "../session/Errors.js"
import type { HttpSessionClientError } from "./Errors.js"
import { type Dropped, endOf, notFinal, open, retrying } from "./EventStream.js"

const streamPath = Callbacks.endpoints.stream!.path

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Serves the callbacks of `kinds` in `sessionId`'s subtree with `handler` until interrupted or the server ends it. */
export const provide = <E, K extends CallbackKind>(
  http: HttpClient.HttpClient,
  address: string,
  sessionId: SessionId,
  kinds: ReadonlyArray<K>,
  handler: Handler<E, K>,
  answer: (sessionId: SessionId, answer: AnswerOptions) => Effect.Effect<void, HttpSessionClientError>,
  reconnect: Schedule.Schedule<unknown> | undefined
): Effect.Effect<void, E | InvalidCallbackAnswer | HttpSessionClientError> => {
  /** One callback offered: handled, and answered when the handler says so. */
  const serve = (data: string): Effect.Effect<void, CallbackOffer.HandlerFailure<E | InvalidCallbackAnswer> | HttpSessionClientError> =>
    Effect.gen(function*() {
      const callback = ForwardCompatible.decodeCallbackOpen(parseJson(data))
      if (Either.isLeft(callback)) {
        return yield* new UnexpectedAnswer({ request: "callbacks/stream", reason: `callback: ${callback.left.message}` })
      }
      yield* CallbackOffer.serve(callback.right, handler, answer)
    })

  const request = HttpClientRequest.get(streamPath.replace(":id", encodeURIComponent(sessionId))).pipe(
    HttpClientRequest.setUrlParams({ kinds: kinds.join(",") })
  )
  const once = Stream.suspend(() => {
    let resume: boolean | undefined
    const served = open(http, address, "callbacks/stream", request).pipe(
      Stream.takeUntil((event) => event.event === "end"),
      Stream.mapEffect((event): Effect.Effect<void, CallbackOffer.HandlerFailure<E | InvalidCallbackAnswer> | HttpSessionClientError | Dropped> => {
        if (event.event === "end") return Effect.sync(() => void (resume = endOf(event).resume))
        return event.event === "callback" ? serve(event.data) : Effect.void
      })
    )
    return Stream.concat(served, Stream.suspend(() => (resume === false ? Stream.empty : Stream.fail(notFinal(resume)))))
  })
  return Stream.runDrain(retrying(once, reconnect)).pipe(
    Effect.mapError((error): E | InvalidCallbackAnswer | HttpSessionClientError =>
      error instanceof CallbackOffer.HandlerFailure ? error.error as E | InvalidCallbackAnswer : error as HttpSessionClientError
    )
  )
}
