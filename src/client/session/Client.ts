/**
 * The typed API over a source of connections (`build`), and over a
 * connection the caller owns (`make`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Messages from "../../protocol/Messages.js"
import { InputId, makeInputId } from "../../schema/Ids.js"
import type * as AgentClient from "../AgentClient.js"
import type { SessionClient } from "./Api.js"
import { answerCallback, provideCallbacks } from "./Callbacks.js"
import { jsonTooDeep } from "./Codec.js"
import { events } from "./Events.js"
import { fixedLink, fixedSource, type Source } from "./Link.js"
import { call, summary } from "./Requests.js"

const { Type } = Messages

/** The typed API over a source of connections. */
export const build = (source: Source): SessionClient => ({
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
