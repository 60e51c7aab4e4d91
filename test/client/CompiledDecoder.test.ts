/**
 * The compiled decoder against the schema's own: for generated events (every
 * record type, through CBOR as on the wire) and for malformed ones (keys
 * dropped, values of the wrong type, excess keys, unknown tags, bad ids,
 * inherited names, …), `make` gives what `Schema.decodeUnknownEither` gives,
 * and the compiled walk alone either gives up or gives that same value. Then
 * `SessionClient.events` end to end: a daemon that sends a malformed
 * `session.event` fails the stream with `UnexpectedAnswer`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Effect, Either, FastCheck as fc, Option, Schema, Stream } from "effect"
import { join } from "node:path"
import { isDeepStrictEqual } from "node:util"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as CompiledDecoder from "../../src/client/CompiledDecoder.js"
import * as SessionClient from "../../src/client/SessionClient.js"
import * as Cbor from "../../src/protocol/Cbor.js"
import * as Messages from "../../src/protocol/Messages.js"
import { AssistantDelta, Durable } from "../../src/schema/Event.js"
import { makeSessionId } from "../../src/schema/Ids.js"
import * as Record from "../../src/schema/Record.js"
import type { Route } from "../../src/server/Router.js"
import * as H from "../server/harness.js"

const Frame = Messages.SessionEventFrame
const full = Schema.decodeUnknownEither(Frame)
const fast = CompiledDecoder.fast(Frame)
const decode = CompiledDecoder.make(Frame)
const encode = Schema.encodeSync(Frame)

/** Through CBOR, as a payload arrives. */
const wire = (value: unknown): unknown => Either.getOrThrow(Cbor.decode(Either.getOrThrow(Cbor.encode(value))))

/** `make` agrees with the schema's decoder, and the compiled walk gives up or gives the same value. */
const agrees = (input: unknown): boolean => {
  const expected = full(input)
  const got = decode(input)
  assert.deepStrictEqual(got, expected)
  const walked = fast(input)
  if (walked !== CompiledDecoder.Miss) {
    assert.isTrue(Either.isRight(expected), "the compiled walk accepted what the schema rejects")
    if (Either.isRight(expected)) {
      assert.deepStrictEqual(walked, expected.right)
      // Same keys in the same order, and the same classes all the way down.
      assert.strictEqual(JSON.stringify(walked), JSON.stringify(expected.right))
      assert.strictEqual(Object.getPrototypeOf(walked.event), Object.getPrototypeOf(expected.right.event))
      if (walked.event._tag === "durable" && expected.right.event._tag === "durable") {
        assert.strictEqual(Object.getPrototypeOf(walked.event.record), Object.getPrototypeOf(expected.right.event.record))
        // Classes after the first of their kind are built without their constructors: the same own keys, in order.
        assert.deepStrictEqual(Reflect.ownKeys(walked.event.record), Reflect.ownKeys(expected.right.event.record))
      }
      assert.deepStrictEqual(Reflect.ownKeys(walked.event), Reflect.ownKeys(expected.right.event))
    }
  }
  return true
}

const frames = Arbitrary.make(Frame)
const encodedFrames = frames.map((frame) => wire(encode(frame)))

/** Every path to a value inside a payload, with the value. */
const paths = (value: unknown, at: ReadonlyArray<string> = []): Array<ReadonlyArray<string>> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [at]
  return [at, ...Object.entries(value).flatMap(([key, inner]) => paths(inner, [...at, key]))]
}

/** A copy of `value` with the value at `path` replaced by `f` of it (`undefined` from `f`: the key dropped). */
const edit = (value: unknown, path: ReadonlyArray<string>, f: (old: unknown) => unknown | undefined, drop: boolean): unknown => {
  if (path.length === 0) return f(value)
  const copy: { [key: string]: unknown } = { ...(value as object) }
  const [head, ...rest] = path
  if (rest.length === 0 && drop) {
    delete copy[head!]
    return copy
  }
  copy[head!] = edit(copy[head!], rest, f, drop)
  return copy
}

const junk = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.constantFrom("durable", "assistant_delta", "turn_started", "operation_completed", "ses_X", "turn_01"),
  fc.constant([]),
  fc.constant({}),
  fc.constant(new Map()),
  fc.constant(new Uint8Array([1, 2]))
)

const malformed = fc.tuple(encodedFrames, fc.nat(), junk, fc.constantFrom("replace", "drop", "excess", "inherited"))
  .map(([payload, pick, value, how]) => {
    const all = paths(payload)
    const path = all[pick % all.length]!
    switch (how) {
      case "replace":
        return edit(payload, path, () => value, false)
      case "drop":
        return path.length === 0 ? value : edit(payload, path, () => undefined, true)
      case "excess":
        return edit(payload, path, (old) =>
          typeof old === "object" && old !== null ? { ...old, excess: value } : old, false)
      case "inherited":
        // A name the object's prototype has: a schema key must be the object's own.
        return edit(payload, path, (old) =>
          typeof old === "object" && old !== null ? Object.assign(Object.create({ _tag: "durable", cursor: 1 }), old) : old, false)
    }
  })

