/**
 * The conversation a session's model calls are given: every earlier turn's
 * user message, steers, assistant replies with their tool calls, and tool
 * results, in the order the model saw them.
 *
 * A transcript is an immutable value with O(1) appends: versions share one
 * backing array, and each version sees only its own prefix of it. Appending
 * to the newest version pushes in place; appending to an older version (a
 * branch) copies its prefix first. The actor only ever appends to the newest
 * one, so a session's history is never copied per turn.
 *
 * @since 0.1.0
 */
import type * as Model from "../services/Model.js"

/** A transcript version. */
export interface Transcript {
  readonly length: number
  /** Shared by the versions of one line of appends; read only `[0, length)`. */
  readonly items: Array<Model.Message>
}

/** The empty transcript. */
export const empty = (): Transcript => ({ length: 0, items: [] })

const same = (a: Model.Message, b: Model.Message) =>
  a.role === b.role && a.content === b.content &&
  (a.role === "tool" ? a.toolCallId === (b as typeof a).toolCallId : true) &&
  (a.role === "assistant" ? a.toolCalls === (b as typeof a).toolCalls : true)

/**
 * `transcript` with `message` appended. A branch that appends what the newest
 * version already holds next (a turn's look ahead at records it has not
 * committed yet, then their commit) shares it instead of copying.
 */
export const append = (transcript: Transcript, message: Model.Message): Transcript => {
  const { items, length } = transcript
  if (items.length === length) {
    items.push(message)
    return { length: length + 1, items }
  }
  if (same(items[length]!, message)) return { length: length + 1, items }
  const copy = items.slice(0, length)
  copy.push(message)
  return { length: length + 1, items: copy }
}

/** The messages of `transcript`, as an array of their own (a request keeps it while the session goes on). */
export const toArray = (transcript: Transcript): ReadonlyArray<Model.Message> => transcript.items.slice(0, transcript.length)

/** The message at `index`, if the transcript is that long. */
export const at = (transcript: Transcript, index: number): Model.Message | undefined =>
  index < transcript.length ? transcript.items[index] : undefined
