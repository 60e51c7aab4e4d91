/**
 * Deep JSON handed to the client: every method that takes JSON (`create`'s
 * metadata, `answerCallback`'s result, which a provider's answers go through
 * too; in the Effect and the Promise API) refuses a value nested deeper than the
 * server's 256 levels with a typed `InvalidInput` naming the limit, before
 * anything is sent, and the client (and the process) carry on. Nesting at the
 * limit still goes through the codec the server reads with.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as AgentClient from "../../src/client/AgentClient.js"
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

const assertTooDeep = (error: unknown) => {
  assert.instanceOf(error, InvalidInput)
  assert.include((error as InvalidInput).reason, "256")
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
      // One level past the limit, counting the payload's own map.
      assertTooDeep(yield* Effect.flip(client.create({ agent: "worker", metadata: { m: nested(255) } })))
      assert.strictEqual(sent(), 0)

      yield* client.ping
      assert.strictEqual(sent(), 1)
    }))

  it.scopedLive("the Promise API rejects with the same InvalidInput, never a RangeError", () =>
    Effect.gen(function*() {
      const { path } = yield* H.testDaemon()
      const client = yield* Effect.acquireRelease(
        Effect.promise(() => SessionClient.connectPromise(path, { timeout: "5 seconds" })),
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

  it("the client's check is the server's: nesting at the limit is read, one level more is refused", () => {
    // The payload map is level 1, so metadata values may nest 254 more maps below `m`'s.
    const atLimit = { metadata: { m: nested(254) } }
    const beyond = { metadata: { m: nested(255) } }
    assert.isFalse(Cbor.tooDeep(atLimit))
    assert.isTrue(Cbor.tooDeep(beyond))
    const body = Either.getOrThrow(Envelope.encodeBody("session.create", atLimit))
    assert.isTrue(Either.isRight(Envelope.decodeBody(body)))
    // The server's decoder draws the line at the same place: 256 one-entry maps are read, 257 are not.
    const maps = (n: number) => Buffer.concat([...Array.from({ length: n }, () => Buffer.from([0xa1, 0x61, 0x61])), Buffer.from([0x01])])
    assert.isUndefined(Cbor.validate(maps(256)))
    assert.strictEqual(Cbor.validate(maps(257)), "nesting deeper than 256")
    assert.isTrue(Either.isLeft(Envelope.encodeBody("session.create", beyond)))
  })

  it("the CBOR encoder refuses a deep or cyclic value as an error value, on server and client alike", () => {
    assert.deepStrictEqual(Cbor.encode(nestedArrays(100_000)), Either.left("nesting deeper than 256"))
    const cyclic: Array<unknown> = []
    cyclic.push(cyclic)
    assert.deepStrictEqual(Cbor.encode(cyclic), Either.left("nesting deeper than 256"))
    assert.isTrue(Either.isLeft(Envelope.encodeBody("session.event", { event: nested(10_000) })))
  })
})
