/**
 * Deep JSON handed to the client: every method that takes JSON (`create`'s
 * metadata, `answerCallback`'s result, which a provider's answers go through
 * too; in the Effect and the Promise API) refuses a value nested deeper than the
 * server's limits with a typed `InvalidInput` naming the limit, before
 * anything is sent, and the client (and the process) carry on. The limit for
 * JSON values is 240 levels (`Cbor.MAX_JSON_DEPTH`), 16 below the wire's 256
 * (`Cbor.MAX_DEPTH`), so a value the daemon accepted also fits every answer
 * and event that carries it back: a session whose metadata nests at the
 * limit is created, read, listed and replayed over the wire.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Stream } from "effect"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as PromiseClient from "../../src/client/PromiseClient.js"
import * as SessionClient from "../../src/client/SessionClient.js"
import * as Cbor from "../../src/protocol/Cbor.js"
import * as Envelope from "../../src/protocol/Envelope.js"
import { InvalidInput } from "../../src/schema/Errors.js"
import { makeCallbackId, makeSessionId } from "../../src/schema/Ids.js"
import * as H from "../server/harness.js"

/** `{ a: { a: … { a: leaf } } }`, `depth` maps deep, built without recursion. */
const nested = (depth: number, leaf: unknown = 1): unknown => {
  let value: unknown = leaf
  for (let i = 0; i < depth; i++) value = { a: value }
  return value
}

/** `[[…[leaf]…]]`, `depth` arrays deep. */
const nestedArrays = (depth: number): unknown => {
  let value: unknown = "x"
  for (let i = 0; i < depth; i++) value = [value]
  return value
}

/** A connection that counts the frames its caller asks it to send. */
const counting = (connection: AgentClient.Connection) => {
  let sent = 0
  const counted: AgentClient.Connection = {
    ...connection,
    request: (flags, body) => Effect.suspend(() => (sent++, connection.request(flags, body))),
    stream: (flags, body) => Effect.suspend(() => (sent++, connection.stream(flags, body))),
    send: (id, flags, body) => Effect.suspend(() => (sent++, connection.send(id, flags, body)))
  }
  return { connection: counted, sent: () => sent }
}

const assertTooDeep = (error: unknown, limit = Cbor.MAX_JSON_DEPTH) => {
  assert.instanceOf(error, InvalidInput)
  assert.include((error as InvalidInput).reason, String(limit))
}

describe("deep JSON on the client", () => {
  it.scopedLive("create and answerCallback refuse it typed, send nothing, and the client carries on", () =>
    Effect.gen(function*() {
      const { path } = yield* H.testDaemon()
      const raw = yield* AgentClient.make(path, { timeout: "5 seconds" })
      const { connection, sent } = counting(raw)
      const client = SessionClient.make(connection)
      const sessionId = yield* makeSessionId
      const callbackId = yield* makeCallbackId

      assertTooDeep(yield* Effect.flip(client.create({ agent: "worker", metadata: { deep: nested(5_000) } })))
      assertTooDeep(
        yield* Effect.flip(client.answerCallback(sessionId, { callbackId, result: { output: nestedArrays(8_000) } }))
      )
      // A cycle is infinitely deep: the same error, not a hang or a stack overflow.
      const cyclic: Record<string, unknown> = {}
      cyclic["self"] = cyclic
      assertTooDeep(yield* Effect.flip(client.create({ agent: "worker", metadata: cyclic })))
      // One level past the limit.
      assertTooDeep(yield* Effect.flip(client.create({ agent: "worker", metadata: { m: nested(241) } })))
      assert.strictEqual(sent(), 0)

      yield* client.ping
      assert.strictEqual(sent(), 1)
    }))

  it.scopedLive("the Promise API rejects with the same InvalidInput, never a RangeError", () =>
    Effect.gen(function*() {
      const { path } = yield* H.testDaemon()
      const client = yield* Effect.acquireRelease(
        Effect.promise(() => PromiseClient.connect(path, { timeout: "5 seconds" })),
        (client) => Effect.promise(() => client.disconnect())
      )
      const sessionId = yield* makeSessionId
      const callbackId = yield* makeCallbackId
      const created = yield* Effect.promise(() =>
        client.create({ agent: "worker", metadata: { deep: nested(5_000) } }).then(() => undefined, (error: unknown) => error)
      )
      assertTooDeep(created)
      const answered = yield* Effect.promise(() =>
        client.answerCallback(sessionId, { callbackId, result: nestedArrays(8_000) }).then(() => undefined, (e: unknown) => e)
      )
      assertTooDeep(answered)
      yield* Effect.promise(() => client.ping())
    }))

  it.scopedLive("at the limit a value goes through and comes back in every answer and event; one level more is refused by the server too", () =>
    Effect.gen(function*() {
      const { path } = yield* H.sessionDaemon
      const client = SessionClient.make(yield* AgentClient.make(path, { timeout: "5 seconds" }))
      const atLimit = nested(Cbor.MAX_JSON_DEPTH)
      const session = yield* client.create({ agent: "worker", metadata: { m: atLimit } })
      assert.deepStrictEqual(session.metadata, { m: atLimit })
      assert.deepStrictEqual((yield* client.get(session.id)).metadata, { m: atLimit })
      assert.deepStrictEqual((yield* client.list()).items.map((item) => item.id), [session.id])
      assert.strictEqual((yield* client.snapshot(session.id)).session.id, session.id)
      const replayed = yield* Stream.runCollect(client.events(session.id, { follow: false }))
      assert.isAbove(Chunk.size(replayed), 0)

      // A raw peer that skips the client's check gets invalid_payload: the daemon holds the same line.
      const raw = yield* H.rawConnect({ path })
      const refused = yield* raw.exchange(1, 0, "session.create", { agent: "worker", metadata: { m: nested(Cbor.MAX_JSON_DEPTH + 1) } })
      assert.strictEqual((refused.payload as { kind: string }).kind, "invalid_payload")
      assert.include((refused.payload as { message: string }).message, String(Cbor.MAX_JSON_DEPTH))
    }))

  it("the wire's own line: 256 one-entry maps are read, 257 are not, and the encoder refuses what the decoder would", () => {
    const maps = (n: number) => Buffer.concat([...Array.from({ length: n }, () => Buffer.from([0xa1, 0x61, 0x61])), Buffer.from([0x01])])
    assert.isUndefined(Cbor.validate(maps(256)))
    assert.strictEqual(Cbor.validate(maps(257)), "nesting deeper than 256")
    assert.isFalse(Cbor.tooDeep(nested(256)))
    assert.isTrue(Cbor.tooDeep(nested(257)))
    assert.isTrue(Either.isRight(Envelope.encodeBody("x", nested(256))))
    assert.isTrue(Either.isLeft(Envelope.encodeBody("x", nested(257))))
  })

  it("the CBOR encoder refuses a deep or cyclic value as an error value, on server and client alike", () => {
    assert.deepStrictEqual(Cbor.encode(nestedArrays(100_000)), Either.left("nesting deeper than 256"))
    const cyclic: Array<unknown> = []
    cyclic.push(cyclic)
    assert.deepStrictEqual(Cbor.encode(cyclic), Either.left("nesting deeper than 256"))
    assert.isTrue(Either.isLeft(Envelope.encodeBody("session.event", { event: nested(10_000) })))
  })
})
