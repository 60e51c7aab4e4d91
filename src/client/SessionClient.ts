/**
 * The typed client tier: the `Sessions` API of a remote daemon, over an
 * `AgentClient` connection. Requests and answers are the `Messages` schemas
 * (PROTOCOL.md, "Message types"); a `core.error` answer is a `ServerError`
 * with its kind, so callers match on `kind` (`not_found`, `stale_callback`,
 * `turn_mismatch`, …) rather than on text.
 *
 * - `events` is an Effect `Stream` of `session.event` frames. It resumes by
 *   itself from the server's cursor when the server ends it as a slow
 *   consumer, and it ends when the replay is done (`follow: false`) or the
 *   session closes. Stopping it early sends `session.events.cancel`.
 * - `provideCallbacks` serves callbacks until interrupted (it then sends
 *   `callback.provide.cancel`): each `callback.open` goes to the handler, and
 *   a `Some` result is sent with `callback.answer` (an answer someone else
 *   beat is dropped, as an in-process provider's is).
 *
 * A client made by `connect` (or `connectTcp`, `connectNamed`) owns its
 * connection and knows how to open another: same address, same hello. When
 * the connection drops, event streams subscribe again on a new connection
 * with `after` = the last durable cursor they delivered (no gap, no
 * duplicate), providers register again, and the next request reconnects;
 * attempts follow `reconnectSchedule` (exponential, capped, bounded). A
 * request caught by the drop is sent again on the new connection when that
 * is harmless (reads, `rename`, `archive`, `send` under its input id,
 * `create` with an idempotency key); `create` without one, `close`,
 * `interrupt` and `answerCallback` fail with `Closed` instead, since they may
 * or may not have taken effect. A client made by `make` over a caller's
 * connection never reconnects.
 *
 * A client whose own telemetry is off says so in its `auth.hello`
 * (`excludeFromAnalytics`): `telemetryEnabled` in the options, read from
 * `TROUPE_TELEMETRY_ENABLED` when not given.
 *
 * The Promise API, for plain TypeScript, is `PromiseClient` (its own module:
 * the one place where an Effect is run for the caller).
 *
 * Like the raw tier, this module speaks the wire only: it imports the codec
 * and the schemas, never the runtime (test/Layout.test.ts).
 *
 * @since 0.1.0
 */
