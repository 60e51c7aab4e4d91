/**
 * `troupe inspect` end to end: the real program over a SQLite file that a
 * runtime of this process wrote as the local user (one session that ran a
 * turn, one waiting on an approval) and keeps driving, as a daemon would.
 * Two inspectors at once: the read-only one serves the page and the API and
 * refuses every change; the one with `--allow-answers` takes the answer
 * (and nothing else), which the driving runtime applies: the turn completes
 * there, the inspector ran nothing. SIGTERM ends an inspector with exit 0.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Ref } from "effect"
import { join } from "node:path"
import * as Principal from "../../src/schema/Principal.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Http from "../http/harness.js"
import { type Child, envFor, start, tempDir } from "./harness.js"

const local = Principal.local

/** Starts `troupe inspect ARGS` on `file`; the child and its address, once it printed it. */
const inspect = (file: string, env: Record<string, string>, ...args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const child = yield* start(["inspect", "--store", `sqlite:${file}`, ...args], env)
    // Started through tsx in a checkout: slow under load.
    yield* child.waitFor(/^http:\/\/\S+\/$/m, "stdout", "90 seconds")
    return { child, url: child.stdout().trim().split("\n")[0]!.replace(/\/$/, "") }
  })

const stopped = (child: Child) =>
  Effect.gen(function*() {
    child.proc.kill("SIGTERM")
    return yield* child.exit
  })

describe("troupe inspect", () => {
  it.scopedLive("serves a store read-only; with --allow-answers an answer (only) is taken, and the daemon driving the session applies it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = join(dir, "troupe.db")
      const runs = yield* Ref.make(0)
      const sessions = Context.get(yield* Layer.build(Http.runtime({ _tag: "sqlite", filename: file }, runs)), Sessions)
      const [echo, worker] = Http.agents
      const done = yield* sessions.create(local, { agent: echo!, title: "said hello" })
      const hello = yield* sessions.send(local, done.id, { text: "hello" })
      yield* sessions.awaitTurn(local, done.id, hello.turnId!)
      const waiting = yield* sessions.create(local, { agent: worker!, title: "deploys" })
      const sent = yield* sessions.send(local, waiting.id, { text: "deploy it" })
      while ((yield* sessions.callbacks(local, waiting.id)).length === 0) yield* Effect.sleep("20 millis")
      const [callback] = yield* sessions.callbacks(local, waiting.id)

      const env = envFor(dir)
      const [viewer, answering] = yield* Effect.all([inspect(file, env), inspect(file, env, "--allow-answers")], { concurrency: 2 })
      assert.include(viewer.child.stderr(), `troupe: inspector at ${viewer.url}/ · store sqlite:${file} · read-only`)
      assert.match(viewer.url, /^http:\/\/127\.0\.0\.1:\d+$/)

      // The page, told it is read-only, and its code: from the process, no network.
      const page = yield* Http.request(viewer, "GET", "/", { token: null })
      assert.strictEqual(page.status, 200)
      assert.include(page.body, `<meta name="troupe-writes" content="none">`)
      assert.strictEqual((yield* Http.request(viewer, "GET", "/inspector/app.js", { token: null })).headers.get("content-type"), "text/javascript; charset=utf-8")
      assert.include((yield* Http.request(answering, "GET", "/", { token: null })).body, `<meta name="troupe-writes" content="answers">`)

      // The local user's sessions, with their figures, without a token (loopback).
      const listed = yield* Http.request(viewer, "GET", "/v1/sessions?summaries=true", { token: null })
      assert.deepStrictEqual(listed.body.items.map((s: { id: string }) => s.id), [waiting.id, done.id])
      assert.strictEqual(listed.body.summaries[done.id].turns, 1)
      assert.deepStrictEqual(listed.body.summaries[waiting.id], { turns: 1, totalTokens: 0, pendingCallbacks: 1 })
      const replay = yield* Http.request(viewer, "GET", `/v1/sessions/${done.id}/events?follow=false`, { token: null })
      assert.include(replay.body, "event: turn_ended")

      // Every change is refused by the read-only one; all but the answer by the other.
      const answer = `/v1/sessions/${waiting.id}/callbacks/${callback!.callbackId}/answer`
      const approve = { result: { decision: "approve" } }
      for (const [method, path, body] of [
        ["PATCH", `/v1/sessions/${done.id}`, { title: "renamed" }],
        ["POST", "/v1/sessions", { agent: "echo" }],
        ["POST", `/v1/sessions/${done.id}/messages`, { text: "more" }],
        ["POST", answer, approve]
      ] as const) {
        const refused = yield* Http.request(viewer, method, path, { body, token: null })
        assert.strictEqual(refused.status, 403, `${method} ${path}`)
        assert.strictEqual(refused.body.kind, "forbidden")
        if (path !== answer) assert.strictEqual((yield* Http.request(answering, method, path, { body, token: null })).status, 403)
      }
      assert.deepStrictEqual((yield* Http.request(answering, "POST", answer, { body: approve, token: null })).body, { accepted: true })

      // The runtime that drives the session takes the answer up and completes the turn; the inspector ran nothing.
      const result = yield* sessions.awaitTurn(local, waiting.id, sent.turnId!)
      assert.strictEqual(result.output, "done")
      assert.strictEqual(yield* Ref.get(runs), 1)
      assert.strictEqual((yield* sessions.get(local, done.id)).title, "said hello")

      const [ended] = yield* Effect.all([stopped(viewer.child), stopped(answering.child)], { concurrency: 2 })
      assert.strictEqual(ended.code, 0)
      assert.include(ended.stderr, "troupe: stopping (SIGTERM)")
      assert.include(ended.stderr, "troupe: stopped")
    }), 180_000)
})
