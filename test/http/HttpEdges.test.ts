/**
 * The HTTP listener at its edges: a thousand idle event streams do not lock
 * out a new client; on a trusted-local listener (where no token is needed, so
 * a rebinding page or a cross-site form would act as the local user) a
 * foreign `Host` and a foreign `Origin` are refused before anything is done,
 * while a configured origin gets its CORS answer; listing cursors of another
 * workspace or another listing, and event cursors of another session, are
 * clear problems, and a cursor stays valid while its listing changes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as H from "./harness.js"

/** A raw request (fetch cannot set `Host`), no token unless given; the status and body. */
const raw = (
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string
): Effect.Effect<{ readonly status: number; readonly headers: http.IncomingHttpHeaders; readonly body: string }> =>
  Effect.async((resume) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, headers, agent: false }, (res) => {
      let text = ""
      res.setEncoding("utf8").on("data", (chunk) => (text += chunk))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: text })))
    })
    req.on("error", (error) => resume(Effect.die(error)))
    req.end(body)
  })

/** Opens an event stream and leaves it open (idle); resolves with its status once the answer's head arrives. */
const openIdle = (port: number, path: string, sockets: Array<http.ClientRequest>) =>
  Effect.async<number>((resume) => {
    const req = http.request({ host: "127.0.0.1", port, path, headers: { authorization: `Bearer ${H.TOKEN_A}` }, agent: false }, (res) => {
      res.resume()
      resume(Effect.succeed(res.statusCode ?? 0))
    })
    req.on("error", () => undefined)
    sockets.push(req)
    req.end()
  })

