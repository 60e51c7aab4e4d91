/**
 * A command's canonical text: what a store keeps to tell a repeated push of
 * the same input id (a duplicate) from another command under it (a conflict).
 * One function for every store, so they compare by the same text.
 *
 * @since 0.3.0
 */
import * as Schema from "effect/Schema"
import { Command } from "../schema/Inbox.js"
import { canonical } from "../schema/Json.js"

/** The schema's encoder of a command. */
export const encodeCommand = Schema.encodeSync(Command)

/** The fields of a `message` or `steer` whose encoded form is the value itself (strings, a boolean). */
const plainFields: ReadonlySet<string> = new Set(["_tag", "inputId", "text", "source", "excludeFromAnalytics"])

/**
 * A command as the inbox stores it (canonical JSON). A message or steer of
 * plain fields only (no run options: the turn's hot case) is its own encoded
 * form, written out without the schema's encoder; any other field, present
 * now or added to the schema later, takes the encoder. A field whose value is
 * `undefined` is absent from canonical text either way (`Sessions.send`
 * builds every message with `run`, mostly undefined), so it does not count.
 * test/layers/sql/SqlRows.test.ts holds both ways to the same text.
 */
export const commandText = (command: Command): string => {
  if (command._tag === "message" || command._tag === "steer") {
    for (const key in command) {
      if (!plainFields.has(key) && (command as unknown as Record<string, unknown>)[key] !== undefined) {
        return canonical(encodeCommand(command))
      }
    }
    return canonical(command)
  }
  return canonical(encodeCommand(command))
}
