/**
 * A session's events over HTTP (`GET /v1/sessions/{id}/events`, HTTP.md
 * "Event streams") as a `Stream` of the same frames the socket client
 * gives: the Server-Sent Events read with `Sse.Parser`, each `data` read by
 * the forward-compatibility rule (`ForwardCompatible.decodeEventFrame`: a
 * record or event kind this client does not know is an `Unknown` frame, an
 * unknown field is ignored).
 *
 * The stream resumes by itself. When the connection drops before the
 * server's `event: end`, or the server ends it `slow_consumer` or
 * `shutdown`, it asks again with `Last-Event-ID` = the last durable cursor
 * it delivered, as the reconnect schedule allows: the server replays from
 * there, so no event is missed, and one at or before that cursor (were a
 * server to send it) is dropped, so none is delivered twice. It ends on
 * `replayed` (`follow: false`) and `closed`.
 *
 * @since 0.3.0
 */
import { type HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { Events } from "../../http/Api.js"
import * as Problem from "../../http/Problem.js"
import * as Sse from "../../http/Sse.js"
import type { SessionId } from "../../schema/Ids.js"
import { Closed } from "../AgentClient.js"
import * as ForwardCompatible from "../ForwardCompatible.js"
import type { EventFrame, EventOptions } from "../session/Api.js"
import { UnexpectedAnswer } from "../session/Errors.js"
import { fromProblem, type HttpSessionClientError, toClientError } from "./Errors.js"

/** A failure after which the stream is asked for again (a drop, a drain, a slow consumer); `error` if it may not be. */
export class Dropped {
  readonly _tag = "Dropped"
  constructor(readonly error: HttpSessionClientError) {}
}

/** Any problem answer, by its status. */
export const ProblemAnswer = Schema.Union(...Problem.all)

const decodeProblem = Schema.decodeUnknownEither(ProblemAnswer)

const eventsPath = Events.endpoints.events!.path

/** What a problem answer to a stream request fails with: a draining daemon (503) is worth another try. */
export const problemAnswer = (
  address: string,
  request: string,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<never, HttpSessionClientError> =>
  Effect.flatMap(
    Effect.mapError(response.json, toClientError(address, request)),
    (body) => {
      const problem = decodeProblem(body)
      return Effect.fail<HttpSessionClientError>(
        Either.isLeft(problem)
          ? new UnexpectedAnswer({ request, reason: `status ${response.status}: not a problem answer` })
          : fromProblem(problem.right)
      )
    }
  )

/** The data of an `event: end`. */
const EndData = Schema.Struct({ reason: Schema.String, cursor: Schema.Number })
const decodeEnd = Schema.decodeUnknownEither(Schema.parseJson(EndData))

const parseJson = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text))
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : String(error))
  }
}

/** A frame to deliver, the end of the stream (and whether to resume after it), or nothing (a control event of a newer server). */
type Step =
  | { readonly _tag: "frame"; readonly frame: EventFrame }
  | { readonly _tag: "end"; readonly resume: boolean }
  | { readonly _tag: "skip" }

const skip: Step = { _tag: "skip" }

/** One SSE event as a step. */
const stepOf = (event: Sse.Event): Either.Either<Step, HttpSessionClientError> => {
  // slow_consumer: it could not keep up; shutdown: the daemon drains (another may take over the store).
  if (event.event === "end") return Either.right({ _tag: "end", resume: endOf(event).resume })
  const data = parseJson(event.data)
  if (Either.isLeft(data)) return Either.left(new UnexpectedAnswer({ request: "events", reason: `event ${event.event}: ${data.left}` }))
  if (event.event === "error") {
    const problem = decodeProblem(data.right)
    return Either.left(Either.isRight(problem) ? fromProblem(problem.right) : new UnexpectedAnswer({ request: "events", reason: "an error event that is not a problem" }))
  }
  // A newer server's control event (no event in its data) is not for this client.
  if (typeof data.right !== "object" || data.right === null || !("event" in data.right)) return Either.right(skip)
  const frame = ForwardCompatible.decodeEventFrame(data.right)
  return Either.isRight(frame)
    ? Either.right({ _tag: "frame", frame: frame.right })
    : Either.left(new UnexpectedAnswer({ request: "events", reason: `event ${event.event}: ${frame.left.message}` }))
}

/**
 * One Server-Sent Events request: its events, failing `Dropped` (worth
 * another request) when the daemon cannot be reached, is draining (503) or
 * cuts the answer off; another problem answer fails with its `ServerError`.
 */