import {
  Chunk,
  Config,
  Duration,
  Effect,
  Either,
  Exit,
  Option,
  type ParseResult,
  Schedule,
  Schema,
  Scope,
  Stream
} from "effect"
import * as Cbor from "../protocol/Cbor.js"
import * as Envelope from "../protocol/Envelope.js"
import * as Frame from "../protocol/Frame.js"
import * as Handshake from "../protocol/Handshake.js"
import * as Messages from "../protocol/Messages.js"
import * as Naming from "../protocol/Naming.js"
import * as ProtocolError from "../protocol/ProtocolError.js"
import type { InvalidName } from "../protocol/ProtocolError.js"
import type { Budgets } from "../schema/Budget.js"
import type { CallbackKind, PendingCallback } from "../schema/Callback.js"
import { InvalidInput } from "../schema/Errors.js"
import type { Snapshot } from "../schema/Event.js"
import { type CallbackId, InputId, makeInputId, type OperationId, type SessionId, type TurnId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import type { Session } from "../schema/Session.js"
import * as AgentClient from "./AgentClient.js"
import * as ForwardCompatible from "./ForwardCompatible.js"

const { Type } = Messages

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

/** One agent the daemon serves. */
export type AgentInfo = typeof Messages.AgentInfo.Type

/** What creating a session takes. */
export interface CreateOptions {
  /** The name of one of the daemon's agents (`agents`). */
  readonly agent: string
  readonly title?: string | undefined
  readonly idempotencyKey?: string | undefined
  readonly budgets?: Budgets | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
}

/** Which sessions to list. */
export type ListOptions = typeof Messages.SessionList.Type

/** One page of sessions, newest first; pass `nextCursor` back as `cursor` for the next. */
export type SessionPage = typeof Messages.SessionPage.Type

/** A message to send. */
export interface SendOptions {
  readonly text: string
  /** `queue` (default): a new turn, after the running one if any; `steer`: into the running turn. */
  readonly mode?: "queue" | "steer" | undefined
  /** Idempotency key of this send (default: a fresh one); a retry with the same id and text is not sent twice. */
  readonly inputId?: string | undefined
  readonly source?: string | undefined
}

/** What the session did with a message. */
export type Accepted = typeof Messages.SessionAccepted.Type

/** How an interrupt ended. */
export type Interrupted = typeof Messages.SessionInterrupted.Type

/** Where an event subscription starts and what it carries. */
export interface EventOptions {
  /** The cursor of the last event the caller has (default 0: from the beginning). */
  readonly after?: number | undefined
  /** Include assistant deltas (default false). */
  readonly volatile?: boolean | undefined
  /** Keep following live events after the replay (default true). */
  readonly follow?: boolean | undefined
}

/**
 * One event; `cursor` is set for durable events (resume with `after` = the
 * last one seen). An event this client cannot read (a newer daemon's) is a
 * `ForwardCompatible.Unknown` (docs/protocol.md, "Forward compatibility").
 */
export type EventFrame = ForwardCompatible.EventFrame

/** An answer to an open callback. */
export interface AnswerOptions {
  readonly callbackId: CallbackId
  /** For `approval`: `{ decision, reason? }`; for `client_tool`: `{ output, isError? }`. */
  readonly result: unknown
  readonly turnId?: TurnId | undefined
  readonly operationId?: OperationId | undefined
}

/** A page of a session's direct children (`nextCursor` continues it). */
export type ChildrenPage = typeof Messages.SessionChildrenPage.Type

/** A session and its whole subtree, parents before children. */
export type SessionTree = typeof Messages.SessionTree.Type

/** Which page of children to read: `cursor` from the previous page, `limit` 1 to 500. */
export interface ChildrenOptions {
  readonly cursor?: string | undefined
  readonly limit?: number | undefined
}

/** A provider's handler: `Some(result)` answers, `None` leaves the callback to others. */
export type Handler<E = never> = (callback: PendingCallback) => Effect.Effect<Option.Option<unknown>, E>

/** The typed API of one connection. */
export interface SessionClient {
  /** The raw connection underneath. */
  readonly connection: AgentClient.Connection
  /** Authenticates the connection (`auth.hello`); not needed on a trusted-local listener. */
  readonly hello: (options?: typeof Messages.AuthHello.Type) => Effect.Effect<Principal, SessionClientError>
  readonly ping: Effect.Effect<void, SessionClientError>
  /** The agents the daemon serves. */
  readonly agents: Effect.Effect<ReadonlyArray<AgentInfo>, SessionClientError>
  readonly create: (options: CreateOptions) => Effect.Effect<Session, SessionClientError>
  readonly get: (sessionId: SessionId) => Effect.Effect<Session, SessionClientError>
  readonly list: (options?: ListOptions) => Effect.Effect<SessionPage, SessionClientError>
  readonly send: (sessionId: SessionId, options: SendOptions) => Effect.Effect<Accepted, SessionClientError>
  /** Interrupts exactly `expectedTurnId`; another running turn is `turn_mismatch`. */
  readonly interrupt: (
    sessionId: SessionId,
    expectedTurnId: TurnId,
    reason?: string
  ) => Effect.Effect<Interrupted, SessionClientError>
  readonly rename: (sessionId: SessionId, title: string) => Effect.Effect<Session, SessionClientError>
  readonly archive: (sessionId: SessionId, archived: boolean) => Effect.Effect<Session, SessionClientError>
  readonly close: (sessionId: SessionId) => Effect.Effect<Session, SessionClientError>
  /** The session's direct children, newest first, archived included (`session.children`). */
  readonly children: (sessionId: SessionId, options?: ChildrenOptions) => Effect.Effect<ChildrenPage, SessionClientError>
  /** The session and every session below it, at most 10,000 (`session.tree`). */
  readonly tree: (
    sessionId: SessionId,
    options?: { readonly includeArchived?: boolean | undefined }
  ) => Effect.Effect<SessionTree, SessionClientError>
  /** The session with its cursor and pending work. */
  readonly snapshot: (sessionId: SessionId) => Effect.Effect<Snapshot, SessionClientError>
  /** The session's events after `after`, then live ones; see the module doc for how it ends. */
  readonly events: (sessionId: SessionId, options?: EventOptions) => Stream.Stream<EventFrame, SessionClientError>
  readonly answerCallback: (sessionId: SessionId, answer: AnswerOptions) => Effect.Effect<void, SessionClientError>
  /** Serves callbacks of `kinds` in the session's tree until interrupted, or until the server ends it. */
  readonly provideCallbacks: <E>(
    sessionId: SessionId,
    kinds: ReadonlyArray<CallbackKind>,
    handler: Handler<E>
  ) => Effect.Effect<void, E | SessionClientError>
}

/** `InvalidInput` if a JSON value the caller gave nests deeper than the daemon takes (`Cbor.MAX_JSON_DEPTH`). */
const jsonTooDeep = (what: string, values: ReadonlyArray<unknown>): Effect.Effect<void, InvalidInput> =>
  values.some((value) => Cbor.tooDeep(value, Cbor.MAX_JSON_DEPTH))
    ? Effect.fail(new InvalidInput({ what, reason: `nested deeper than ${Cbor.MAX_JSON_DEPTH} levels, the server's limit for JSON values` }))
    : Effect.void

/**
 * The body of a message; `InvalidInput` when the value nests deeper than the
 * server reads (`Cbor.MAX_DEPTH`, checked first, in bounded stack, so no input
 * can overflow it), `InvalidFrame` when it has no other wire form.
 */
const bodyOf = <A, I>(
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
const readEither = (request: string, frame: AgentClient.RawFrame): Either.Either<Envelope.Body, ServerError | UnexpectedAnswer> => {
  const body = Envelope.decodeBody(frame.body)
  if (Either.isLeft(body)) return Either.left(new UnexpectedAnswer({ request, reason: body.left.message }))
  if (body.right.t !== Type.error) return Either.right(body.right)
  const error = decodeError(body.right.payload)
  if (Either.isLeft(error)) return Either.left(new UnexpectedAnswer({ request, reason: "a core.error of an unknown form" }))
  const { offending_type, ...fields } = error.right
  return Either.left(new ServerError({ ...fields, ...(offending_type === undefined ? {} : { offendingType: offending_type }) }))
}

/** The type and payload of a frame received on an exchange of `request`; `core.error` is a `ServerError`. */
const read = (request: string, frame: AgentClient.RawFrame): Effect.Effect<Envelope.Body, ServerError | UnexpectedAnswer> =>
  Effect.suspend(() => readEither(request, frame))

/** A payload as `schema`, or `UnexpectedAnswer`. */
const payloadAs = <A, I>(request: string, body: Envelope.Body, schema: Schema.Schema<A, I>) =>
  Schema.decodeUnknown(schema)(body.payload).pipe(
    Effect.mapError((error) => new UnexpectedAnswer({ request, reason: `${body.t}: ${error.message}` }))
  )

/** The answer of `type`, read with `schema`. */
const answerAs = <A, I>(request: string, type: string, schema: Schema.Schema<A, I>) => (frame: AgentClient.RawFrame) =>
  Effect.flatMap(read(request, frame), (body) =>
    body.t === type
      ? payloadAs(request, body, schema)
      : Effect.fail(new UnexpectedAnswer({ request, reason: `expected ${type}, got ${body.t}` })))

/**
 * One connection of a client: calls go to `connection` until it drops. `dead`
 * is set once the connection has closed, whoever closed it.
 */
interface Link {
  readonly connection: AgentClient.Connection
  dead: boolean
  /** Closes the connection and everything opened for it. */
  readonly release: Effect.Effect<void>
}

/** Where a client's calls go, and how it replaces a connection that dropped. */
interface Source {
  /** The connection calls use now; `connection` of the client. */
  readonly current: () => Link
  /** The current link, or a new one when it is dead and the client can reconnect. */
  readonly live: Effect.Effect<Link, SessionClientError>
  /**
   * Called after `dropped` failed a call with `error`: a new link (the one
   * another caller already made, or a fresh one), or `error` itself when the
   * client cannot reconnect.
   */
  readonly renew: (dropped: Link, error: AgentClient.Closed) => Effect.Effect<Link, SessionClientError>
}

/** A link over a connection someone else owns. */
const fixedLink = (connection: AgentClient.Connection): Link => ({ connection, dead: false, release: Effect.void })

/** A source that never reconnects. */
const fixedSource = (link: Link): Source => ({
  current: () => link,
  live: Effect.succeed(link),
  renew: (_, error) => Effect.fail(error)
})

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

const unexpected = (request: string, type: string, error: ParseResult.ParseError) =>
  new UnexpectedAnswer({ request, reason: `${type}: ${error.message}` })

/** A failure of the handler given to `provideCallbacks`, kept apart from the client's own errors. */
class HandlerFailure<E> {
  constructor(readonly error: E) {}
}

const isClosed = (error: unknown): error is AgentClient.Closed => error instanceof AgentClient.Closed

/**
 * One request. A `repeatable` one (reading, setting a value, or carrying an
 * idempotency key) that fails because the connection dropped is sent once
 * more on a new connection; any other fails with `Closed`, since it may or
 * may not have taken effect.
 */
const call = <A, I, B, J>(
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
const summary = <A, I>(source: Source, type: string, schema: Schema.Schema<A, I>, value: A, repeatable = true) =>
  Effect.map(
    call(source, type, schema, value, Type.sessionSummary, Messages.SessionSummary, repeatable),
    (answer) => answer.session
  )

/**
 * Opens a stream exchange on `connection` in the current scope; `pull` gives
 * its next frame (`None` after the TERMINAL one), `pullChunk` every frame
 * buffered (empty after the TERMINAL one). When the scope closes
 * before the TERMINAL frame was pulled, `cancelType` is sent on its id. (A
 * TERMINAL frame that arrived but was not pulled frees the id early; ids are
 * handed out round the whole range, so it is not reused before the range wraps.)
 */
const openStream = <A, I>(
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
  Stream.unwrapScoped(Effect.gen(function*() {
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
    return Stream.repeatEffectChunkOption(next)
  }))

/** The session's events from `options.after`, subscribing again after a `slow_consumer` end or a drop. */
const events = (
  source: Source,
  sessionId: SessionId,
  options: EventOptions = {}
): Stream.Stream<EventFrame, SessionClientError> =>
  Stream.suspend(() => {
    // The cursor of the last durable event handed on: where a new subscription starts.
    let last = options.after
    const from = (after: number | undefined): Stream.Stream<EventFrame, SessionClientError> =>
      Stream.unwrap(Effect.map(source.live, (link) =>
        subscription(link.connection, { sessionId, after, volatile: options.volatile, follow: options.follow }).pipe(
          Stream.mapChunks((chunk) => {
            for (const frame of chunk) if (frame.cursor !== undefined) last = frame.cursor
            return chunk
          }),
          Stream.catchAll((error): Stream.Stream<EventFrame, SessionClientError> => {
            if (!(error instanceof Resume)) return Stream.fail(error)
            const why = error.why
            return why._tag === "slow_consumer"
              ? from(why.cursor)
              : Stream.unwrap(Effect.as(source.renew(link, why.error), Stream.suspend(() => from(last))))
          })
        )))
    return from(options.after)
  })

/** `callback.answer`; not repeated after a drop, since it may have taken effect. */
const answerCallback = (source: Source, sessionId: SessionId, answer: AnswerOptions) =>
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
const provideOnce = <E>(
  source: Source,
  link: Link,
  sessionId: SessionId,
  kinds: ReadonlyArray<CallbackKind>,
  handler: Handler<E>
): Effect.Effect<void, HandlerFailure<E> | SessionClientError> =>
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
      if (ForwardCompatible.isUnknown(callback)) {
        // A newer daemon's callback this client cannot read: left open for one that can (or a manual answer).
        yield* Effect.logWarning("a callback this client cannot read was left open").pipe(
          Effect.annotateLogs({ kind: callback.kind })
        )
        continue
      }
      const result = yield* Effect.mapError(handler(callback), (error) => new HandlerFailure(error))
      if (Option.isNone(result)) continue
      yield* answerCallback(source, callback.sessionId, {
        callbackId: callback.callbackId,
        result: result.value,
        turnId: callback.turnId,
        operationId: callback.operationId
      }).pipe(
        // Another provider or a manual answer came first, or the turn ended: the callback is no longer ours.
        Effect.catchIf(
          (error) => error._tag === "ServerError" && (error.kind === "stale_callback" || error.kind === "session_closed"),
          () => Effect.void
        )
      )
    }
  }))

