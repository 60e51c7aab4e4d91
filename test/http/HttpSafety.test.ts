/**
 * Bad requests over HTTP each get a clear problem+json and leave the daemon
 * unharmed; DNS-rebinding Hosts and foreign Origins are refused; a read-only
 * listener refuses every write (and one taking answers all but answers); the OpenAPI
 * document is 3.1 in shape and covers every route the API declares.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import { mkdtempSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Api } from "../../src/http/Api.js"
import * as Inspector from "../../src/inspector/Inspector.js"
import * as H from "./harness.js"

describe("the HTTP listener's guard", () => {
  it.scopedLive("answers every bad request with a problem, and the daemon still serves", () =>
    Effect.gen(function*() {
      const d = yield* H.start({ _tag: "memory" }, { maxBodyBytes: 4096 })
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "echo" } })).body.session.id
      const json = { "content-type": "application/json" }
      const cases: ReadonlyArray<[string, string, Parameters<typeof H.request>[3], number, string]> = [
        ["POST", `/v1/sessions/${id}/messages`, { raw: "{not json", headers: json }, 400, "malformed_message"],
        ["POST", `/v1/sessions/${id}/messages`, { raw: "text=hi", headers: { "content-type": "text/plain" } }, 415, "malformed_message"],
        ["POST", `/v1/sessions/${id}/messages`, { raw: JSON.stringify({ text: "x".repeat(5000) }), headers: json }, 413, "invalid_payload"],
        ["POST", `/v1/sessions/${id}/messages`, { raw: "[".repeat(300) + "]".repeat(300), headers: json }, 400, "malformed_message"],
        ["POST", `/v1/sessions/${id}/messages`, { body: { text: 5 } }, 400, "invalid_payload"],
        ["GET", "/v1/nothing-here", {}, 404, "not_found"],
        ["DELETE", `/v1/sessions/${id}`, {}, 405, "malformed_message"],
        ["GET", "/v1/sessions/not-an-id", {}, 400, "invalid_payload"],
        ["GET", "/v1/sessions?cursor=bogus", {}, 400, "invalid_payload"],
        ["GET", "/v1/sessions?scope=sideways", {}, 400, "invalid_payload"],
        ["GET", `/v1/sessions/${id}/events?after=999`, {}, 400, "invalid_payload"],
        ["GET", `/v1/sessions/${id}/events`, { headers: { "last-event-id": "x" } }, 400, "invalid_payload"],
        ["GET", "/v1/sessions", { token: null }, 401, "unauthenticated"],
        ["POST", "/v1/sessions", { body: { agent: "echo" }, headers: { origin: "https://evil.example" } }, 403, "forbidden"]
      ]
      for (const [method, path, options, status, kind] of cases) {
        const answer = yield* H.request(d, method, path, options)
        assert.strictEqual(answer.status, status, `${method} ${path} ${JSON.stringify(answer.body)}`)
        assert.strictEqual(answer.body.kind, kind, `${method} ${path}`)
        assert.strictEqual(answer.headers.get("content-type"), "application/problem+json")
        assert.isAtMost(answer.body.message.length, 240)
        assert.notInclude(JSON.stringify(answer.body), "at ")
      }
      // fetch cannot set Host: a raw request names the rebinding attacker's.
      const rebound = yield* Effect.promise(() =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = http.request({ host: "127.0.0.1", port: d.port, path: "/v1/sessions", headers: { host: "evil.example", authorization: `Bearer ${H.TOKEN_A}` } }, (res) => {
            let body = ""
            res.on("data", (chunk) => (body += chunk))
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
          })
          req.on("error", reject)
          req.end()
        }))
      assert.strictEqual(rebound.status, 403)
      assert.strictEqual(JSON.parse(rebound.body).kind, "forbidden")
      // Nothing a bad request did changed the session; the daemon still answers.
      const session = (yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session
      assert.strictEqual(session.headSeq, 1)
      assert.strictEqual((yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "fine" } })).status, 202)
    }), 60_000)

  it.scopedLive("a read-only listener (troupe inspect's) refuses every write; one taking answers takes only answers, applied by the daemon", () =>
    Effect.gen(function*() {
      const store: H.Store = { _tag: "sqlite", filename: join(mkdtempSync(join(tmpdir(), "tr-http-ro-")), "troupe.db") }
      const d = yield* H.start(store)
      const id: string = (yield* H.request(d, "POST", "/v1/sessions", { body: { agent: "worker" } })).body.session.id
      const sent = yield* H.request(d, "POST", `/v1/sessions/${id}/messages`, { body: { text: "deploy it" } })
      let pending: ReadonlyArray<any> = []
      while (pending.length === 0) {
        yield* Effect.sleep("20 millis")
        pending = (yield* H.request(d, "GET", `/v1/sessions/${id}/callbacks`)).body.items
      }
      const answer = `/v1/sessions/${id}/callbacks/${pending[0].callbackId}/answer`
      const approve = { result: { decision: "approve" } }
      const writes: ReadonlyArray<[string, string, unknown]> = [
        ["POST", "/v1/sessions", { agent: "echo" }],
        ["PATCH", `/v1/sessions/${id}`, { title: "x" }],
        ["POST", `/v1/sessions/${id}/close`, undefined],
        ["POST", `/v1/sessions/${id}/messages`, { text: "x" }],
        ["POST", `/v1/sessions/${id}/interrupt`, { expectedTurnId: sent.body.turnId }],
        ["POST", answer, approve]
      ]
      // Two viewers over the same file, on hosts that run nothing, as troupe inspect is.
      const viewer = yield* H.start(store, { writes: "none", staticAssets: yield* Inspector.makeWith({ writes: "none" }) }, {}, { runs: false })
      const answering = yield* H.start(store, { writes: "answers" }, {}, { runs: false })
      for (const [method, path, body] of writes) {
        const refused = yield* H.request(viewer, method, path, { body })
        assert.strictEqual(refused.status, 403, `${method} ${path}`)
        assert.strictEqual(refused.body.kind, "forbidden")
        assert.include(refused.body.message, "read-only")
        if (path === answer) continue
        const alsoRefused = yield* H.request(answering, method, path, { body })
        assert.strictEqual(alsoRefused.status, 403, `${method} ${path} with answers allowed`)
      }
      // Reads work, and the page knows it is read-only.
      assert.strictEqual((yield* H.request(viewer, "GET", `/v1/sessions/${id}`)).body.session.status, "waiting")
      assert.deepStrictEqual((yield* H.request(viewer, "GET", `/v1/sessions/${id}/callbacks`)).body.items.map((c: any) => c.callbackId), [pending[0].callbackId])
      assert.include((yield* H.request(viewer, "GET", "/", { token: null })).body, `<meta name="troupe-writes" content="none">`)
      // The answer through the second viewer is taken once; the daemon that drives the session applies it.
      assert.deepStrictEqual((yield* H.request(answering, "POST", answer, { body: approve })).body, { accepted: true })
      const late = yield* H.request(answering, "POST", answer, { body: approve })
      assert.strictEqual(late.body.kind, "stale_callback")
      const turn = yield* H.request(d, "GET", `/v1/sessions/${id}/turns/${sent.body.turnId}?wait=20`)
      assert.strictEqual(turn.body.turn.output, "done")
      assert.strictEqual(yield* Ref.get(d.runs), 1)
      assert.strictEqual(yield* Ref.get(answering.runs), 0, "the viewer ran nothing")
      // Nothing the viewers refused was written: one turn, the title unchanged.
      const session = (yield* H.request(d, "GET", `/v1/sessions/${id}`)).body.session
      assert.strictEqual(session.title, null)
      assert.strictEqual((yield* H.request(d, "GET", "/v1/sessions")).body.items.length, 1)
    }), 60_000)

  it.scopedLive("serves an OpenAPI 3.1 document covering every declared route", () =>
    Effect.gen(function*() {
      const d = yield* H.start()
      const doc = (yield* H.request(d, "GET", "/openapi.json", { token: null })).body
      assert.strictEqual(doc.openapi, "3.1.0")
      assert.isString(doc.info.title)
      assert.isString(doc.info.version)
      assert.isObject(doc.paths)
      for (const group of Object.values(Api.groups)) {
        for (const endpoint of Object.values(group.endpoints)) {
          const path = endpoint.path.replace(/:([A-Za-z]+)/g, "{$1}")
          const operation = doc.paths[path]?.[endpoint.method.toLowerCase()]
          assert.isObject(operation, `${endpoint.method} ${path}`)
          assert.isObject(operation.responses, `${endpoint.method} ${path}`)
          for (const [status, response] of Object.entries<any>(operation.responses)) {
            assert.match(status, /^[1-5]\d\d$/)
            assert.isString(response.description)
          }
          for (const parameter of operation.parameters ?? []) {
            assert.include(["path", "query", "header", "cookie"], parameter.in)
            if (parameter.in === "path") assert.strictEqual(parameter.required, true)
          }
        }
      }
      assert.isObject(doc.components.securitySchemes.bearer)
    }), 30_000)
})
