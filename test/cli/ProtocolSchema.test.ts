/**
 * `troupe protocol schema` and `troupe protocol types`: the JSON Schemas are
 * checked against real frames captured from a session exchange with a
 * running `troupe serve` over its socket (every request sent and every frame
 * received: the handshake's `core.ready`, answers, a stream of events and its
 * end, an error), with a small validator for the subset `JSONSchema.make`
 * writes (src/schema/JsonSchemaValidator.ts, which refuses keywords it does not
 * know). A frame made wrong on purpose must fail. The TypeScript declarations
 * compile under `strict` and type a payload as the schema does.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Console, Effect, Either, Option } from "effect"
import { spawnSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Main from "../../src/cli/Main.js"
import * as ProtocolSchema from "../../src/cli/ProtocolSchema.js"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as Envelope from "../../src/protocol/Envelope.js"
import * as Frame from "../../src/protocol/Frame.js"
import * as Messages from "../../src/protocol/Messages.js"
import { show, validate } from "../../src/schema/JsonSchemaValidator.js"
import { envFor, serve, tempDir } from "./harness.js"

const repo = fileURLToPath(new URL("../..", import.meta.url))

/** Runs the program in process, its output captured. */
const cli = (...args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const capture = (...parts: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(parts.map(String).join(" ")))
    const code = yield* Effect.consoleWith((base) =>
      Effect.withConsole(Main.main(["node", "troupe", ...args]), { ...base, log: capture, error: capture } as Console.Console)
    )
    return { code, output: out.join("\n") }
  })

interface Index {
  readonly messages: Record<string, { readonly request?: string; readonly answer?: string }>
  readonly records: Record<string, string>
  readonly events: Record<string, string>
}

