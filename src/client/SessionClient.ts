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
 * Like the raw tier, this module speaks the wire only: it imports the codec
 * and the schemas, never the runtime.
 *
 * @since 0.1.0
 */
import { Effect, Either, Option, Schema, type Scope, Stream } from "effect"
import * as Envelope from "../protocol/Envelope.js"
import * as Frame from "../protocol/Frame.js"
import * as Messages from "../protocol/Messages.js"
import * as ProtocolError from "../protocol/ProtocolError.js"
import type { Budgets } from "../schema/Budget.js"
import type { CallbackKind, PendingCallback } from "../schema/Callback.js"
import type { Snapshot } from "../schema/Event.js"
import { type CallbackId, InputId, makeInputId, type OperationId, type SessionId, type TurnId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import type { Session } from "../schema/Session.js"
import * as AgentClient from "./AgentClient.js"

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
export type SessionClientError = AgentClient.ClientError | ServerError | UnexpectedAnswer

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

/** One event; `cursor` is set for durable events (resume with `after` = the last one seen). */
export type EventFrame = typeof Messages.SessionEventFrame.Type

/** An answer to an open callback. */
export interface AnswerOptions {
  readonly callbackId: CallbackId
  /** For `approval`: `{ decision, reason? }`; for `client_tool`: `{ output, isError? }`. */
  readonly result: unknown
  readonly turnId?: TurnId | undefined
  readonly operationId?: OperationId | undefined
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

/** The body of a message, or `InvalidFrame` when a value given by the caller has no wire form. */
const bodyOf = <A, I>(type: string, schema: Schema.Schema<A, I>, value: A) =>
  Schema.encode(schema)(value).pipe(
    Effect.mapError((error) => new AgentClient.InvalidFrame({ reason: `${type}: ${error.message}` })),
    Effect.flatMap((payload) =>
      Either.match(Envelope.encodeBody(type, payload), {
        onLeft: (error) => Effect.fail(new AgentClient.InvalidFrame({ reason: error.message })),
        onRight: Effect.succeed
      })
    )
  )

const decodeError = Schema.decodeUnknownEither(ProtocolError.ErrorPayload)

/** The type and payload of a frame received on an exchange of `request`; `core.error` is a `ServerError`. */
const read = (request: string, frame: AgentClient.RawFrame) =>
  Effect.suspend((): Effect.Effect<Envelope.Body, ServerError | UnexpectedAnswer> => {
    const body = Envelope.decodeBody(frame.body)
    if (Either.isLeft(body)) return Effect.fail(new UnexpectedAnswer({ request, reason: body.left.message }))
    if (body.right.t !== Type.error) return Effect.succeed(body.right)
    const error = decodeError(body.right.payload)
    if (Either.isLeft(error)) return Effect.fail(new UnexpectedAnswer({ request, reason: "a core.error of an unknown form" }))
    const { offending_type, ...fields } = error.right
    return Effect.fail(new ServerError({ ...fields, ...(offending_type === undefined ? {} : { offendingType: offending_type }) }))
  })

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

/** The typed API over an open connection. */
export const make = (connection: AgentClient.Connection): SessionClient => {
  const call = <A, I, B, J>(
    type: string,
    schema: Schema.Schema<A, I>,
    value: A,
    answerType: string,
    answer: Schema.Schema<B, J>
  ): Effect.Effect<B, SessionClientError> =>
    bodyOf(type, schema, value).pipe(
      Effect.flatMap((body) => connection.request(0, body)),
      Effect.flatMap(answerAs(type, answerType, answer))
    )

  const summary = <A, I>(type: string, schema: Schema.Schema<A, I>, value: A) =>
    Effect.map(call(type, schema, value, Type.sessionSummary, Messages.SessionSummary), (answer) => answer.session)

  /**
   * Opens a stream exchange in the current scope; `pull` gives its next frame
   * (`None` after the TERMINAL one). When the scope closes before the TERMINAL
   * frame was pulled, `cancelType` is sent on its id. (A TERMINAL frame that
   * arrived but was not pulled frees the id early; ids are handed out round
   * the whole range, so it is not reused before the range wraps.)
   */
  const openStream = <A, I>(type: string, schema: Schema.Schema<A, I>, value: A, cancelType: string) =>
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
      return Effect.tap(stream.pull, (frame) => {
        if (Option.isSome(frame) && Frame.hasFlag(frame.value.flags, Frame.FLAG_TERMINAL)) ended = true
      })
    })

  /** The frames of `pull` as a stream, ending after the TERMINAL one. */
  const framesOf = (pull: Effect.Effect<Option.Option<AgentClient.RawFrame>, AgentClient.ClientError>) =>
    Stream.repeatEffectOption(
      Effect.flatMap(Effect.mapError(pull, Option.some), Option.match({ onNone: () => Effect.fail(Option.none()), onSome: Effect.succeed }))
    )

  /** One `session.events` exchange: its frames, then the end. */
  type Item = { readonly _tag: "event"; readonly frame: EventFrame } | {
    readonly _tag: "end"
    readonly end: typeof Messages.SessionEventsEnd.Type
  }
  const subscription = (request: typeof Messages.SessionEvents.Type): Stream.Stream<Item, SessionClientError> =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const pull = yield* openStream(Type.sessionEvents, Messages.SessionEvents, request, Type.sessionEventsCancel)
      return framesOf(pull).pipe(
        Stream.mapEffect((frame) =>
          Effect.flatMap(read(Type.sessionEvents, frame), (body): Effect.Effect<Item, UnexpectedAnswer> => {
            if (body.t === Type.sessionEvent) {
              return Effect.map(payloadAs(Type.sessionEvents, body, Messages.SessionEventFrame), (frame) => ({ _tag: "event", frame }))
            }
            if (body.t === Type.sessionEventsEnd) {
              return Effect.map(payloadAs(Type.sessionEvents, body, Messages.SessionEventsEnd), (end) => ({ _tag: "end", end }))
            }
            return Effect.fail(new UnexpectedAnswer({ request: Type.sessionEvents, reason: `got ${body.t}` }))
          })
        )
      )
    }))

  const events = (sessionId: SessionId, options: EventOptions = {}): Stream.Stream<EventFrame, SessionClientError> => {
    const from = (after: number | undefined): Stream.Stream<EventFrame, SessionClientError> =>
      subscription({ sessionId, after, volatile: options.volatile, follow: options.follow }).pipe(
        Stream.flatMap((item) =>
          item._tag === "event"
            ? Stream.succeed(item.frame)
            : item.end.reason === "slow_consumer"
            ? from(item.end.cursor)
            : Stream.empty
        )
      )
    return from(options.after)
  }

  const answerCallback = (sessionId: SessionId, answer: AnswerOptions) =>
    Effect.asVoid(call(
      Type.callbackAnswer,
      Messages.CallbackAnswer,
      { sessionId, ...answer },
      Type.callbackAccepted,
      Messages.Empty
    ))

  const provideCallbacks = <E>(sessionId: SessionId, kinds: ReadonlyArray<CallbackKind>, handler: Handler<E>) =>
    Effect.scoped(Effect.gen(function*() {
      const pull = yield* openStream(
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
        const { callback } = yield* payloadAs(Type.callbackProvide, body, Messages.CallbackOpen)
        const result = yield* handler(callback)
        if (Option.isNone(result)) continue
        yield* answerCallback(callback.sessionId, {
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

  return {
    connection,
    hello: (options = {}) =>
      Effect.map(call(Type.hello, Messages.AuthHello, options, Type.welcome, Messages.AuthWelcome), (w) => w.principal),
    ping: Effect.asVoid(call(Type.ping, Messages.Empty, {}, Type.pong, Messages.Empty)),
    agents: Effect.map(call(Type.agentList, Messages.Empty, {}, Type.agentPage, Messages.AgentPage), (page) => page.items),
    create: (options) =>
      Effect.map(
        call(Type.sessionCreate, Messages.SessionCreate, options, Type.sessionCreated, Messages.SessionCreated),
        (answer) => answer.session
      ),
    get: (sessionId) => summary(Type.sessionGet, Messages.SessionRef, { sessionId }),
    list: (options = {}) => call(Type.sessionList, Messages.SessionList, options, Type.sessionPage, Messages.SessionPage),
    send: (sessionId, options) =>
      Effect.gen(function*() {
        const inputId = options.inputId === undefined ? yield* makeInputId : InputId.make(options.inputId)
        const { mode, source, text } = options
        return yield* call(
          Type.sessionSend,
          Messages.SessionSend,
          { sessionId, inputId, text, mode: mode ?? "queue", ...(source === undefined ? {} : { source }) },
          Type.sessionAccepted,
          Messages.SessionAccepted
        )
      }),
    interrupt: (sessionId, expectedTurnId, reason) =>
      call(
        Type.sessionInterrupt,
        Messages.SessionInterrupt,
        { sessionId, expectedTurnId, ...(reason === undefined ? {} : { reason }) },
        Type.sessionInterrupted,
        Messages.SessionInterrupted
      ),
    rename: (sessionId, title) => summary(Type.sessionRename, Messages.SessionRename, { sessionId, title }),
    archive: (sessionId, archived) => summary(Type.sessionArchive, Messages.SessionArchive, { sessionId, archived }),
    close: (sessionId) => summary(Type.sessionClose, Messages.SessionRef, { sessionId }),
    snapshot: (sessionId) =>
      Effect.map(
        call(Type.sessionSnapshot, Messages.SessionRef, { sessionId }, Type.sessionSnapshot, Messages.SessionSnapshot),
        (answer) => answer.snapshot
      ),
    events,
    answerCallback,
    provideCallbacks
  }
}

/** Connection settings, plus the token to authenticate with (none: the listener must be trusted-local). */
export interface ConnectOptions extends AgentClient.ConnectOptions {
  readonly token?: string | undefined
  /** Sent with `auth.hello`: a name for this client. */
  readonly client?: string | undefined
  /** Asks the daemon to keep the product events this connection causes out of analytics. */
  readonly excludeFromAnalytics?: boolean | undefined
}

/** Connects to a unix socket and authenticates when given a token: a scoped `SessionClient`. */
export const connect = (
  path: string,
  options: ConnectOptions = {}
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  Effect.gen(function*() {
    const client = make(yield* AgentClient.make(path, options))
    if (options.token !== undefined || options.excludeFromAnalytics !== undefined || options.client !== undefined) {
      yield* client.hello({
        ...(options.token === undefined ? {} : { token: options.token }),
        ...(options.client === undefined ? {} : { client: options.client }),
        ...(options.excludeFromAnalytics === undefined ? {} : { excludeFromAnalytics: options.excludeFromAnalytics })
      })
    }
    return client
  })