describe("the HTTP listener at its edges", () => {
  it.scopedLive("1,000 idle event streams do not lock out a new client", () =>
    Effect.gen(function*() {
      const d = yield* H.start({ _tag: "memory" }, { streamsPerPrincipal: 1000, maxConnections: 1100 })
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const sockets: Array<http.ClientRequest> = []
      yield* Effect.addFinalizer(() => Effect.sync(() => sockets.forEach((req) => req.destroy())))
      const statuses = yield* Effect.forEach(Array.from({ length: 1000 }), () => openIdle(d.port, `/v1/sessions/${id}/events`, sockets), {
        concurrency: 50
      })
      assert.isTrue(statuses.every((status) => status === 200))
      assert.strictEqual(yield* d.listener.openStreams, 1000)
      // A new client (another workspace) creates, sends, follows and awaits, as on a quiet daemon.
      const other = yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" }, token: H.TOKEN_B })
      assert.strictEqual(other.status, 201)
      const mine: string = other.body.session.id
      const follow = yield* Effect.fork(H.readEvents(d, `/v1/sessions/${mine}/events`, { token: H.TOKEN_B, until: (e) => e.event === "turn_ended" }))
      const sent = yield* H.request(d, "POST", `/v1/sessions/${mine}/messages`, { body: { text: "still here" }, token: H.TOKEN_B })
      const turn = yield* H.request(d, "GET", `/v1/sessions/${mine}/turns/${sent.body.turnId}?wait=20`, { token: H.TOKEN_B })
      assert.strictEqual(turn.body.turn.output, "echo: still here")
      assert.strictEqual(JSON.parse((yield* follow).events.at(-1)!.data).event.record.output, "echo: still here")
      // Their principal still takes messages; its 1,001st stream is over its limit: busy, with Retry-After.
      assert.strictEqual((yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "x" } })).status, 202)
      const over = yield* H.request(d, "GET", `/v1/sessions/${id}/events?follow=false`)
      assert.strictEqual(over.status, 429)
      assert.strictEqual(over.body.kind, "busy")
      assert.strictEqual(over.headers.get("retry-after"), "1")
      sockets.forEach((req) => req.destroy())
      while ((yield* d.listener.openStreams) > 0) yield* Effect.sleep("20 millis")
    }), 180_000)

  it.scopedLive("a trusted-local listener refuses a DNS-rebinding Host and a foreign Origin before acting; a configured origin gets CORS", () =>
    Effect.gen(function*() {
      const app = "https://app.example"
      const d = yield* H.start({ _tag: "memory" }, { trustLocal: true, cors: [app] })
      const own = `127.0.0.1:${d.port}`
      const json = { "content-type": "application/json" }
      const create = JSON.stringify({ agent: "echo" })
      // Without a token the local user: the own Host reads and writes.
      assert.strictEqual((yield* raw(d.port, "GET", "/v1/sessions", { host: own })).status, 200)
      assert.strictEqual((yield* raw(d.port, "GET", "/v1/sessions", { host: `localhost:${d.port}` })).status, 200)
      // A rebinding page reaches 127.0.0.1 under its own name, on the right port: refused, reads and writes.
      for (const host of ["evil.example", `evil.example:${d.port}`, "127.0.0.1", `127.0.0.1:${d.port + 1}`]) {
        const read = yield* raw(d.port, "GET", "/v1/sessions", { host })
        assert.strictEqual(read.status, 403, host)
        assert.strictEqual(JSON.parse(read.body).kind, "forbidden")
        assert.strictEqual((yield* raw(d.port, "POST", "/v1/sessions", { host, ...json }, create)).status, 403, host)
      }
      // A cross-site form or fetch: the own Host, a foreign Origin. Writes refused, without CORS headers.
      for (const origin of ["https://evil.example", "null", `http://localhost:${d.port + 1}`]) {
        const write = yield* raw(d.port, "POST", "/v1/sessions", { host: own, origin, ...json }, create)
        assert.strictEqual(write.status, 403, origin)
        assert.strictEqual(JSON.parse(write.body).kind, "forbidden")
        assert.isUndefined(write.headers["access-control-allow-origin"])
        const preflight = yield* raw(d.port, "OPTIONS", "/v1/sessions", { host: own, origin, "access-control-request-method": "POST" })
        assert.strictEqual(preflight.status, 403, origin)
        assert.isUndefined(preflight.headers["access-control-allow-origin"])
      }
      assert.deepStrictEqual(JSON.parse((yield* raw(d.port, "GET", "/v1/sessions", { host: own })).body).items, [], "nothing refused was created")
      // The listener's own origin and the configured one may write; the configured one gets CORS.
      assert.strictEqual((yield* raw(d.port, "POST", "/v1/sessions", { host: own, origin: `http://${own}`, ...json }, create)).status, 201)
      const preflight = yield* raw(d.port, "OPTIONS", "/v1/sessions", { host: own, origin: app, "access-control-request-method": "POST" })
      assert.strictEqual(preflight.status, 204)
      assert.strictEqual(preflight.headers["access-control-allow-origin"], app)
      const allowed = yield* raw(d.port, "POST", "/v1/sessions", { host: own, origin: app, ...json }, create)
      assert.strictEqual(allowed.status, 201)
      assert.strictEqual(allowed.headers["access-control-allow-origin"], app)
      const read = yield* raw(d.port, "GET", "/v1/sessions", { host: own, origin: app })
      assert.strictEqual(JSON.parse(read.body).items.length, 2)
      assert.strictEqual(read.headers["access-control-allow-origin"], app)
      // A foreign origin may read (a browser keeps the answer from its page: no CORS headers).
      const foreignRead = yield* raw(d.port, "GET", "/v1/sessions", { host: own, origin: "https://evil.example" })
      assert.strictEqual(foreignRead.status, 200)
      assert.isUndefined(foreignRead.headers["access-control-allow-origin"])
      const wrongMethod = yield* raw(d.port, "DELETE", "/v1/sessions", { host: own })
      assert.strictEqual(wrongMethod.status, 405)
      assert.strictEqual(wrongMethod.headers["allow"], "POST, GET")
    }), 30_000)

  it.scopedLive("foreign cursors are problems; a cursor stays valid while its listing changes", () =>
    Effect.gen(function*() {
      const d = yield* H.start()
      const ids: Array<string> = []
      for (let i = 0; i < 5; i++) ids.push((yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo", title: `s${i}` } })).body.session.id)
      const page = yield* H.request(d, "GET", "/v1/sessions?limit=2")
      assert.deepStrictEqual(page.body.items.map((s: any) => s.id), [ids[4], ids[3]])
      const cursor: string = page.body.nextCursor
      assert.isString(cursor)
      const foreign: ReadonlyArray<[string, string | undefined]> = [
        [`/v1/sessions?limit=2&cursor=${cursor}`, H.TOKEN_B],
        [`/v1/sessions?limit=2&includeArchived=true&cursor=${cursor}`, undefined],
        [`/v1/sessions?limit=2&scope=tree:${ids[0]}&cursor=${cursor}`, undefined],
        [`/v1/sessions/${ids[0]}/children?cursor=${cursor}`, undefined],
        [`/v1/sessions?cursor=${cursor.slice(0, -3)}`, undefined]
      ]
      for (const [path, token] of foreign) {
        const answer = yield* H.request(d, "GET", path, token === undefined ? {} : { token })
        assert.strictEqual(answer.status, 400, path)
        assert.strictEqual(answer.body.kind, "invalid_payload", path)
        assert.strictEqual(answer.headers.get("content-type"), "application/problem+json")
        assert.include(answer.body.message, "cursor", path)
        assert.notInclude(JSON.stringify(answer.body), ids[3]!, "the problem does not say where the cursor pointed")
      }
      // An event cursor of a longer session on a shorter one: not "nothing yet", a problem.
      const sent = yield* H.request(d, "POST", `/v1/sessions/${ids[4]}/messages`, { body: { text: "hi" } })
      yield* H.request(d, "GET", `/v1/sessions/${ids[4]}/turns/${sent.body.turnId}?wait=20`)
      const longHead: number = (yield* H.request(d, "GET", `/v1/sessions/${ids[4]}`)).body.session.headSeq
      const stale = yield* H.request(d, "GET", `/v1/sessions/${ids[0]}/events`, { headers: { "last-event-id": String(longHead) } })
      assert.strictEqual(stale.status, 400)
      assert.strictEqual(stale.body.kind, "invalid_payload")
      assert.strictEqual((yield* H.request(d, "GET", `/v1/sessions/${ids[4]}/events`, { token: H.TOKEN_B, headers: { "last-event-id": "1" } })).status, 404)
      // The listing changed since the cursor was issued (its anchor archived, a session added): it still continues after its position.
      yield* H.request(d, "PATCH", `/v1/sessions/${ids[3]}`, { body: { archived: true } })
      yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })
      const next = yield* H.request(d, "GET", `/v1/sessions?limit=2&cursor=${cursor}`)
      assert.strictEqual(next.status, 200)
      assert.deepStrictEqual(next.body.items.map((s: any) => s.id), [ids[2], ids[1]])
      const rest = yield* H.request(d, "GET", `/v1/sessions?limit=2&cursor=${next.body.nextCursor}`)
      assert.deepStrictEqual(rest.body.items.map((s: any) => s.id), [ids[0]])
      assert.isUndefined(rest.body.nextCursor)
    }), 30_000)
})
