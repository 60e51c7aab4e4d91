/**
 * The typed HTTP client (`HttpSessionClient`, `HttpPromiseClient`) against
 * an in-process daemon on memory: every endpoint through the client (the
 * callback provider stream too), with
 * problem answers as `ServerError`s of the socket's kinds; an event stream
 * whose connection is cut mid-event resumes by `Last-Event-ID` and delivers
 * every event exactly once; a record kind and a field this client does not
 * know pass through.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Fiber, Option, Stream } from "effect"
import { type AddressInfo, createServer } from "node:net"
import * as ForwardCompatible from "../../src/client/ForwardCompatible.js"
import * as HttpPromiseClient from "../../src/client/HttpPromiseClient.js"
import * as HttpSessionClient from "../../src/client/HttpSessionClient.js"
import type * as SessionClient from "../../src/client/SessionClient.js"
import type { SessionId } from "../../src/schema/Ids.js"
import * as H from "./harness.js"

const MISSING = "ses_00000000000000000000000000" as SessionId

/** The durable cursors of frames, in order. */
const cursorsOf = (frames: Iterable<SessionClient.EventFrame>) =>
  Array.from(frames).flatMap((frame) => (frame.cursor === undefined ? [] : [frame.cursor]))

const kindOf = (error: unknown) => (error as { readonly _tag: string; readonly kind?: string }).kind ?? (error as { _tag: string })._tag