export const open = (
  http: HttpClient.HttpClient,
  address: string,
  name: string,
  request: HttpClientRequest.HttpClientRequest
): Stream.Stream<Sse.Event, HttpSessionClientError | Dropped> =>
  Stream.unwrap(Effect.gen(function*() {
    const toError = toClientError(address, name)
    const response = yield* http.execute(HttpClientRequest.setHeader(request, "accept", "text/event-stream")).pipe(
      Effect.mapError((error): HttpSessionClientError | Dropped => {
        const failure = toError(error)
        return failure._tag === "ConnectError" ? new Dropped(failure) : failure
      })
    )
    if (response.status !== 200) {
      return yield* problemAnswer(address, name, response).pipe(
        Effect.mapError((error): HttpSessionClientError | Dropped =>
          error._tag === "ServerError" && response.status === 503 ? new Dropped(error) : error
        )
      )
    }
    // One parser per answer: a reconnect starts clean, whatever partial event the drop left behind.
    const parser = new Sse.Parser()
    return response.stream.pipe(
      Stream.decodeText(),
      Stream.mapConcat((text) => parser.push(text)),
      Stream.mapError((error): HttpSessionClientError | Dropped => new Dropped(toError(error)))
    )
  }))

/** The reason of an `event: end`, and whether to ask again after it (`slow_consumer`, `shutdown`). */
export const endOf = (event: Sse.Event): { readonly reason: string; readonly resume: boolean } => {
  const end = decodeEnd(event.data)
  const reason = Either.isRight(end) ? end.right.reason : "closed"
  return { reason, resume: reason === "slow_consumer" || reason === "shutdown" }
}

/** The failure after a stream that ended without its final `end` (`ended` undefined) or with one to resume after. */
export const notFinal = (ended: boolean | undefined) =>
  new Dropped(new Closed({ reason: ended === undefined ? "the stream was cut off" : "the server ended the stream; resuming" }))

/** `stream`, asked for again after each `Dropped` as `reconnect` allows (`undefined`: never); the last drop's error at the end. */
export const retrying = <A, E>(
  stream: Stream.Stream<A, E | Dropped>,
  reconnect: Schedule.Schedule<unknown> | undefined
): Stream.Stream<A, E | HttpSessionClientError> => {
  const retried = reconnect === undefined
    ? stream
    : Stream.retry(stream, Schedule.intersect(Schedule.recurWhile((error: E | Dropped) => error instanceof Dropped), reconnect))
  return Stream.mapError(retried, (error): E | HttpSessionClientError => (error instanceof Dropped ? error.error : error as E))
}

/**
 * The events of `sessionId` from `http` (a client with the daemon's base URL
 * and token), resumed after each drop as `reconnect` allows (`undefined`:
 * never).
 */
export const events = (
  http: HttpClient.HttpClient,
  address: string,
  sessionId: SessionId,
  options: EventOptions,
  reconnect: Schedule.Schedule<unknown> | undefined
): Stream.Stream<EventFrame, HttpSessionClientError> =>
  Stream.suspend(() => {
    let last = options.after ?? 0
    let resuming = false

    /** One request: its frames, then a failure `Dropped` unless the server ended it for good. */
    const once = Stream.suspend(() => {
      let request = HttpClientRequest.get(eventsPath.replace(":id", encodeURIComponent(sessionId))).pipe(
        HttpClientRequest.setUrlParams({
          after: String(last),
          volatile: String(options.volatile ?? false),
          follow: String(options.follow ?? true)
        })
      )
      // What a reconnecting EventSource sends: it wins over `after` on the server.
      if (resuming) {
        request = HttpClientRequest.setHeader(request, "last-event-id", String(last))
        options.onResume?.()
      }
      resuming = true
      let resume: boolean | undefined
      const frames = open(http, address, "events", request).pipe(
        Stream.mapEffect((event) => stepOf(event)),
        Stream.takeUntil((step) => step._tag === "end"),
        Stream.filterMap((step) => {
          if (step._tag === "end") resume = step.resume
          if (step._tag !== "frame") return Option.none()
          const cursor = step.frame.cursor
          if (cursor !== undefined) {
            if (cursor <= last) return Option.none()
            last = cursor
          }
          return Option.some(step.frame)
        })
      )
      return Stream.concat(frames, Stream.suspend(() => (resume === false ? Stream.empty : Stream.fail(notFinal(resume)))))
    })
    return retrying(once, reconnect)
  })