/** Serves callbacks until interrupted, registering again on each new connection. */
const provideCallbacks = <E>(
  source: Source,
  sessionId: SessionId,
  kinds: ReadonlyArray<CallbackKind>,
  handler: Handler<E>
) => {
  // After a drop the provider registers again; the server offers it the callbacks still open.
  const serve = (link: Link): Effect.Effect<void, HandlerFailure<E> | SessionClientError> =>
    provideOnce(source, link, sessionId, kinds, handler).pipe(
      Effect.catchIf(isClosed, (error) => Effect.flatMap(source.renew(link, error), serve))
    )
  return Effect.flatMap(source.live, serve).pipe(
    Effect.catchAll((error): Effect.Effect<never, E | SessionClientError> =>
      Effect.fail(error instanceof HandlerFailure ? error.error as E : error as SessionClientError)
    )
  )
}

/** The typed API over a source of connections. */
const build = (source: Source): SessionClient => ({
  get connection() {
    return source.current().connection
  },
  hello: (options = {}) =>
    Effect.map(call(source, Type.hello, Messages.AuthHello, options, Type.welcome, Messages.AuthWelcome), (w) => w.principal),
  ping: Effect.asVoid(call(source, Type.ping, Messages.Empty, {}, Type.pong, Messages.Empty)),
  agents: Effect.map(call(source, Type.agentList, Messages.Empty, {}, Type.agentPage, Messages.AgentPage), (page) => page.items),
  create: (options) =>
    Effect.andThen(jsonTooDeep("session.create metadata", Object.values(options.metadata ?? {})), () => Effect.map(
      call(
        source,
        Type.sessionCreate,
        Messages.SessionCreate,
        options,
        Type.sessionCreated,
        Messages.SessionCreated,
        options.idempotencyKey !== undefined
      ),
      (answer) => answer.session
    )),
  get: (sessionId) => summary(source, Type.sessionGet, Messages.SessionRef, { sessionId }),
  list: (options = {}) => call(source, Type.sessionList, Messages.SessionList, options, Type.sessionPage, Messages.SessionPage),
  send: (sessionId, options) =>
    Effect.gen(function*() {
      const inputId = options.inputId === undefined ? yield* makeInputId : InputId.make(options.inputId)
      const { mode, source: origin, text } = options
      return yield* call(
        source,
        Type.sessionSend,
        Messages.SessionSend,
        { sessionId, inputId, text, mode: mode ?? "queue", ...(origin === undefined ? {} : { source: origin }) },
        Type.sessionAccepted,
        Messages.SessionAccepted
      )
    }),
  interrupt: (sessionId, expectedTurnId, reason) =>
    call(
      source,
      Type.sessionInterrupt,
      Messages.SessionInterrupt,
      { sessionId, expectedTurnId, ...(reason === undefined ? {} : { reason }) },
      Type.sessionInterrupted,
      Messages.SessionInterrupted,
      false
    ),
  rename: (sessionId, title) => summary(source, Type.sessionRename, Messages.SessionRename, { sessionId, title }),
  archive: (sessionId, archived) => summary(source, Type.sessionArchive, Messages.SessionArchive, { sessionId, archived }),
  close: (sessionId) => summary(source, Type.sessionClose, Messages.SessionRef, { sessionId }, false),
  children: (sessionId, options = {}) =>
    call(
      source,
      Type.sessionChildren,
      Messages.SessionChildren,
      {
        sessionId,
        ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
        ...(options.limit === undefined ? {} : { limit: options.limit })
      },
      Type.sessionChildrenPage,
      Messages.SessionChildrenPage
    ),
  tree: (sessionId, options = {}) =>
    call(
      source,
      Type.sessionTree,
      Messages.SessionTreeRequest,
      { sessionId, ...(options.includeArchived === undefined ? {} : { includeArchived: options.includeArchived }) },
      Type.sessionTree,
      Messages.SessionTree
    ),
  snapshot: (sessionId) =>
    Effect.map(
      call(source, Type.sessionSnapshot, Messages.SessionRef, { sessionId }, Type.sessionSnapshot, Messages.SessionSnapshot),
      (answer) => answer.snapshot
    ),
  events: (sessionId, options) => events(source, sessionId, options),
  answerCallback: (sessionId, answer) => answerCallback(source, sessionId, answer),
  provideCallbacks: (sessionId, kinds, handler) => provideCallbacks(source, sessionId, kinds, handler)
})

