/**
 * Wire compatibility: microsandbox's own raw agent client (the npm package
 * `microsandbox`, its Rust core through N-API) connects to a troupe daemon
 * over a unix socket unchanged, and pings, lists agents, creates a session
 * through a router built on the real `Sessions` service, authenticates, and
 * runs a stream with a follow-up.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { AgentClient as MicrosandboxClient, FLAG_SESSION_START, FLAG_TERMINAL } from "microsandbox"
import { join } from "node:path"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import * as Messages from "../../src/protocol/Messages.js"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import { SessionId } from "../../src/schema/Ids.js"
import { type Handler, type Outgoing, type Route, WireError } from "../../src/server/Router.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Troupe from "../../src/Troupe.js"
import * as H from "../server/harness.js"

const assistant = new Agent({
  name: "assistant",
  description: "Answers briefly.",
  instructions: "Be brief.",
  model: new ModelRef({ name: "scripted" })
})

const decodeCreate = Schema.decodeUnknown(Messages.SessionCreate)
const encodeCreated = Schema.encodeSync(Messages.SessionCreated)

/** `agent.list` and `session.create` on the real `Sessions`, next to the test routes. */
const sessionRoutes = Effect.gen(function*() {
  const sessions = yield* Sessions
  const request = (handler: Handler): Route => ({ kind: "request", handler })
  return {
    "agent.list": request(() =>
      Effect.succeed({
        type: Messages.Type.agentPage,
        payload: { items: [{ name: assistant.name, description: assistant.description }] }
      })
    ),
    "session.create": request((exchange) =>
      Effect.gen(function*() {
        const input = yield* Effect.mapError(
          decodeCreate(exchange.payload),
          (error) => new WireError({ kind: "invalid_payload", message: error.message })
        )
        if (input.agent !== assistant.name) {
          return yield* Effect.fail(new WireError({ kind: "not_found", message: `no agent ${input.agent}` }))
        }
        const principal = Option.getOrThrow(exchange.peer.principal)
        const session = yield* sessions.create(principal, { agent: assistant, title: input.title }).pipe(
          Effect.mapError(() => new WireError({ kind: "internal", message: "cannot create the session" }))
        )
        return { type: Messages.Type.sessionCreated, payload: encodeCreated({ session }) } satisfies Outgoing
      })
    )
  } satisfies Record<string, Route>
})

const buf = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

describe("microsandbox's AgentClient against troupe", () => {
  it.scopedLive("connects over a unix socket, pings, lists agents, creates a session, streams", () =>
    Effect.gen(function*() {
      const runtime = yield* Layer.build(Troupe.layerTest())
      const sessions = Context.get(runtime, Sessions)
      const routes = { ...H.testRoutes(yield* H.makeProbes), ...yield* Effect.provide(sessionRoutes, runtime) }
      const dir = yield* H.tempDir
      const path = join(dir, "agent.sock")
      yield* H.startServer({ unix: path }, H.routerOf(routes), H.localAuth)
      const ours = yield* AgentClient.make(path)

      yield* Effect.promise(async () => {
        const client = await MicrosandboxClient.connect(path, { timeoutMs: 5_000 })
        // The handshake it cached is the one troupe sends.
        assert.strictEqual(client.readyBytes().toString("hex"), Buffer.from(ours.readyBytes()).toString("hex"))
        const ready = H.decode({ id: 0, flags: 0, body: client.readyBytes() })
        assert.strictEqual(ready.t, "core.ready")
        assert.strictEqual((ready.payload as Handshake.Ready).protocol, "troupe/1")

        const pong = await client.request(0, buf(H.body("core.ping", {})))
        assert.deepStrictEqual([pong.flags, H.decode(pong).t, H.decode(pong).payload], [FLAG_TERMINAL, "core.pong", {}])

        const page = H.decode(await client.request(0, buf(H.body("agent.list", {}))))
        assert.deepStrictEqual([page.t, page.payload], ["agent.page", {
          items: [{ name: "assistant", description: "Answers briefly." }]
        }])

        const created = H.decode(await client.request(0, buf(H.body("session.create", { agent: "assistant", title: "hello" }))))
        assert.strictEqual(created.t, "session.created")
        const session = (created.payload as { session: { id: string; title: string } }).session
        assert.strictEqual(session.title, "hello")
        // It is a real session, of the trusted-local principal.
        const stored = await Effect.runPromise(sessions.get(H.localPrincipal, Schema.decodeSync(SessionId)(session.id)))
        assert.strictEqual(stored.title, "hello")

        const missing = H.decode(await client.request(0, buf(H.body("session.create", { agent: "nobody" }))))
        assert.deepStrictEqual([missing.t, (missing.payload as { kind: string }).kind], ["core.error", "not_found"])

        const welcome = H.decode(await client.request(0, buf(H.body("auth.hello", { token: H.TOKEN }))))
        assert.strictEqual(welcome.t, "auth.welcome")

        const items = await client.stream(FLAG_SESSION_START, buf(H.body("test.items", { n: 3 })))
        const seen: Array<string> = []
        for await (const frame of items) seen.push(`${frame.id === items.id}:${frame.flags}:${H.decode(frame).t}`)
        assert.deepStrictEqual(seen, ["true:0:test.item", "true:0:test.item", "true:0:test.item", "true:1:test.end"])

        const follow = await client.stream(FLAG_SESSION_START, buf(H.body("test.follow", {})))
        const iterator = follow[Symbol.asyncIterator]()
        assert.strictEqual(H.decode((await iterator.next()).value).t, "test.open")
        await client.send(follow.id, 0, buf(H.body("test.cancel", {})))
        const last = (await iterator.next()).value
        assert.deepStrictEqual([last.flags, H.decode(last).t], [FLAG_TERMINAL, "test.cancelled"])

        await client.close()
        await client.close()
      })
      // The daemon is unaffected by the client's leaving.
      assert.strictEqual(H.decode(yield* ours.request(0, H.body("core.ping", {}))).t, "core.pong")
    }))
})