describe("CompiledDecoder", () => {
  it("decodes generated events of every type as the schema does", () => {
    fc.assert(fc.property(encodedFrames, agrees), { numRuns: 2000 })
  })

  it("gives malformed events the schema's own ParseError, and never a value the schema would not give", () => {
    fc.assert(fc.property(malformed, agrees), { numRuns: 5000 })
  })

  it("takes the compiled walk for the events a replay streams", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const records = fc.sample(Arbitrary.make(Record.RecordBody), { numRuns: 500, seed: 42 })
      const events = [
        ...records.map((record, i) => new Durable({ sessionId, cursor: i + 1, at: 1_700_000_000_000 + i, record })),
        new AssistantDelta({ sessionId, turnId: records.find((r) => r._tag === "turn_started")!.turnId, text: "hi" })
      ]
      const tags = new Set<string>()
      for (const event of events) {
        const encoded = encode(event._tag === "durable" ? { cursor: event.cursor, event } : { event })
        const payload = wire(JSON.parse(JSON.stringify(encoded)))
        // Generated `Json` fields may hold what JSON cannot carry (`undefined`, -0, …): the daemon sends only JSON.
        if (!isDeepStrictEqual(payload, encoded)) continue
        agrees(payload)
        assert.notStrictEqual(fast(payload), CompiledDecoder.Miss, JSON.stringify(payload))
        tags.add(event._tag === "durable" ? event.record._tag : event._tag)
      }
      // Every record type went through the compiled walk.
      assert.strictEqual(tags.size, Record.RecordBody.members.length + 1)
    }).pipe(Effect.runSync))

  it("gives up, rather than guess, on what it does not model", () => {
    const payload = wire(encode(fc.sample(frames, { numRuns: 1, seed: 7 })[0]!)) as { event: object }
    for (
      const input of [
        // Not a plain object.
        new Map(Object.entries(payload)),
        Object.assign(Object.create({ inherited: true }), payload),
        // A required key missing, an optional one holding undefined.
        { event: { ...payload.event, sessionId: undefined } },
        { ...payload, cursor: "1" }
      ]
    ) {
      agrees(input)
    }
    assert.strictEqual(fast(null), CompiledDecoder.Miss)
    assert.strictEqual(fast([]), CompiledDecoder.Miss)
  })
})

/** A daemon whose `session.events` sends one good event, then `bad`. */
const sending = (bad: unknown) =>
  Effect.gen(function*() {
    const dir = yield* H.tempDir
    const path = join(dir, "agent.sock")
    const sessionId = yield* makeSessionId
    const good = wire(JSON.parse(JSON.stringify({
      cursor: 2,
      event: new Durable({ sessionId, cursor: 2, at: 1, record: new Record.Renamed({ title: "t" }) })
    })))
    const route: Route = {
      kind: "stream",
      handler: (exchange) =>
        Effect.gen(function*() {
          yield* exchange.emit({ type: Messages.Type.sessionEvent, payload: good })
          yield* exchange.emit({ type: Messages.Type.sessionEvent, payload: bad })
          return { type: Messages.Type.sessionEventsEnd, payload: { reason: "done", cursor: 3 } }
        })
    }
    yield* H.startServer({ unix: path }, H.routerOf({ [Messages.Type.sessionEvents]: route }), H.localAuth)
    const client = SessionClient.make(yield* AgentClient.make(path))
    const seen: Array<unknown> = []
    const exit = yield* Stream.runForEach(client.events(sessionId, { follow: false }), (frame) => Effect.sync(() => seen.push(frame))).pipe(
      Effect.either
    )
    return { exit, seen }
  })

describe("SessionClient.events on malformed events", () => {
  it.scopedLive("fails with UnexpectedAnswer after the events before it", () =>
    Effect.gen(function*() {
      for (
        const bad of [
          { cursor: 3, event: { _tag: "durable", sessionId: "ses_nope", cursor: 3, at: 1, record: { _tag: "renamed", title: "t" } } },
          { cursor: 3, event: { _tag: "durable", cursor: 3, at: 1, record: { _tag: "renamed", title: 1 } } },
          // A new kind passes through (test/client/ForwardCompatible.test.ts), but an event names its session.
          { cursor: 3, event: { _tag: "nope" } },
          { cursor: "3", event: null }
        ]
      ) {
        const { exit, seen } = yield* sending(bad)
        assert.strictEqual(seen.length, 1)
        assert.isTrue(Either.isLeft(exit))
        const error = Option.getOrThrow(Either.getLeft(exit))
        assert.strictEqual(error._tag, "UnexpectedAnswer")
      }
    }))
})