/** The typed API over an open connection. It never reconnects: the connection is the caller's. */
export const make = (connection: AgentClient.Connection): SessionClient => build(fixedSource(fixedLink(connection)))

/** How a client made by `connect` replaces a connection that dropped. */
export interface ReconnectOptions {
  /** Connection attempts per drop before giving up (default 10). */
  readonly attempts?: number | undefined
  /** The delay before the second attempt; it doubles with each further one (default 100 ms). */
  readonly initialDelay?: Duration.DurationInput | undefined
  /** The longest delay between two attempts (default 5 s). */
  readonly maxDelay?: Duration.DurationInput | undefined
}

/** The defaults of `ReconnectOptions`. */
export const reconnectDefaults = {
  attempts: 10,
  initialDelay: Duration.millis(100),
  maxDelay: Duration.seconds(5)
} as const

/** Connection settings, plus the token to authenticate with (none: the listener must be trusted-local). */
export interface ConnectOptions extends AgentClient.ConnectOptions {
  readonly token?: string | undefined
  /** Sent with `auth.hello`: a name for this client. */
  readonly client?: string | undefined
  /** Asks the daemon to keep the product events this connection causes out of analytics. */
  readonly excludeFromAnalytics?: boolean | undefined
  /**
   * Whether this client's own telemetry is on (default: `telemetryEnabled`, from the
   * environment). When it is off and `excludeFromAnalytics` is not given, the client
   * asks to be excluded (see `connect`).
   */
  readonly telemetryEnabled?: boolean | undefined
  /** How to reconnect after the connection drops (`false`: never; the default: `reconnectDefaults`). */
  readonly reconnect?: ReconnectOptions | false | undefined
}

