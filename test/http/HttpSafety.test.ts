/**
 * Bad requests over HTTP each get a clear problem+json and leave the daemon
 * unharmed; DNS-rebinding Hosts and foreign Origins are refused; the OpenAPI
 * document is 3.1 in shape and covers every route the API declares.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import { Api } from "../../src/http/Api.js"
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
