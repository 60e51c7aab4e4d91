/**
 * Stream exchanges of a client (`session.events`, `callback.provide`):
 * opened on a connection in a scope, cancelled when the scope closes first.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import * as Envelope from "../../protocol/Envelope.js"
import * as Frame from "../../protocol/Frame.js"
import type * as AgentClient from "../AgentClient.js"
import { bodyOf } from "./Codec.js"

/**
 * Opens a stream exchange on `connection` in the current scope; `pull` gives
 * its next frame (`None` after the TERMINAL one), `pullChunk` every frame
 * buffered (empty after the TERMINAL one). When the scope closes
 * before the TERMINAL frame was pulled, `cancelType` is sent on its id. (A
 * TERMINAL frame that arrived but was not pulled frees the id early; ids are
 * handed out round the whole range, so it is not reused before the range wraps.)
 */
export const openStream = <A, I>(
  connection: AgentClient.Connection,
  type: string,
  schema: Schema.Schema<A, I>,
  value: A,
  cancelType: string
) =>
  Effect.gen(function*() {
    const body = yield* bodyOf(type, schema, value)
    let ended = false
    const stream = yield* Effect.acquireRelease(
      connection.stream(Frame.FLAG_SESSION_START, body),
      (stream) =>
        Effect.andThen(
          ended ? Effect.void : Effect.ignore(connection.send(stream.id, 0, Envelope.encodeBodyUnsafe(cancelType, {}))),
          stream.cancel
        )
    )
    return {
      pull: Effect.tap(stream.pull, (frame) => {
        if (Option.isSome(frame) && Frame.hasFlag(frame.value.flags, Frame.FLAG_TERMINAL)) ended = true
      }),
      pullChunk: Effect.tap(stream.pullChunk, (frames) => {
        const lastFrame = Chunk.last(frames)
        if (Option.isSome(lastFrame) && Frame.hasFlag(lastFrame.value.flags, Frame.FLAG_TERMINAL)) ended = true
      })
    }
  })
