/**
 * A client's event streams (`session.events`): read a chunk at a time,
 * resumed from the server's cursor after a `slow_consumer` end, and from the
 * last durable cursor on a new connection after a drop.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import * as Messages from "../../protocol/Messages.js"
import type { SessionId } from "../../schema/Ids.js"
import type * as AgentClient from "../AgentClient.js"
import * as ForwardCompatible from "../ForwardCompatible.js"
import * as LazyStream from "../LazyStream.js"
import type { EventFrame, EventOptions } from "./Api.js"
import { readEither } from "./Codec.js"
import { type SessionClientError, UnexpectedAnswer, unexpected } from "./Errors.js"
import { isClosed, type Source } from "./Link.js"
import { openStream } from "./Streams.js"

const { Type } = Messages

/** Why an event subscription must start again: the server ended it as a slow consumer, or its connection dropped. */
class Resume {
  constructor(
    readonly why:
      | { readonly _tag: "slow_consumer"; readonly cursor: number }
      | { readonly _tag: "dropped"; readonly error: AgentClient.Closed }
  ) {}
}

// By the forward-compatibility rule: an event of a newer daemon is passed through, not a failure.
const { decodeEventFrame } = ForwardCompatible
const decodeEventsEnd = Schema.decodeUnknownEither(Messages.SessionEventsEnd)

/**
 * One `session.events` exchange on `connection`: its events, a chunk at a
 * time (events arrive by the thousand on a replay). It ends after
 * `session.events.end`; a `slow_consumer` end, or the connection dropping,
 * fails it with a `Resume` the caller acts on.
 */
const subscription = (
  connection: AgentClient.Connection,
  request: typeof Messages.SessionEvents.Type
): Stream.Stream<EventFrame, SessionClientError | Resume> =>
  LazyStream.get().unwrapScoped(Effect.gen(function*() {
    const stream = yield* openStream(connection, Type.sessionEvents, Messages.SessionEvents, request, Type.sessionEventsCancel)
    let ended: Resume | "done" | undefined
    const fail = (error: SessionClientError | Resume) => Effect.fail(Option.some(error))
    const next = Effect.suspend((): Effect.Effect<Chunk.Chunk<EventFrame>, Option.Option<SessionClientError | Resume>> => {
      if (ended === "done") return Effect.fail(Option.none())
      if (ended !== undefined) return fail(ended)
      return stream.pullChunk.pipe(
        // Frames already received come first: the buffer is drained before the drop is reported.
        Effect.mapError((error) => Option.some(isClosed(error) ? new Resume({ _tag: "dropped", error }) : error)),
        Effect.flatMap((frames) => {
          if (Chunk.isEmpty(frames)) return Effect.fail(Option.none())
          const events: Array<EventFrame> = []
          for (const frame of frames) {
            const body = readEither(Type.sessionEvents, frame)
            if (Either.isLeft(body)) return fail(body.left)
            if (body.right.t === Type.sessionEvent) {
              const event = decodeEventFrame(body.right.payload)
              if (Either.isLeft(event)) return fail(unexpected(Type.sessionEvents, body.right.t, event.left))
              events.push(event.right)
              continue
            }
            if (body.right.t !== Type.sessionEventsEnd) {
              return fail(new UnexpectedAnswer({ request: Type.sessionEvents, reason: `got ${body.right.t}` }))
            }
            const end = decodeEventsEnd(body.right.payload)
            if (Either.isLeft(end)) return fail(unexpected(Type.sessionEvents, body.right.t, end.left))
            ended = end.right.reason === "slow_consumer" ? new Resume({ _tag: "slow_consumer", cursor: end.right.cursor }) : "done"
            break
          }
          return Effect.succeed(Chunk.unsafeFromArray(events))
        })
      )
    })
    return LazyStream.get().repeatEffectChunkOption(next)
  }))

/** The session's events from `options.after`, subscribing again after a `slow_consumer` end or a drop. */
export const events = (
  source: Source,
  sessionId: SessionId,
  options: EventOptions = {}
): Stream.Stream<EventFrame, SessionClientError> => {
  // Loaded by the connection the source's links come from (`LazyStream`).
  const S = LazyStream.get()
  return S.suspend(() => {
    // The cursor of the last durable event handed on: where a new subscription starts.
    let last = options.after
    const from = (after: number | undefined): Stream.Stream<EventFrame, SessionClientError> =>
      S.unwrap(Effect.map(source.live, (link) =>
        subscription(link.connection, { sessionId, after, volatile: options.volatile, follow: options.follow }).pipe(
          S.mapChunks((chunk) => {
            for (const frame of chunk) if (frame.cursor !== undefined) last = frame.cursor
            return chunk
          }),
          S.catchAll((error): Stream.Stream<EventFrame, SessionClientError> => {
            if (!(error instanceof Resume)) return S.fail(error)
            const why = error.why
            // Told once the new subscription is about to start: the deltas of the gap are gone.
            const again = (after: number | undefined) =>
              S.suspend(() => {
                options.onResume?.()
                return from(after)
              })
            return why._tag === "slow_consumer"
              ? again(why.cursor)
              : S.unwrap(Effect.as(source.renew(link, why.error), S.suspend(() => again(last))))
          })
        )))
    return from(options.after)
  })
}
