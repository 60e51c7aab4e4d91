/**
 * The wire protocol for other languages: a JSON Schema of every message
 * payload, log record and session event, derived from the Effect schemas the
 * daemon and the clients decode with (`JSONSchema.make`, never written by
 * hand), and TypeScript declarations generated from those JSON Schemas.
 * `troupe protocol schema --out DIR` and `troupe protocol types --out DIR`
 * write them.
 *
 * The schemas describe the encoded form, as it travels in a frame's CBOR
 * payload (or as JSON). Objects allow properties they do not list: decoders
 * ignore unknown fields (PROTOCOL.md), so a newer peer's extra field is not
 * an error.
 *
 * @since 0.1.0
 */
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import * as Handshake from "../protocol/Handshake.js"
import * as Messages from "../protocol/Messages.js"
import * as ProtocolError from "../protocol/ProtocolError.js"
import * as Event from "../schema/Event.js"
import * as Record from "../schema/Record.js"

/** Which way a message goes: a request (or stream open), its answer, or a frame of a stream. */
export type Direction = "request" | "answer"

/** One message type's payloads. */
export interface MessageEntry {
  readonly type: string
  readonly request?: Schema.Schema.Any
  readonly answer?: Schema.Schema.Any
}

/**
 * `core.ready`'s clock readings are unsigned 64-bit integers: CBOR carries
 * them as integers (bigints past 2^53), which JSON Schema calls `integer`.
 * The schema is `Handshake.Ready` itself, with that said of its u64 fields.
 */
const ReadyOnTheWire = Schema.Struct(
  Object.fromEntries(
    Object.entries(Handshake.Ready.fields).map(([name, field]) => [
      name,
      field === Handshake.U64
        ? Handshake.U64.annotations({ jsonSchema: { type: "integer", minimum: 0, description: "an unsigned 64-bit integer" } })
        : field
    ])
  )
).annotations({ identifier: "Ready" })

const T = Messages.Type

/** Every message type (PROTOCOL.md, "Message types") and the payload schema each direction carries. */
export const messages: ReadonlyArray<MessageEntry> = [
  { type: T.ping, request: Messages.Empty },
  { type: T.pong, answer: Messages.Empty },
  { type: T.shutdown, request: Messages.Empty },
  { type: T.error, answer: ProtocolError.ErrorPayload },
  { type: T.ready, answer: ReadyOnTheWire },
  { type: T.hello, request: Messages.AuthHello },
  { type: T.welcome, answer: Messages.AuthWelcome },
  { type: T.agentList, request: Messages.Empty },
  { type: T.agentPage, answer: Messages.AgentPage },
  { type: T.sessionCreate, request: Messages.SessionCreate },
  { type: T.sessionCreated, answer: Messages.SessionCreated },
  { type: T.sessionGet, request: Messages.SessionRef },
  { type: T.sessionSummary, answer: Messages.SessionSummary },
  { type: T.sessionList, request: Messages.SessionList },
  { type: T.sessionPage, answer: Messages.SessionPage },
  { type: T.sessionSend, request: Messages.SessionSend },
  { type: T.sessionAccepted, answer: Messages.SessionAccepted },
  { type: T.sessionInterrupt, request: Messages.SessionInterrupt },
  { type: T.sessionInterrupted, answer: Messages.SessionInterrupted },
  { type: T.sessionRename, request: Messages.SessionRename },
  { type: T.sessionArchive, request: Messages.SessionArchive },
  { type: T.sessionClose, request: Messages.SessionRef },
  // The request and its answer share the type: the request names the session, the answer is its snapshot.
  { type: T.sessionSnapshot, request: Messages.SessionRef, answer: Messages.SessionSnapshot },
  { type: T.sessionEvents, request: Messages.SessionEvents },
  { type: T.sessionEvent, answer: Messages.SessionEventFrame },
  { type: T.sessionEventsEnd, answer: Messages.SessionEventsEnd },
  { type: T.sessionEventsCancel, request: Messages.Empty },
  { type: T.callbackProvide, request: Messages.CallbackProvide },
  { type: T.callbackOpen, answer: Messages.CallbackOpen },
  { type: T.callbackProvideEnd, answer: Messages.CallbackProvideEnd },
  { type: T.callbackProvideCancel, request: Messages.Empty },
  { type: T.callbackAnswer, request: Messages.CallbackAnswer },
  { type: T.callbackAccepted, answer: Messages.Empty },
  { type: T.sessionChildren, request: Messages.SessionChildren },
  { type: T.sessionChildrenPage, answer: Messages.SessionChildrenPage },
  // As `session.snapshot`: the answer has the request's name.
  { type: T.sessionTree, request: Messages.SessionTreeRequest, answer: Messages.SessionTree }
]