describe("HttpSessionClient", () => {
  it.scopedLive("drives every endpoint of a session, its failures the socket's kinds", () =>
    Effect.gen(function*() {
      const d = yield* H.start()
      const client = yield* HttpSessionClient.make(d.url, { token: H.TOKEN_A })
      assert.deepStrictEqual((yield* client.agents).map((a) => a.name), ["echo", "worker"])
      const session = yield* client.create({ agent: "worker", title: "first", idempotencyKey: "k1" })
      assert.strictEqual((yield* client.create({ agent: "worker", title: "first", idempotencyKey: "k1" })).id, session.id)
      assert.deepStrictEqual((yield* client.list({ scope: "roots", limit: 10 })).items.map((s) => s.id), [session.id])
      assert.strictEqual((yield* client.get(session.id)).title, "first")
      assert.strictEqual((yield* client.rename(session.id, "renamed")).title, "renamed")
      assert.isTrue((yield* client.archive(session.id, true)).archived)
      assert.deepStrictEqual((yield* client.list()).items, [])
      const both = yield* client.update(session.id, { title: "both", archived: false })
      assert.deepStrictEqual([both.title, both.archived], ["both", false])

      // A turn that waits for an approval: seen on the live stream, listed, answered, awaited.
      const sent = yield* client.send(session.id, { text: "deploy it", inputId: "m1" })
      assert.strictEqual(sent.inputId, "m1")
      const opened = yield* client.events(session.id).pipe(
        Stream.filter((frame) => frame.event._tag === "durable" && frame.event.record._tag === "callback_opened"),
        Stream.runHead
      )
      assert.isTrue(opened._tag === "Some")
      const pending = yield* client.callbacks(session.id)
      assert.strictEqual(pending.length, 1)
      const running = yield* client.awaitTurn(session.id, sent.turnId!)
      assert.deepStrictEqual(running, { status: "running" })
      // A provider on the callback stream is offered the open approval and approves it.
      const offered: Array<string> = []
      const provider = yield* client.provideCallbacks(session.id, ["approval"], (callback) =>
        Effect.sync(() => {
          offered.push(callback.callbackId)
          return Option.some({ decision: "approve" })
        })).pipe(Effect.fork)
      const ended = yield* client.awaitTurn(session.id, sent.turnId!, { wait: 10 })
      assert.isTrue("turn" in ended && ended.turn.outcome === "completed" && ended.turn.output === "done")
      yield* Fiber.interrupt(provider)
      assert.deepStrictEqual(offered, [pending[0]!.callbackId])
      const stale = yield* Effect.flip(client.answerCallback(session.id, { callbackId: pending[0]!.callbackId, result: { decision: "deny" } }))
      assert.strictEqual(kindOf(stale), "stale_callback")

      const snapshot = yield* client.snapshot(session.id)
      const replay = yield* Stream.runCollect(client.events(session.id, { follow: false }))
      assert.deepStrictEqual(cursorsOf(replay), Array.from({ length: snapshot.cursor }, (_, i) => i + 1))
      assert.deepStrictEqual((yield* client.children(session.id)).items, [])
      const tree = yield* client.tree(session.id)
      assert.deepStrictEqual([tree.root.id, tree.nodes.length], [session.id, 0])
      assert.strictEqual((yield* client.interrupt(session.id, sent.turnId!)).outcome !== undefined, true)
      assert.strictEqual((yield* client.close(session.id)).status, "closed")

      // Problems are ServerErrors by kind, as core.error is on the socket.
      assert.strictEqual(kindOf(yield* Effect.flip(client.send(session.id, { text: "late" }))), "session_closed")
      assert.strictEqual(kindOf(yield* Effect.flip(client.send(session.id, { text: "other", inputId: "m1" }))), "conflict")
      assert.strictEqual(kindOf(yield* Effect.flip(client.get(MISSING))), "not_found")
      assert.strictEqual(kindOf(yield* Effect.flip(Stream.runDrain(client.events(MISSING)))), "not_found")
      const other = yield* HttpSessionClient.make(d.url, { token: H.TOKEN_B })
      assert.strictEqual(kindOf(yield* Effect.flip(other.get(session.id))), "not_found", "another workspace's session is missing")
      const stranger = yield* HttpSessionClient.make(d.url, { token: "nobody" })
      assert.strictEqual(kindOf(yield* Effect.flip(stranger.list())), "unauthenticated")
      const closed = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const server = createServer().listen(0, "127.0.0.1", () => {
            const { port } = server.address() as AddressInfo
            server.close(() => resolve(port))
          })
        })
      )
      const nowhere = yield* HttpSessionClient.make(`http://127.0.0.1:${closed}`, { reconnect: false })
      const unreachable = yield* Effect.flip(nowhere.list())
      assert.deepStrictEqual([unreachable._tag, (unreachable as { reason?: string }).reason], ["ConnectError", "ECONNREFUSED"])

      // The Promise form: the same client, rejecting with the typed error itself.
      const promised = yield* Effect.promise(() => HttpPromiseClient.connect(d.url, { token: H.TOKEN_A }))
      const again = yield* Effect.promise(() => promised.create({ agent: "echo" }))
      const accepted = yield* Effect.promise(() => promised.send(again.id, { text: "hi" }))
      const turn = yield* Effect.promise(() => promised.awaitTurn(again.id, accepted.turnId!, { wait: 10 }))
      assert.isTrue("turn" in turn && turn.turn.output === "echo: hi")
      const seen: Array<number> = []
      for (const frame of yield* Effect.promise(async () => {
        const frames = []
        for await (const frame of await promised.events(again.id, { follow: false })) frames.push(frame)
        return frames
      })) if (frame.cursor !== undefined) seen.push(frame.cursor)
      assert.deepStrictEqual(seen, Array.from({ length: (yield* client.snapshot(again.id)).cursor }, (_, i) => i + 1))
      const rejected = yield* Effect.promise(() => promised.get(MISSING).then(() => undefined, (error: unknown) => error))
      assert.strictEqual(kindOf(rejected), "not_found")
    }), 60_000)

  it.scopedLive("resumes an event stream cut mid-event from its last cursor: every event exactly once", () =>
    Effect.gen(function*() {
      const d = yield* H.start()
      const requests: Array<{ readonly lastEventId: string | null }> = []
      let cuts = 0
      // The first event stream is cut in the middle of its third event (in the replay).
      const fetch: typeof globalThis.fetch = async (input, init) => {
        const response = await globalThis.fetch(input, init)
        if (!String(input).includes("/events")) return response
        requests.push({ lastEventId: new Headers(init?.headers).get("last-event-id") })
        if (cuts++ > 0 || response.body === null) return response
        const reader = response.body.getReader()
        let passed = ""
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            const { done, value } = await reader.read()
            if (done) return controller.close()
            const text = new TextDecoder().decode(value)
            // Where the event of cursor 2 ends, in everything passed so far and this chunk (a `: ping` may come first).
            const all = passed + text
            const two = all.search(/(^|\n)id: 2\n/)
            const second = two < 0 ? -1 : all.indexOf("\n\n", two + 1)
            if (second < 0 || second + 6 > all.length) {
              passed = all
              return controller.enqueue(value)
            }
            // Up to cursor 2, then four bytes of the next event: the drop leaves a partial event behind.
            controller.enqueue(new TextEncoder().encode(all.slice(passed.length, second + 6)))
            await reader.cancel()
            controller.error(new Error("connection reset"))
          }
        })
        return new Response(body, { status: response.status, headers: response.headers })
      }
      const client = yield* HttpSessionClient.make(d.url, { token: H.TOKEN_A, fetch, reconnect: { initialDelay: "10 millis" } })
      const session = yield* client.create({ agent: "echo" })
      const first = yield* client.send(session.id, { text: "one" })
      yield* client.awaitTurn(session.id, first.turnId!, { wait: 10 })
      // Following: the replay of the first turn is cut; the second turn starts once the stream has delivered.
      const delivered = yield* Deferred.make<void>()
      const collected = yield* client.events(session.id).pipe(
        Stream.tap(() => Deferred.succeed(delivered, undefined)),
        Stream.takeUntil((frame) => frame.event._tag === "durable" && frame.event.record._tag === "turn_ended" && frame.event.record.turnId !== first.turnId),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(delivered)
      const second = yield* client.send(session.id, { text: "two" })
      const frames = Chunk.toReadonlyArray(yield* collected)
      const head = (yield* client.snapshot(session.id)).cursor
      assert.deepStrictEqual(cursorsOf(frames), Array.from({ length: head }, (_, i) => i + 1), "no gap, no duplicate")
      assert.isTrue(frames.some((f) => f.event._tag === "durable" && f.event.record._tag === "turn_ended" && f.event.record.turnId === second.turnId))
      assert.strictEqual(requests.length, 2, "one reconnect")
      assert.strictEqual(requests[0]!.lastEventId, null)
      const resumedAt = Number(requests[1]!.lastEventId)
      assert.strictEqual(resumedAt, 2, "the resume names the last cursor delivered")
    }), 60_000)

  it.scopedLive("passes a record kind and fields it does not know through as Unknown, and goes on", () =>
    Effect.gen(function*() {
      const d = yield* H.start()
      // A newer daemon: a record of a new kind before the end, and a new field in every record.
      const fetch: typeof globalThis.fetch = async (input, init) => {
        const response = await globalThis.fetch(input, init)
        if (!String(input).includes("/events")) return response
        const text = await response.text()
        const sessionId = /"sessionId":"([^"]+)"/.exec(text)![1]
        const future = `id: 999\nevent: sandbox_snapshot\ndata: ${JSON.stringify({
          cursor: 999,
          event: { _tag: "durable", sessionId, cursor: 999, at: 1, record: { _tag: "sandbox_snapshot", bytes: 4096 } }
        })}\n\n`
        const newer = text.replaceAll("\"record\":{", "\"record\":{\"traceId\":\"t-1\",").replace("event: end", `${future.slice(0, -2)}\n\nevent: end`)
        return new Response(newer, { status: response.status, headers: response.headers })
      }
      const client = yield* HttpSessionClient.make(d.url, { token: H.TOKEN_A, fetch })
      const session = yield* client.create({ agent: "echo" })
      const sent = yield* client.send(session.id, { text: "hello" })
      yield* client.awaitTurn(session.id, sent.turnId!, { wait: 10 })
      const frames = Chunk.toReadonlyArray(yield* Stream.runCollect(client.events(session.id, { follow: false })))
      const unknown = frames.filter((frame) => ForwardCompatible.isUnknown(frame.event))
      assert.strictEqual(unknown.length, 1)
      const event = unknown[0]!.event as ForwardCompatible.Unknown
      assert.deepStrictEqual([event.kind, event.cursor, unknown[0]!.cursor], ["sandbox_snapshot", 999, 999])
      const known = frames.filter((frame) => !ForwardCompatible.isUnknown(frame.event))
      assert.isTrue(known.some((f) => f.event._tag === "durable" && f.event.record._tag === "turn_ended"), "known records read despite the new field")
      assert.strictEqual(frames.at(-1)!.cursor, 999)
    }), 60_000)
})
