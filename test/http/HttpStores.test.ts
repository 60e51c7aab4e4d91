/**
 * The HTTP API over shared stores: the event stream and callback answers on
 * PostgreSQL (`TROUPE_TEST_PG_URL`; skipped with a printed reason outside CI
 * when the server does not answer), and an event stream resumed on a second
 * daemon over the same SQLite file while the first one drives the session:
 * every event exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Ref } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type * as Sse from "../../src/http/Sse.js"
import { availability, freshSchema } from "../support/postgres.js"
import * as H from "./harness.js"

const pgAvailable = await availability()

const cursors = (events: ReadonlyArray<Sse.Event>) => events.filter((e) => e.id !== undefined).map((e) => Number(e.id))
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1)

describe.skipIf(!pgAvailable.run)("the HTTP API on PostgreSQL", () => {
  it.scopedLive("events stream live and resume by Last-Event-ID; of concurrent answers exactly one is accepted", () =>
    Effect.gen(function*() {
      const { drop, url } = yield* Effect.promise(freshSchema)
      yield* Effect.addFinalizer(() => Effect.promise(drop))
      const d = yield* H.start({ _tag: "pg", url })
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "worker" } })).body.session.id
      // A live stream opened before anything happens, read until the turn ends.
      const live = yield* Effect.fork(H.readEvents(d, `/v1/sessions/${id}/events`, { until: (e) => e.event === "turn_ended" }))
      const provider = yield* Effect.fork(H.readEvents(d, `/v1/sessions/${id}/callbacks/stream?kinds=approval`, {
        until: (e) => e.event === "callback"
      }))
      const sent = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "deploy it" } })
      assert.strictEqual(sent.status, 202)
      const callback = JSON.parse((yield* Fiber.join(provider)).events.find((e) => e.event === "callback")!.data).callback
      assert.strictEqual(callback.kind, "approval")
      const answers = yield* Effect.forEach(
        Array.from({ length: 8 }),
        () => H.request(d, "POST", `/v1/sessions/${id}/callbacks/${callback.callbackId}/answer`, { body: { result: { decision: "approve" } } }),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(answers.map((a) => a.status).sort(), [200, 409, 409, 409, 409, 409, 409, 409])
      assert.isTrue(answers.every((a) => a.status === 200 || a.body.kind === "stale_callback"))
      const turn = yield* H.request(d, "GET", `/v1/sessions/${id}/turns/${sent.body.turnId}?wait=20`)
      assert.strictEqual(turn.body.turn.output, "done")
      const seen = yield* Fiber.join(live)
      const ended = cursors(seen.events)
      assert.deepStrictEqual(ended, upTo(ended.length), "live: every event once, in order")
      assert.strictEqual(seen.events.filter((e) => e.event === "callback_resolved").length, 1)
      // Resume from the middle: exactly the rest, then the replay's end at the head.
      const head: number = (yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session.headSeq
      const from = Math.floor(head / 2)
      const resumed = yield* H.readEvents(d, `/v1/sessions/${id}/events?follow=false&after=1`, { headers: { "last-event-id": String(from) } })
      assert.deepStrictEqual(cursors(resumed.events), upTo(head).slice(from))
      assert.deepStrictEqual(JSON.parse(resumed.events.at(-1)!.data), { reason: "replayed", cursor: head })
      assert.strictEqual(yield* Ref.get(d.runs), 1, "the tool ran once")
    }), 60_000)
})

describe("the HTTP API over one SQLite file", () => {
  it.scopedLive("an event stream read on daemon A resumes on daemon B while A drives the session: every event exactly once", () =>
    Effect.gen(function*() {
      const store: H.Store = { _tag: "sqlite", filename: join(mkdtempSync(join(tmpdir(), "tr-http-2d-")), "troupe.db") }
      const a = yield* H.start(store)
      const b = yield* H.start(store)
      const id: string = (yield* H.request(a, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const first = yield* H.request(a, "POST", `/v1/sessions/${id}/messages`, { body: { text: "one" } })
      yield* H.request(a, "GET", `/v1/sessions/${id}/turns/${first.body.turnId}?wait=20`)
      // A's stream, left after three events: its last id is where B resumes.
      let n = 0
      const onA = yield* H.readEvents(a, `/v1/sessions/${id}/events`, { until: (e) => e.id !== undefined && ++n === 3 })
      assert.deepStrictEqual(cursors(onA.events), [1, 2, 3])
      const onB = yield* Effect.fork(H.readEvents(b, `/v1/sessions/${id}/events`, {
        headers: { "last-event-id": "3" },
        until: (e) => e.event === "turn_ended" && JSON.parse(e.data).event.record.output === "echo: two"
      }))
      // B is live (it has replayed up to the head) before A writes the second turn.
      const headBefore: number = (yield* H.request(b, "GET", `/v1/sessions/${id}`)).body.session.headSeq
      while ((yield* b.listener.openStreams) === 0) yield* Effect.sleep("10 millis")
      const second = yield* H.request(a, "POST", `/v1/sessions/${id}/messages`, { body: { text: "two" } })
      assert.strictEqual((yield* H.request(a, "GET", `/v1/sessions/${id}/turns/${second.body.turnId}?wait=20`)).body.turn.output, "echo: two")
      const read = yield* Fiber.join(onB).pipe(Effect.timeout("20 seconds"))
      const head: number = (yield* H.request(a, "GET", `/v1/sessions/${id}`)).body.session.headSeq
      assert.isAbove(head, headBefore, "the second turn was written after B's stream opened")
      assert.deepStrictEqual([...cursors(onA.events), ...cursors(read.events)], upTo(head))
    }), 60_000)
})
