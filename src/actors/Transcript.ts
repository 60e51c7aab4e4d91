/**
 * The conversation a session's model calls are given: every earlier turn's
 * user message, steers, assistant replies with their tool calls, and tool
 * results, in the order the model saw them.
 *
 * A transcript is an `AppendOnlyList` of messages: immutable, with O(1)
 * appends, so a session's history is never copied per turn. A turn's look
 * ahead at records it has not committed yet (its next model call's prompt)
 * and the commit of those records append the same messages, and share them.
 *
 * @since 0.1.0
 */
import type * as Model from "../services/Model.js"
import * as AppendOnlyList from "./AppendOnlyList.js"

/** A transcript version. */
export type Transcript = AppendOnlyList.AppendOnlyList<Model.Message>

/** The empty transcript. */
export const empty = (): Transcript => AppendOnlyList.empty()

const same = (a: Model.Message, b: Model.Message) =>
  a.role === b.role && a.content === b.content &&
  (a.role === "tool" ? a.toolCallId === (b as typeof a).toolCallId : true) &&
  (a.role === "assistant" ? a.toolCalls === (b as typeof a).toolCalls : true)

/** `transcript` with `message` appended. */
export const append = (transcript: Transcript, message: Model.Message): Transcript =>
  AppendOnlyList.append(transcript, message, same)

/** `transcript`'s messages then `rest`, as a request takes them without a copy (`Model.withHistory`). */
export const history = (transcript: Transcript, rest: ReadonlyArray<Model.Message>): Model.History => ({
  items: transcript.items,
  length: transcript.length,
  rest
})

/** The messages of `transcript`, as an array of their own (a request keeps it while the session goes on). */
export const toArray = (transcript: Transcript): Array<Model.Message> => AppendOnlyList.toArray(transcript)
