/**
 * The forward-compatibility rule of troupe's clients: a client keeps working
 * against a daemon newer than itself. What a newer daemon may send that an
 * older client cannot read is passed through, never a failure of the stream
 * or the call:
 *
 * - **Unknown fields** of any payload (events, records, summaries, callbacks)
 *   are ignored, as PROTOCOL.md asks of every payload decoder (the `Messages`
 *   schemas are structs and classes, which drop excess properties).
 * - **An event the client cannot read** — a record kind it has never seen
 *   (`tool_progress`), an event kind it has never seen (a new volatile
 *   delta), or a known kind in a shape it cannot read (a new `outcome`
 *   value, a new member of a nested union) — is an `Unknown` event: the kind,
 *   the cursor of a durable one (so a stream resumes past it) and the raw
 *   event as received. The stream goes on.
 * - **A callback the client cannot read** (`callback.open` on a provider
 *   stream) is `Unknown` too: the provider leaves it open, for a newer client
 *   or a manual answer, and goes on serving the others.
 *
 * Only what has no kind to report, or a broken envelope, fails (an event
 * that is not a map with a string `_tag` and a session id, a durable event
 * without its cursor and time): that is a broken peer, not a newer one. The rule works on decoded values, whatever the
 * transport: the socket client reads CBOR through it; a JSON client (HTTP,
 * SSE) reads the same values the same way. docs/protocol.md,
 * "Forward compatibility".
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type * as ParseResult from "effect/ParseResult"
import * as Messages from "../protocol/Messages.js"
import type { PendingCallback } from "../schema/Callback.js"
import type { SessionEvent } from "../schema/Event.js"
import { SessionId } from "../schema/Ids.js"
import * as CompiledDecoder from "./CompiledDecoder.js"

/**
 * An event (or callback) this client cannot read, passed through: `kind` is
 * the record's kind for a durable event, the event's kind for another, the
 * callback's kind for a callback; `cursor` is a durable event's cursor;
 * `raw` is the value exactly as received.
 */
export class Unknown extends Schema.TaggedClass<Unknown>("troupe/ForwardCompatible/Unknown")("unknown", {
  kind: Schema.String,
  cursor: Schema.optional(Schema.Number),
  raw: Schema.Unknown
}) {}

/** An event as a client sees it: one it can read, or an `Unknown` one. */
export type ClientEvent = SessionEvent | Unknown

/** One `session.event` frame as a client sees it; `cursor` is set for durable events (unknown ones too). */
export interface EventFrame {
  readonly cursor?: number | undefined
  readonly event: ClientEvent
}

/** A callback as a provider sees it: one it can read, or an `Unknown` one (left open). */
export type ClientCallback = PendingCallback | Unknown

const isMap = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const tagOf = (u: unknown): string | undefined =>
  isMap(u) && typeof u._tag === "string" && u._tag.length > 0 ? u._tag : undefined

// Compiled: a replay decodes events by the thousand (see CompiledDecoder for why this is the same decode).
// Compiled on the first event, not on `import "troupe/client"`, which most often only connects.
let compiled: ((payload: unknown) => Either.Either<EventFrame, ParseResult.ParseError>) | undefined
const decodeKnownEvent = (payload: unknown) => (compiled ??= CompiledDecoder.make(Messages.SessionEventFrame))(payload)
const isSessionId = Schema.is(SessionId)

/**
 * A `session.event` payload by the rule: the typed event when the client can
 * read it, else `Unknown` when it names its kind, else the schema's error.
 */
export const decodeEventFrame = (payload: unknown): Either.Either<EventFrame, ParseResult.ParseError> => {
  const known = decodeKnownEvent(payload)
  if (Either.isRight(known) || !isMap(payload)) return known
  const { cursor, event } = payload
  const eventTag = tagOf(event)
  // Every event names its session: one that does not is broken, not newer.
  if (eventTag === undefined || !isSessionId((event as Record<string, unknown>).sessionId)) return known
  if (cursor !== undefined && typeof cursor !== "number") return known
  if (eventTag !== "durable") return Either.right({ cursor, event: new Unknown({ kind: eventTag, cursor, raw: event }) })
  const durable = event as Record<string, unknown>
  const recordTag = tagOf(durable.record)
  // A durable event is resumed from by its cursor: without one, its time or its record's kind, it is broken.
  if (recordTag === undefined || typeof cursor !== "number" || durable.cursor !== cursor || typeof durable.at !== "number") {
    return known
  }
  return Either.right({ cursor, event: new Unknown({ kind: recordTag, cursor, raw: event }) })
}

const decodeKnownCallback = Schema.decodeUnknownEither(Messages.CallbackOpen)

/**
 * A `callback.open` payload by the rule: the typed callback, else `Unknown`
 * (its `kind`, or `callback` when it has none) when it carries a callback id,
 * else the schema's error.
 */
export const decodeCallbackOpen = (payload: unknown): Either.Either<ClientCallback, ParseResult.ParseError> => {
  const known = decodeKnownCallback(payload)
  if (Either.isRight(known)) return Either.right(known.right.callback)
  const callback = isMap(payload) ? payload.callback : undefined
  if (!isMap(callback) || typeof callback.callbackId !== "string") return Either.left(known.left)
  const kind = typeof callback.kind === "string" && callback.kind.length > 0 ? callback.kind : "callback"
  return Either.right(new Unknown({ kind, raw: callback }))
}

/** Whether an event (or callback) is one this client could not read. */
export const isUnknown = (value: unknown): value is Unknown => value instanceof Unknown
