/**
 * A command's canonical text: what a store keeps to tell a repeated push of
 * the same input id (a duplicate) from another command under it (a conflict).
 * One function for every store, so they compare by the same text.
 *
 * @since 0.3.0
 */
import * as Schema from "effect/Schema"
import { Command, Message, Steer } from "../schema/Inbox.js"
import { canonical } from "../schema/Json.js"
import * as Trusted from "../schema/Trusted.js"

/** The schema's encoder of a command. */
export const encodeCommand = Schema.encodeSync(Command)

/** The schema's decoder of a command. */
export const decodeCommand = Schema.decodeUnknownSync(Command)

/**
 * The fields of a `message` or `steer` besides its tag whose encoded form is the value itself
 * (strings, a boolean), in the schema's order: written without the encoder (`commandText`) and
 * read back without the decoder (`commandOf`).
 */
const plainFields: { readonly [Tag in "message" | "steer"]: ReadonlyArray<string> } = {
  message: ["inputId", "text", "source", "excludeFromAnalytics"],
  steer: ["inputId", "text", "source"]
}

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
    const fields = plainFields[command._tag]
    for (const key in command) {
      if (key !== "_tag" && !fields.includes(key) && (command as unknown as Record<string, unknown>)[key] !== undefined) {
        return canonical(encodeCommand(command))
      }
    }
    return canonical(command)
  }
  return canonical(encodeCommand(command))
}

/**
 * A command from the canonical JSON the inbox stores (`commandText`). A message or steer of
 * plain fields only (the turn's hot case, read once per session) was validated when it was
 * admitted: it is revived without a second schema walk, with the fields decoding gives it in
 * the same order; any other command (or field) goes through the schema.
 */
export const commandOf = (text: string): Command => {
  const json = JSON.parse(text)
  const fields: ReadonlyArray<string> | undefined = json._tag === "message" || json._tag === "steer"
    ? plainFields[json._tag as "message" | "steer"]
    : undefined
  if (fields === undefined || !Object.keys(json).every((key) => key === "_tag" || fields.includes(key))) {
    return decodeCommand(json)
  }
  const props: Record<string, unknown> = {}
  for (let i = 0; i < fields.length; i++) if (json[fields[i]!] !== undefined) props[fields[i]!] = json[fields[i]!]
  return json._tag === "message" ? Trusted.make(Message, props as never) : Trusted.make(Steer, props as never)
}