/** Every log record body, by its tag, and the unions and envelopes around them. */
export const records: ReadonlyArray<readonly [name: string, schema: Schema.Schema.Any]> = [
  ...Record.RecordBody.members.map((member) => [member._tag, member] as const),
  ["RecordBody", Record.RecordBody],
  ["LogRecord", Record.LogRecord]
]

/** Every session event, by its tag, and their union. */
export const events: ReadonlyArray<readonly [name: string, schema: Schema.Schema.Any]> = [
  ...Event.SessionEvent.members.map((member) => [member._tag, member] as const),
  ["SessionEvent", Event.SessionEvent]
]

/** A JSON Schema document. */
export type JsonSchema = { readonly [key: string]: unknown }

/** A JSON Schema whose objects allow properties they do not list (`JSONSchema.make` forbids them). */
const allowUnknownFields = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(allowUnknownFields)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(
    Object.entries(value).filter(([key, field]) => !(key === "additionalProperties" && field === false)).map((
      [key, field]
    ) => [key, allowUnknownFields(field)])
  )
}

/**
 * The JSON Schema of an Effect schema's encoded form, self-contained (its own
 * `$defs`), in draft 2020-12: the draft whose `$schema` says `$defs` (draft-07
 * named them `definitions`).
 */
export const jsonSchemaOf = (schema: Schema.Schema.Any): JsonSchema =>
  allowUnknownFields(JSONSchema.make(schema as Schema.Schema<unknown, unknown, never>, { target: "jsonSchema2020-12" })) as JsonSchema

/** The file a message payload's schema is written to: `messages/<type>.<direction>.json`. */
export const messageFile = (type: string, direction: Direction): string => `messages/${type}.${direction}.json`

/** Every schema file to write, by its path under the output directory, with `index.json` listing them. */
export const schemaFiles = (): ReadonlyMap<string, JsonSchema> => {
  const files = new Map<string, JsonSchema>()
  const index: { messages: Record<string, Partial<Record<Direction, string>>>; records: Record<string, string>; events: Record<string, string> } = {
    messages: {},
    records: {},
    events: {}
  }
  for (const entry of messages) {
    const sides: Partial<Record<Direction, string>> = {}
    for (const direction of ["request", "answer"] as const) {
      const schema = entry[direction]
      if (schema === undefined) continue
      const path = messageFile(entry.type, direction)
      files.set(path, { $id: path, title: `${entry.type} (${direction})`, ...jsonSchemaOf(schema) })
      sides[direction] = path
    }
    index.messages[entry.type] = sides
  }
  for (const [kind, list] of [["records", records], ["events", events]] as const) {
    for (const [name, schema] of list) {
      const path = `${kind}/${name}.json`
      files.set(path, { $id: path, title: name, ...jsonSchemaOf(schema) })
      index[kind][name] = path
    }
  }
  files.set("index.json", index)
  return files
}

// ---------------------------------------------------------------------------
// TypeScript declarations, generated from the JSON Schemas.