describe("troupe protocol", () => {
  it("the export holds the whole message table, each way a type goes; its $schema is the draft of its $defs; no stutter names", () => {
    const files = ProtocolSchema.schemaFiles()
    const index = files.get("index.json") as unknown as Index
    assert.sameMembers(Object.keys(index.messages), Object.values(Messages.Type))
    for (const [type, use] of Object.entries(Messages.usage)) {
      if (use.client !== undefined) assert.isDefined(index.messages[type]?.request, `${type} (request)`)
      if (use.server !== undefined) assert.isDefined(index.messages[type]?.answer, `${type} (answer)`)
    }
    for (const [path, schema] of files) {
      if (path === "index.json") continue
      // `$defs` is 2019-09 and later: a draft-07 `$schema` would tell validators to ignore them.
      assert.strictEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", path)
      assert.notProperty(schema, "definitions", path)
    }
    const names = [...ProtocolSchema.declarations().matchAll(/^export type (\w+)/gm)].map((match) => match[1]!)
    assert.includeMembers(names, ["SessionChildrenRequest", "SessionChildrenPageAnswer", "SessionTreeRequest", "SessionTreeAnswer"])
    assert.includeMembers(names, ["TurnEndedRecord", "LogRecord", "SessionEvent", "DurableEvent"])
    assert.deepStrictEqual(names.filter((name, i) => names.indexOf(name) !== i), [], "each type declared once")
    assert.deepStrictEqual(names.filter((name) => /(Event|Record)\1|^(Record|Event)(?!Body)[A-Z]/.test(name)), [], "stutter names")
  })

  it.scopedLive("the JSON Schemas validate every frame of a real session exchange, and refuse a wrong one", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const dir = join(home, "schema")
      const written = yield* cli("protocol", "schema", "--out", dir)
      assert.strictEqual(written.code, 0, written.output)
      const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as Index
      const schemaOf = (file: string) => JSON.parse(readFileSync(join(dir, file), "utf8"))
      // Every message type of the protocol has a schema for each way it goes.
      assert.includeMembers(Object.keys(index.messages), ["core.ready", "session.send", "session.event", "callback.answer"])
      assert.includeMembers(Object.keys(index.records), ["turn_ended", "operation_started", "RecordBody", "LogRecord"])
      assert.includeMembers(Object.keys(index.events), ["durable", "assistant_delta", "SessionEvent"])

      const checked: Array<string> = []
      const check = (type: string, direction: "request" | "answer", payload: unknown) => {
        const file = index.messages[type]?.[direction]
        assert.isDefined(file, `no ${direction} schema for ${type}`)
        const problems = validate(schemaOf(file!), payload)
        assert.deepStrictEqual(problems, [], `${type} (${direction}): ${show(payload)}`)
        checked.push(`${type}.${direction}`)
      }
      const decoded = (frame: Frame.RawFrame) => {
        const body = Envelope.decodeBody(frame.body)
        if (Either.isLeft(body)) throw new Error(body.left.message)
        return body.right
      }

      const socket = join(home, "d.sock")
      yield* serve(["--store", "memory", "--socket", socket], envFor(home))
      const connection = yield* AgentClient.make(socket).pipe(Effect.orDie)
      const ready = decoded({ id: 0, flags: 0, body: connection.readyBytes() })
      check(ready.t, "answer", ready.payload)

      const exchange = (type: string, payload: unknown) =>
        Effect.gen(function*() {
          check(type, "request", payload)
          const answer = decoded(yield* Effect.orDie(connection.request(0, Envelope.encodeBodyUnsafe(type, payload))))
          check(answer.t, "answer", answer.payload)
          return answer
        })

      yield* exchange("core.ping", {})
      yield* exchange("agent.list", {})
      const created = yield* exchange("session.create", { agent: "demo", title: "schema check" })
      const sessionId = (created.payload as { session: { id: string } }).session.id
      yield* exchange("session.send", { sessionId, inputId: "in-1", text: "count these words" })

      // Follow the session's events until the turn ends, then cancel the stream and read its end.
      const events = { sessionId, after: 0, volatile: true, follow: true }
      check("session.events", "request", events)
      const stream = yield* Effect.orDie(connection.stream(Frame.FLAG_SESSION_START, Envelope.encodeBodyUnsafe("session.events", events)))
      const seen: Array<string> = []
      for (;;) {
        const next = yield* Effect.orDie(stream.pull)
        if (Option.isNone(next)) break
        const body = decoded(next.value)
        check(body.t, "answer", body.payload)
        if (Frame.hasFlag(next.value.flags, Frame.FLAG_TERMINAL)) break
        if (body.t !== "session.event") continue
        const event = (body.payload as { event: { _tag: string; record?: { _tag: string } } }).event
        seen.push(event.record?._tag ?? event._tag)
        // Each event also against its own schema, and its record against the record's.
        assert.deepStrictEqual(validate(schemaOf(index.events[event._tag]!), event), [])
        if (event.record !== undefined) assert.deepStrictEqual(validate(schemaOf(index.records[event.record._tag]!), event.record), [])
        if (event.record?._tag === "turn_ended") {
          check("session.events.cancel", "request", {})
          yield* Effect.orDie(connection.send(stream.id, 0, Envelope.encodeBodyUnsafe("session.events.cancel", {})))
        }
      }
      assert.includeMembers(seen, ["session_created", "turn_started", "operation_started", "operation_completed", "turn_ended"])

      yield* exchange("session.snapshot", { sessionId })
      yield* exchange("session.list", { scope: "roots", limit: 10 })
      yield* exchange("session.get", { sessionId })
      yield* exchange("session.rename", { sessionId, title: "renamed" })
      yield* exchange("session.archive", { sessionId, archived: true })
      const refused = yield* exchange("session.get", { sessionId: "ses_00000000000000000000000000" })
      assert.strictEqual(refused.t, "core.error")
      assert.includeMembers(checked, ["core.ready.answer", "session.event.answer", "session.events.end.answer", "core.error.answer"])

      // The schemas are not vacuous: wrong frames fail.
      assert.isNotEmpty(validate(schemaOf(index.messages["session.send"]!.request!), { sessionId, inputId: "in-2" }))
      assert.isNotEmpty(validate(schemaOf(index.messages["session.created"]!.answer!), { session: { ...(created.payload as { session: object }).session, id: 42 } }))
      assert.isNotEmpty(validate(schemaOf(index.messages["session.send"]!.request!), { sessionId: "not-an-id", inputId: "x", text: "" }))
    }), 60_000)

  it.scoped("the TypeScript declarations compile under strict and type payloads as the schemas do", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const written = yield* cli("protocol", "types", "--out", home)
      assert.strictEqual(written.code, 0, written.output)
      const declarations = readFileSync(join(home, "troupe-protocol.d.ts"), "utf8")
      assert.include(declarations, "export type SessionSendRequest = {")
      assert.include(declarations, "export interface Payloads {")
      writeFileSync(join(home, "use.ts"), [
        `import type { Payloads, TurnEndedRecord } from "./troupe-protocol.js"`,
        `export const send: Payloads["session.send.request"] = { sessionId: "ses_01J00000000000000000000000", inputId: "a", text: "hi" }`,
        `// @ts-expect-error text is required`,
        `export const missing: Payloads["session.send.request"] = { sessionId: "ses_01J00000000000000000000000", inputId: "a" }`,
        `export const outcome = (record: TurnEndedRecord): "completed" | "failed" | "interrupted" => record.outcome`,
        ``
      ].join("\n"))
      // No @types at all: the declarations stand on their own.
      writeFileSync(join(home, "tsconfig.json"), JSON.stringify({
        compilerOptions: {
          noEmit: true, strict: true, exactOptionalPropertyTypes: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", types: []
        },
        files: ["use.ts"]
      }))
      const tsc = spawnSync(process.execPath, [join(repo, "node_modules", "typescript", "bin", "tsc"), "-p", join(home, "tsconfig.json")], {
        encoding: "utf8"
      })
      assert.strictEqual(tsc.status, 0, tsc.stdout + tsc.stderr)
    }), 60_000)
})