/**
 * `TROUPE_TELEMETRY_ENABLED` (default `true`), the same variable the runtime's
 * `Telemetry.enabled` reads, read here so that the client needs nothing of
 * the runtime: a client that finds it false asks to be excluded from analytics.
 */
export const telemetryEnabled: Config.Config<boolean> = Config.boolean("TROUPE_TELEMETRY_ENABLED").pipe(
  Config.withDefault(true)
)

/**
 * The delays between connection attempts: exponential from `initialDelay`,
 * capped at `maxDelay`, jittered (so clients of a restarted daemon do not
 * come back in step), for at most `attempts` attempts in all.
 */
export const reconnectSchedule = (options: ReconnectOptions = {}): Schedule.Schedule<unknown> =>
  Schedule.exponential(options.initialDelay ?? reconnectDefaults.initialDelay, 2).pipe(
    Schedule.union(Schedule.spaced(options.maxDelay ?? reconnectDefaults.maxDelay)),
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(Math.max(0, (options.attempts ?? reconnectDefaults.attempts) - 1)))
  )

/** Failures worth another attempt: the daemon is away, restarting, or at its connection limit. */
const transient = (error: AgentClient.ConnectFailure | SessionClientError): boolean => {
  switch (error._tag) {
    case "ConnectError":
    case "HandshakeError":
    case "Closed":
      return true
    case "Refused":
      return error.kind === "busy"
    case "ServerError":
      return error.retryable === true
    default:
      return false
  }
}

