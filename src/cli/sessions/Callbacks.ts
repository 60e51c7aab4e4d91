/**
 * A session's open callbacks as the CLI shows them: read from its log, one
 * line each with the command that answers it.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type * as SessionClient from "../../client/SessionClient.js"
import type { SessionId } from "../../schema/Ids.js"
import type { CallbackOpened } from "../../schema/Record.js"
import * as EventFormat from "../EventFormat.js"

/** The callbacks still open in a session's log (replayed: the wire has no list of them). */
export const openCallbacks = <E>(client: SessionClient.SessionsApi<E>, id: SessionId) =>
  client.events(id, { follow: false }).pipe(
    Stream.runFold(new Map<string, CallbackOpened>(), (open, frame) => {
      const event = frame.event
      if (event._tag !== "durable") return open
      if (event.record._tag === "callback_opened") open.set(event.record.callbackId, event.record)
      if (event.record._tag === "callback_resolved") open.delete(event.record.callbackId)
      return open
    }),
    Effect.map((open) => [...open.values()])
  )

/** A callback's line: its id, kind and call, then how to answer it (`flags` are the connection's). */
export const callbackLine = (sessionId: SessionId, callback: CallbackOpened, flags: string) => {
  // The request is typed by the record (an approval's or a client tool's, both a tool call).
  const call = EventFormat.toolCall(callback.request.toolName, callback.request.arguments)
  const how = callback.kind === "approval" ? "--approve | --approve-session | --deny" : "--output JSON [--error]"
  return `${callback.callbackId}  ${callback.kind}  ${call}\n    answer: troupe sessions answer ${flags === "" ? "" : `${flags} `}${sessionId} ${callback.callbackId} ${how}`
}
