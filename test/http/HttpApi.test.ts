/**
 * The HTTP API end to end over `fetch` (HTTP.md): every endpoint on the
 * memory and the SQLite runtime (one suite, run per layer), tenancy on every
 * session endpoint, idempotent retries, one winner among concurrent answers,
 * resume by Last-Event-ID, the drain's `end shutdown`, and listings with
 * each session's summary (turns, tokens, open callbacks) as its log grows.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as H from "./harness.js"

const stores: ReadonlyArray<[string, () => H.Store]> = [
  ["memory", () => ({ _tag: "memory" })],
  ["sqlite", () => ({ _tag: "sqlite", filename: join(mkdtempSync(join(tmpdir(), "tr-http-")), "troupe.db") })]
]

const MISSING = "ses_00000000000000000000000000"

describe.each(stores)("the HTTP API on %s", (_name, store) => {
  it.scopedLive("serves a whole session: create, list, get, patch, send, await, snapshot, events, children, tree, close", () =>
    Effect.gen(function*() {
      const d = yield* H.start(store())
      const created = yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo", title: "first" }, headers: { "idempotency-key": "k1" } })
      assert.strictEqual(created.status, 201)
      const id: string = created.body.session.id
      // A retry with the same key is the same session.
      const again = yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo", title: "first" }, headers: { "idempotency-key": "k1" } })
      assert.strictEqual(again.body.session.id, id)
      const listed = yield* H.request(d, "GET", "/v1/sessions?scope=roots&limit=10")
      assert.deepStrictEqual(listed.body.items.map((s: any) => s.id), [id])
      assert.strictEqual((yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session.title, "first")
      const patched = yield* H.request(d, "PATCH", `/v1/sessions/${id}`, { body: { title: "renamed", archived: true } })
      assert.strictEqual(patched.body.session.title, "renamed")
      assert.strictEqual(patched.body.session.archived, true)
      assert.strictEqual((yield* H.request(d, "GET", "/v1/sessions")).body.items.length, 0)
      assert.strictEqual((yield* H.request(d, "GET", "/v1/sessions?includeArchived=true")).body.items.length, 1)

      const sent = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "hello" }, headers: { "idempotency-key": "m1" } })
      assert.strictEqual(sent.status, 202)
      assert.strictEqual(sent.body.inputId, "m1")
      const turn = yield* H.request(d, "GET", `/v1/sessions/${id}/turns/${sent.body.turnId}?wait=10`)
      assert.strictEqual(turn.status, 200)
      assert.strictEqual(turn.body.turn.outcome, "completed")
      assert.strictEqual(turn.body.turn.output, "echo: hello")
      // The same key and text again starts nothing; the same key with other text is a conflict.
      const retry = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "hello" }, headers: { "idempotency-key": "m1" } })
      assert.strictEqual(retry.status, 202)
      const clash = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "other" }, headers: { "idempotency-key": "m1" } })
      assert.strictEqual(clash.status, 409)
      assert.strictEqual(clash.body.kind, "conflict")

      const snapshot = yield* H.request(d, "GET", `/v1/sessions/${id}/snapshot`)
      assert.strictEqual(snapshot.status, 200)
      const head: number = snapshot.body.cursor
      const replay = yield* H.readEvents(d, `/v1/sessions/${id}/events?follow=false`)
      const durable = replay.events.filter((e) => e.id !== undefined)
      assert.deepStrictEqual(durable.map((e) => Number(e.id)), Array.from({ length: head }, (_, i) => i + 1))
      assert.strictEqual(durable.filter((e) => e.event === "turn_started").length, 1, "the retried message started no second turn")
      assert.deepStrictEqual(JSON.parse(replay.events.at(-1)!.data), { reason: "replayed", cursor: head })
      assert.strictEqual(JSON.parse(durable[0]!.data).cursor, 1)

      assert.deepStrictEqual((yield* H.request(d, "GET", `/v1/sessions/${id}/children`)).body.items, [])
      assert.strictEqual((yield* H.request(d, "GET", `/v1/sessions/${id}/tree`)).body.root.id, id)
      assert.deepStrictEqual((yield* H.request(d, "GET", `/v1/sessions/${id}/callbacks`)).body.items, [])
      const idle = yield* H.request(d, "POST", `/v1/sessions/${id}/interrupt`, { body: { expectedTurnId: sent.body.turnId } })
      assert.strictEqual(idle.status, 200)
      const closed = yield* H.request(d, "POST", `/v1/sessions/${id}/close`)
      assert.strictEqual(closed.body.session.status, "closed")
      const late = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "late" } })
      assert.strictEqual(late.status, 409)
      assert.strictEqual(late.body.kind, "session_closed")
      assert.strictEqual((yield* H.request(d, "GET", "/v1/agents")).body.items.length, 2)
      assert.strictEqual((yield* H.request(d, "GET", "/readyz", { token: null })).status, 200)
    }), 60_000)

  it.scopedLive("another workspace's session is the same 404 as a missing one, on every endpoint", () =>
    Effect.gen(function*() {
      const d = yield* H.start(store())
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const turn = "turn_00000000000000000000000000"
      const cb = "cb_00000000000000000000000000"
      const probes: ReadonlyArray<[string, (s: string) => string, unknown?]> = [
        ["GET", (s) => `/v1/sessions/${s}`],
        ["PATCH", (s) => `/v1/sessions/${s}`, { title: "x" }],
        ["POST", (s) => `/v1/sessions/${s}/close`],
        ["POST", (s) => `/v1/sessions/${s}/messages`, { text: "x" }],
        ["POST", (s) => `/v1/sessions/${s}/interrupt`, { expectedTurnId: turn }],
        ["GET", (s) => `/v1/sessions/${s}/turns/${turn}`],
        ["GET", (s) => `/v1/sessions/${s}/snapshot`],
        ["GET", (s) => `/v1/sessions/${s}/children`],
        ["GET", (s) => `/v1/sessions/${s}/tree`],
        ["GET", (s) => `/v1/sessions/${s}/callbacks`],
        ["POST", (s) => `/v1/sessions/${s}/callbacks/${cb}/answer`, { result: { decision: "approve" } }],
        ["GET", (s) => `/v1/sessions/${s}/callbacks/stream`],
        ["GET", (s) => `/v1/sessions/${s}/events`]
      ]
      for (const [method, path, body] of probes) {
        const foreign = yield* H.request(d, method, path(id), { body, token: H.TOKEN_B })
        const missing = yield* H.request(d, method, path(MISSING), { body, token: H.TOKEN_B })
        assert.strictEqual(foreign.status, 404, `${method} ${path("…")}`)
        assert.strictEqual(missing.status, 404, `${method} ${path("…")}`)
        assert.strictEqual(foreign.body.kind, "not_found")
        assert.strictEqual(foreign.body.message.replace(id, MISSING), missing.body.message)
        assert.strictEqual(foreign.headers.get("content-type"), "application/problem+json")
      }
      const list = yield* H.request(d, "GET", `/v1/sessions?scope=children:${id}`, { token: H.TOKEN_B })
      assert.strictEqual(list.status, 404)
      // The owner still sees it, unchanged.
      assert.strictEqual((yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session.title, null)
    }), 60_000)

  it.scopedLive("20 concurrent answers to one approval: exactly one accepted, the tool runs once", () =>
    Effect.gen(function*() {
      const d = yield* H.start(store())
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "worker" } })).body.session.id
      const provider = yield* H.readEvents(d, `/v1/sessions/${id}/callbacks/stream?kinds=approval`, {
        until: (event) => event.event === "callback"
      }).pipe(Effect.fork)
      const sent = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "deploy it" } })
      const offered = (yield* provider).events.find((e) => e.event === "callback")!
      const callback = JSON.parse(offered.data).callback
      assert.strictEqual(callback.kind, "approval")
      assert.strictEqual(callback.sessionId, id)
      const pending = yield* H.request(d, "GET", `/v1/sessions/${id}/callbacks`)
      assert.deepStrictEqual(pending.body.items.map((c: any) => c.callbackId), [callback.callbackId])
      const answers = yield* Effect.forEach(
        Array.from({ length: 20 }),
        () => H.request(d, "POST", `/v1/sessions/${id}/callbacks/${callback.callbackId}/answer`, { body: { result: { decision: "approve" } } }),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(answers.filter((a) => a.status === 200).length, 1)
      assert.isTrue(answers.filter((a) => a.status !== 200).every((a) => a.status === 409 && a.body.kind === "stale_callback"))
      const turn = yield* H.request(d, "GET", `/v1/sessions/${id}/turns/${sent.body.turnId}?wait=10`)
      assert.strictEqual(turn.body.turn.output, "done")
    }), 60_000)

  it.scopedLive("lists with summaries=true: each session's turns, tokens and open callbacks, as its log grows", () =>
    Effect.gen(function*() {
      const d = yield* H.start(store())
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "worker" } })).body.session.id
      const quiet: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const summaries = Effect.map(H.request(d, "GET", "/v1/sessions?summaries=true"), (answer) => answer.body.summaries)
      assert.notProperty((yield* H.request(d, "GET", "/v1/sessions")).body, "summaries", "only when asked for")
      assert.deepStrictEqual(yield* summaries, {
        [id]: { turns: 0, totalTokens: 0, pendingCallbacks: 0 },
        [quiet]: { turns: 0, totalTokens: 0, pendingCallbacks: 0 }
      })
      const sent = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "deploy it" } })
      let pending: ReadonlyArray<any> = []
      while (pending.length === 0) {
        yield* Effect.sleep("20 millis")
        pending = (yield* H.request(d, "GET", `/v1/sessions/${id}/callbacks`)).body.items
      }
      // Counted while the turn waits: a turn started, no tokens ended yet, one callback open.
      assert.deepStrictEqual((yield* summaries)[id], { turns: 1, totalTokens: 0, pendingCallbacks: 1 })
      yield* H.request(d, "POST", `/v1/sessions/${id}/callbacks/${pending[0].callbackId}/answer`, { body: { result: { decision: "approve" } } })
      const first = (yield* H.request(d, "GET", `/v1/sessions/${id}/turns/${sent.body.turnId}?wait=10`)).body.turn
      const again = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "hello" } })
      const second = (yield* H.request(d, "GET", `/v1/sessions/${id}/turns/${again.body.turnId}?wait=10`)).body.turn
      const both = first.usage.totalTokens + second.usage.totalTokens
      assert.isAbove(both, 0)
      assert.deepStrictEqual((yield* summaries)[id], { turns: 2, totalTokens: both, pendingCallbacks: 0 })
      // A page of one has its session's summary only; another workspace lists none of it.
      assert.deepStrictEqual((yield* H.request(d, "GET", `/v1/sessions?summaries=true&limit=1`)).body.summaries, { [quiet]: { turns: 0, totalTokens: 0, pendingCallbacks: 0 } })
      assert.deepStrictEqual((yield* H.request(d, "GET", "/v1/sessions?summaries=true", { token: H.TOKEN_B })).body, { items: [], summaries: {} })
    }), 60_000)

  it.scopedLive("resume by Last-Event-ID from random cursors while turns run: every event exactly once", () =>
    Effect.gen(function*() {
      const d = yield* H.start(store())
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const turns = yield* Effect.fork(Effect.forEach(Array.from({ length: 6 }, (_, i) => i), (i) =>
        Effect.flatMap(H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: `m${i}` } }), (sent) =>
          sent.body.turnId === undefined ? Effect.void : H.request(d, "GET", `/v1/sessions/${id}/turns/${sent.body.turnId}?wait=10`))))
      const seen: Array<number> = []
      let last = 0
      // Read a few events at a time, reconnecting with the last id, until the six turns are in.
      for (let round = 0; round < 200; round++) {
        const take = 1 + Math.floor(Math.random() * 5)
        let n = 0
        const read = yield* H.readEvents(d, `/v1/sessions/${id}/events`, {
          headers: { "last-event-id": String(last) },
          until: (event) => event.id !== undefined && ++n >= take
        }).pipe(Effect.timeoutOption("300 millis"))
        if (read._tag === "Some") {
          for (const event of read.value.events) if (event.id !== undefined) seen.push(Number(event.id))
        }
        last = seen.at(-1) ?? 0
        if (seen.length > 0 && (yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session.status === "idle" && turns.unsafePoll() !== null) {
          const head = (yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session.headSeq
          if (last === head) break
        }
      }
      const head = (yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session.headSeq
      assert.deepStrictEqual(seen, Array.from({ length: head }, (_, i) => i + 1))
    }), 60_000)
})

describe("the HTTP listener", () => {
  it.live("ends open event streams with end shutdown and their cursor when it closes", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const d = yield* Scope.extend(H.start(), scope)
      const id: string = (yield* Scope.extend(H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } }), scope)).body.session.id
      const reading = yield* Effect.fork(H.readEvents(d, `/v1/sessions/${id}/events`))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      assert.strictEqual(yield* d.listener.openStreams, 1)
      yield* Scope.close(scope, Exit.void)
      const read = yield* reading
      const end = read.events.at(-1)!
      assert.strictEqual(end.event, "end")
      assert.deepStrictEqual(JSON.parse(end.data), { reason: "shutdown", cursor: 1 })
    }), 30_000)

  it.scopedLive("sends pings on idle streams and limits open streams per principal", () =>
    Effect.gen(function*() {
      const d = yield* H.start({ _tag: "memory" }, { heartbeat: "50 millis", streamsPerPrincipal: 2 })
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const controller = new AbortController()
      const first = yield* Effect.fork(H.readEvents(d, `/v1/sessions/${id}/events`, { signal: controller.signal }))
      yield* Effect.fork(H.readEvents(d, `/v1/sessions/${id}/events`, { signal: controller.signal }))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 400)))
      const third = yield* H.request(d, "GET", `/v1/sessions/${id}/events`)
      assert.strictEqual(third.status, 429)
      assert.strictEqual(third.body.kind, "busy")
      // Another principal is not locked out.
      const other = yield* H.request(d, "GET", "/v1/sessions", { token: H.TOKEN_B })
      assert.strictEqual(other.status, 200)
      controller.abort()
      assert.isAbove((yield* first).pings, 2)
    }), 30_000)
})