/** Opens connections with `open` (and says hello on each when `options` ask for it), reconnecting as `options` say. */
const connectWith = (
  open: Effect.Effect<AgentClient.Connection, AgentClient.ConnectFailure, Scope.Scope>,
  options: ConnectOptions
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  Effect.gen(function*() {
    const hello: typeof Messages.AuthHello.Type | undefined =
      options.token !== undefined || options.excludeFromAnalytics !== undefined || options.client !== undefined
        ? {
          ...(options.token === undefined ? {} : { token: options.token }),
          ...(options.client === undefined ? {} : { client: options.client }),
          ...(options.excludeFromAnalytics === undefined ? {} : { excludeFromAnalytics: options.excludeFromAnalytics })
        }
        : undefined

    // A client whose own telemetry is off says so (PROTOCOL.md `auth.hello`), so the daemon keeps
    // the events it causes out of analytics. Without a token it can only say hello to a listener
    // that trusts it (its `core.ready` lists no auth): elsewhere the hello would be refused.
    const telemetryOff = options.excludeFromAnalytics === undefined &&
      !(options.telemetryEnabled ?? (yield* Effect.orElseSucceed(telemetryEnabled, () => true)))
    const trusts = (connection: AgentClient.Connection) =>
      Either.match(Envelope.decodeBody(connection.readyBytes()), {
        onLeft: () => false,
        onRight: (body) =>
          Either.match(Handshake.decodeReadyPayload(body.payload), {
            onLeft: () => false,
            onRight: (ready) => ready.auth.length === 0
          })
      })

    // One connection in a scope of its own, authenticated; a failure closes what was opened.
    const dial: Effect.Effect<Link, AgentClient.ConnectFailure | SessionClientError> = Effect.uninterruptibleMask(
      (restore) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          return yield* restore(Effect.gen(function*() {
            const connection = yield* Scope.extend(open, scope)
            if (hello !== undefined) {
              yield* make(connection).hello(telemetryOff ? { ...hello, excludeFromAnalytics: true } : hello)
            } else if (telemetryOff && trusts(connection)) {
              yield* make(connection).hello({ excludeFromAnalytics: true })
            }
            const link: Link = { connection, dead: false, release: Scope.close(scope, Exit.void) }
            yield* Effect.forkIn(
              Effect.andThen(connection.closed, Effect.sync(() => {
                link.dead = true
              })),
              scope
            )
            return link
          })).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
        })
    )

    let current = yield* dial
    let shuttingDown = false
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        shuttingDown = true
        return current.release
      })
    )
    if (options.reconnect === false) return build(fixedSource(current))

    const schedule = reconnectSchedule(options.reconnect)
    const lock = yield* Effect.makeSemaphore(1)
    const renew = (dropped: Link, error: AgentClient.Closed): Effect.Effect<Link, SessionClientError> =>
      lock.withPermits(1)(Effect.suspend(() => {
        // Another caller saw the same drop and has already reconnected.
        if (current !== dropped) return Effect.succeed(current)
        if (shuttingDown) return Effect.fail(error)
        return Effect.gen(function*() {
          yield* dropped.release
          const link = yield* dial.pipe(
            Effect.retry({ schedule, while: (failure) => !shuttingDown && transient(failure) }),
            Effect.catchAll((failure): Effect.Effect<never, SessionClientError> =>
              failure._tag === "ConnectError" || failure._tag === "HandshakeError" || failure._tag === "Refused"
                ? Effect.fail(new AgentClient.Closed({ reason: `${error.reason}; reconnecting failed: ${failure.message}` }))
                : Effect.fail(failure)
            )
          )
          if (shuttingDown) {
            yield* link.release
            return yield* Effect.fail(error)
          }
          current = link
          return link
        })
      }))
    return build({
      current: () => current,
      live: Effect.suspend(() =>
        current.dead ? renew(current, new AgentClient.Closed({ reason: "the connection dropped" })) : Effect.succeed(current)
      ),
      renew
    })
  })

/**
 * Connects to a unix socket and authenticates when given a token: a scoped
 * `SessionClient`. When the connection drops, the next call (and every open
 * event stream or callback provider) connects again with the same options,
 * retrying with `reconnectSchedule`.
 */
export const connect = (
  path: string,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  connectWith(AgentClient.make(path, options), options)

/** `connect` over TCP. */
export const connectTcp = (
  host: string,
  port: number,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  connectWith(AgentClient.makeTcp(host, port, options), options)

/** `connect` to the daemon named `name` (see `Naming.socketPath`). */
export const connectNamed = (
  name: string,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | InvalidName | SessionClientError, Scope.Scope> =>
  Effect.flatMap(
    Naming.socketPath(name).pipe(
      Effect.catchTag("ConfigError", (error) => Effect.fail(new AgentClient.ConnectError({ address: name, reason: error.message })))
    ),
    (path) => connect(path, options)
  )