/** A TypeScript name in PascalCase from a dotted, slashed or snake_case name. */
const typeName = (key: string): string =>
  key.replace(/^troupe\//, "").split(/[^A-Za-z0-9]+/).filter((part) => part !== "").map((part) => part[0]!.toUpperCase() + part.slice(1)).join("")

/** `name` with the word `kind` after it, unless it already has that word (no `LogRecordRecord`). */
const withKind = (name: string, kind: "Record" | "Event"): string => (name.includes(kind) ? name : `${name}${kind}`)

/**
 * A TypeScript name for a `$defs` key: `troupe/Record/TurnEnded` is
 * `TurnEndedRecord`, the name the record's own declaration has, so one type
 * has one name.
 */
const defName = (key: string): string => {
  const match = /^troupe\/(Record|Event)\/(.+)$/.exec(key)
  return match === null ? typeName(key) : withKind(typeName(match[2]!), match[1] as "Record" | "Event")
}

/** The `$defs` key a `$ref` points at (a JSON Pointer: `~1` is `/`, `~0` is `~`). */
export const refKey = (ref: string): string =>
  decodeURIComponent(ref.replace(/^#\/\$defs\//, "")).replace(/~1/g, "/").replace(/~0/g, "~")

/** A TypeScript name for a message type and direction: `session.events.end` answer → `SessionEventsEndAnswer`. */
export const messageTypeName = (type: string, direction: Direction): string =>
  `${typeName(type)}${direction === "request" ? "Request" : "Answer"}`

const isIdentifier = (name: string) => /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name)

/** The TypeScript type of a JSON Schema (the subset `JSONSchema.make` writes). */
export const typeOf = (schema: unknown, indent = ""): string => {
  if (schema === true || schema === undefined) return "unknown"
  if (schema === false) return "never"
  const s = schema as JsonSchema
  if (typeof s["$ref"] === "string") return defName(refKey(s["$ref"] as string))
  if ("const" in s) return JSON.stringify(s["const"])
  if (Array.isArray(s["enum"])) return (s["enum"] as ReadonlyArray<unknown>).map((value) => JSON.stringify(value)).join(" | ")
  for (const key of ["anyOf", "oneOf"]) {
    if (Array.isArray(s[key])) return (s[key] as ReadonlyArray<unknown>).map((member) => typeOf(member, indent)).join(" | ")
  }
  if (Array.isArray(s["allOf"])) return (s["allOf"] as ReadonlyArray<unknown>).map((member) => typeOf(member, indent)).join(" & ")
  const type = s["type"]
  if (Array.isArray(type)) return type.map((one) => typeOf({ ...s, type: one }, indent)).join(" | ")
  switch (type) {
    case "string":
      return "string"
    case "number":
    case "integer":
      return type === "integer" && s["description"] === "an unsigned 64-bit integer" ? "number | bigint" : "number"
    case "boolean":
      return "boolean"
    case "null":
      return "null"
    case "array": {
      if (Array.isArray(s["prefixItems"]) || Array.isArray(s["items"])) {
        const items = (s["prefixItems"] ?? s["items"]) as ReadonlyArray<unknown>
        return `readonly [${items.map((item) => typeOf(item, indent)).join(", ")}]`
      }
      return `ReadonlyArray<${typeOf(s["items"], indent)}>`
    }
    case "object": {
      const properties = (s["properties"] ?? {}) as { readonly [key: string]: unknown }
      const required = new Set((s["required"] ?? []) as ReadonlyArray<string>)
      const inner = `${indent}  `
      const lines = Object.entries(properties).map(([name, property]) =>
        `${inner}readonly ${isIdentifier(name) ? name : JSON.stringify(name)}${required.has(name) ? "" : "?"}: ${typeOf(property, inner)}`
      )
      const additional = s["additionalProperties"]
      const patterns = s["patternProperties"] as { readonly [key: string]: unknown } | undefined
      const rest = patterns !== undefined
        ? Object.values(patterns).map((value) => typeOf(value, inner))
        : typeof additional === "object" && additional !== null
        ? [typeOf(additional, inner)]
        : lines.length === 0 && additional !== false
        ? ["unknown"]
        : []
      if (rest.length > 0) lines.push(`${inner}readonly [key: string]: ${[...new Set(rest)].join(" | ")}`)
      return lines.length === 0 ? "{}" : `{\n${lines.join("\n")}\n${indent}}`
    }
    default:
      return "unknown"
  }
}

/** One `.d.ts` text declaring every message payload, record and event, with the named definitions they share. */
export const declarations = (): string => {
  const defs = new Map<string, unknown>()
  const named: Array<string> = []
  const declare = (name: string, schema: JsonSchema, doc: string) => {
    for (const [key, def] of Object.entries((schema["$defs"] ?? {}) as { readonly [key: string]: unknown })) defs.set(key, def)
    const type = typeOf(schema)
    // A reference to a shared definition of the same name is that definition: no second declaration.
    if (type !== name) named.push(`/** ${doc} */\nexport type ${name} = ${type}\n`)
  }
  for (const entry of messages) {
    for (const direction of ["request", "answer"] as const) {
      const schema = entry[direction]
      if (schema !== undefined) declare(messageTypeName(entry.type, direction), jsonSchemaOf(schema), `The payload of \`${entry.type}\` (${direction}).`)
    }
  }
  for (const [name, schema] of records) declare(withKind(typeName(name), "Record"), jsonSchemaOf(schema), `The log record ${name}.`)
  for (const [name, schema] of events) declare(withKind(typeName(name), "Event"), jsonSchemaOf(schema), `The session event ${name}.`)
  const shared = [...defs.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, def]) => `/** ${key} */\nexport type ${defName(key)} = ${typeOf(def)}\n`)
  const types = messages.flatMap((entry) =>
    (["request", "answer"] as const).filter((direction) => entry[direction] !== undefined).map((direction) =>
      `  readonly ${JSON.stringify(`${entry.type}.${direction}`)}: ${messageTypeName(entry.type, direction)}`
    )
  )
  return [
    "// The troupe wire protocol: every message payload, log record and session event, as TypeScript",
    "// types of their encoded form. Generated by `troupe protocol types` from the JSON Schemas that",
    "// `troupe protocol schema` writes (themselves derived from troupe's Effect schemas): do not edit.",
    "",
    ...shared,
    ...named,
    "/** Every message payload, by `<type>.<request|answer>`. */",
    `export interface Payloads {\n${types.join("\n")}\n}`,
    ""
  ].join("\n")
}
