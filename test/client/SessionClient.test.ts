/**
 * The typed client end to end: a daemon (listener, connection, session
 * routes, the test runtime) on a unix socket in a temp directory, and
 * `SessionClient` over `AgentClient`. Covers the session lifecycle, errors
 * as `ServerError` kinds, tenancy by token, event streams (including the
 * automatic resume after `slow_consumer`) and callbacks served by the client.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Ref, Schedule, Scope, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as AgentClient from "../../src/client/AgentClient.js"
import * as PromiseClient from "../../src/client/PromiseClient.js"
import * as SessionClient from "../../src/client/SessionClient.js"
import type { Session } from "../../src/schema/Session.js"
import type * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import { Agent } from "../../src/schema/Agent.js"
import { makeSessionId, makeTurnId } from "../../src/schema/Ids.js"
import { ApprovalSettings } from "../../src/schema/Policy.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import * as Server from "../../src/server/Server.js"
import { Sessions } from "../../src/services/Sessions.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"
import { deployCall, deployingAgent, deployTool } from "../support/deploy.js"
import { principal } from "../support/fixtures.js"
import * as H from "../server/harness.js"

/** A long reply: thousands of deltas, more than the socket and both buffers hold. */
const LONG = Array.from({ length: 6000 }, (_, i) => `word${i}`).join(" ")

const SCRIPTS: ScriptedModel.Scripts = {
  agents: {
    worker: [deployCall("c1"), "done"],
    timed: [deployCall("c1"), "done"],
    talker: [LONG]
  }
}

/** A worker whose approvals expire after a minute: the callbacks it opens say when. */
const timed = new Agent({ ...deployingAgent("timed", "Deploys, with a deadline."), approvals: new ApprovalSettings({ timeoutMs: 60_000 }) }, true)

const isTurnEnd = (event: SessionClient.EventFrame["event"]) => event._tag === "durable" && event.record._tag === "turn_ended"

const TOKEN_A = "token-a"
const TOKEN_B = "token-b"

/** A daemon on a fresh unix socket serving the session routes, in the test's scope. */
const daemon = (runs: Ref.Ref<number>, eventBuffer?: number) =>
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "tsc-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const path = join(dir, "agent.sock")
    const a = principal("a")
    const b = principal("b")
    const runtime = Troupe.layerTest({ scripts: SCRIPTS, tools: Toolkit.layer([deployTool(runs)]) })
    // The routes, with the reason of every event stream's end noted.
    const observed = yield* H.observedSessionRoutes({ eventBuffer })
    const ends = observed.ends
    const routes = observed.routes.pipe(
      Layer.provide(AgentCatalog.layer([deployingAgent("worker", "Deploys."), deployingAgent("talker", "Talks a lot."), timed]))
    )
    const app = Layer.provideMerge(
      Layer.mergeAll(routes, Authenticator.layerStatic({ [TOKEN_A]: a, [TOKEN_B]: b })),
      runtime
    )
    // The runtime outlives the server, so that the daemon's listener can stop and start again over the same sessions.
    const context = yield* Layer.build(app)
    let listening: Scope.CloseableScope | undefined
    /** Starts the listener on `path`. */
    const start = Effect.gen(function*() {
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(Server.layer({ unix: { path, trustedLocal: false } }), scope).pipe(Effect.provide(context))
      listening = scope
    })
    /** Stops the listener: every connection is closed and the socket file removed. */
    const stop = Effect.suspend(() => (listening === undefined ? Effect.void : Scope.close(listening, Exit.void)))
    yield* start
    yield* Effect.addFinalizer(() => stop)
    return { path, a, b, ends, sessions: Context.get(context, Sessions), store: Context.get(context, SessionStore), start, stop }
  })

const connect = (path: string, token?: string): Effect.Effect<SessionClient.SessionClient, unknown, Scope.Scope> =>
  SessionClient.connect(path, { token, timeout: "5 seconds" })

const serverError = <A, E>(self: Effect.Effect<A, E>) =>
  Effect.flip(self).pipe(
    Effect.map((error) => {
      assert.instanceOf(error, SessionClient.ServerError)
      return error as SessionClient.ServerError
    })
  )

describe("SessionClient", () => {
  it.live("lists a session's children and its tree (Effect and Promise APIs); a child refuses send and close as forbidden", () =>
    Effect.scoped(Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const { a, path, store } = yield* daemon(runs)
      const client = yield* connect(path, TOKEN_A)
      yield* client.hello({ token: TOKEN_A })
      const root = yield* client.create({ agent: "worker", title: "root" })
      const agentOf = (yield* store.get(root.id)).agent
      const kids: Array<Session> = []
      for (let i = 0; i < 3; i++) kids.push(yield* store.create({ principal: a, agent: agentOf, parentId: root.id, alias: `k${i}` }))
      const grandchild = yield* store.create({ principal: a, agent: agentOf, parentId: kids[0]!.id, alias: "g" })

      const first = yield* client.children(root.id, { limit: 2 })
      assert.deepStrictEqual(first.items.map((item) => [item.session.id, item.alias, item.agent, item.agentPath]), [
        [kids[2]!.id, "k2", "worker", ["worker", "worker"]],
        [kids[1]!.id, "k1", "worker", ["worker", "worker"]]
      ])
      const second = yield* client.children(root.id, { cursor: first.nextCursor, limit: 2 })
      assert.deepStrictEqual(second.items.map((item) => item.session.id), [kids[0]!.id])
      const wrongListing = yield* serverError(client.children(kids[0]!.id, { cursor: first.nextCursor }))
      assert.strictEqual(wrongListing.kind, "invalid_payload")
      const tree = yield* client.tree(root.id)
      assert.deepStrictEqual(tree.nodes.map((node) => [node.session.id, node.parentId]), [
        ...kids.map((kid) => [kid.id, root.id]),
        [grandchild.id, kids[0]!.id]
      ])
      const forbidden = yield* serverError(client.send(kids[1]!.id, { text: "psst" }))
      assert.strictEqual(forbidden.kind, "forbidden")
      assert.strictEqual((yield* serverError(client.close(kids[1]!.id))).kind, "forbidden")
      assert.isTrue((yield* client.archive(kids[1]!.id, true)).archived)
      // Another tenant's session is not_found through the new methods too.
      const other = yield* connect(path, TOKEN_B)
      yield* other.hello({ token: TOKEN_B })
      assert.strictEqual((yield* serverError(other.children(root.id))).kind, "not_found")
      assert.strictEqual((yield* serverError(other.tree(root.id))).kind, "not_found")

      const promised = yield* Effect.promise(() => PromiseClient.connect(path, { token: TOKEN_A, timeout: "5 seconds" }))
      const viaPromise = yield* Effect.promise(async () => {
        const page = await promised.children(root.id)
        const archivedTree = await promised.tree(root.id, { includeArchived: true })
        const liveTree = await promised.tree(root.id)
        const refused = await promised.send(kids[0]!.id, { text: "psst" }).then(() => undefined, (error: unknown) => error)
        await promised.disconnect()
        return { page, archivedTree, liveTree, refused }
      })
      assert.deepStrictEqual(viaPromise.page.items.map((item) => item.session.id), kids.map((kid) => kid.id).reverse())
      assert.strictEqual(viaPromise.archivedTree.nodes.length, 4)
      assert.deepStrictEqual(viaPromise.liveTree.nodes.map((node) => node.session.id), [kids[0]!.id, kids[2]!.id, grandchild.id])
      assert.instanceOf(viaPromise.refused, SessionClient.ServerError)
      assert.strictEqual((viaPromise.refused as SessionClient.ServerError).kind, "forbidden")
    })))

  it.live("runs a session over a socket: create, send, follow events, rename, snapshot, close", () =>
    Effect.scoped(Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const { a, path } = yield* daemon(runs)
      const client = yield* connect(path, TOKEN_A)
      assert.deepStrictEqual(yield* client.hello({ token: TOKEN_A }), a)
      yield* client.ping
      assert.deepStrictEqual((yield* client.agents).map((agent) => agent.name), ["worker", "talker", "timed"])

      const session = yield* client.create({ agent: "worker", title: "deploys", metadata: { ticket: 7 } })
      assert.strictEqual(session.agent.name, "worker")
      assert.deepStrictEqual(session.metadata, { ticket: 7 })
      assert.deepStrictEqual(yield* client.get(session.id), session)
      assert.deepStrictEqual((yield* client.list()).items.map((s) => s.id), [session.id])

      // The approval is answered by hand, from the event stream.
      const events = yield* client.events(session.id).pipe(
        Stream.takeUntil(({ event }) => event._tag === "durable" && event.record._tag === "turn_ended"),
        Stream.tap(({ event }) =>
          event._tag === "durable" && event.record._tag === "callback_opened"
            ? client.answerCallback(session.id, {
              callbackId: event.record.callbackId,
              result: { decision: "approve" }
            })
            : Effect.void
        ),
        Stream.runCollect,
        Effect.fork
      )
      const accepted = yield* client.send(session.id, { text: "ship it" })
      assert.strictEqual(accepted.disposition, "started")
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(events))
      const cursors = seen.flatMap(({ cursor }) => (cursor === undefined ? [] : [cursor]))
      assert.deepStrictEqual(cursors, Array.from({ length: cursors.length }, (_, i) => i + 1))
      const last = seen.at(-1)!.event
      assert.isTrue(last._tag === "durable" && last.record._tag === "turn_ended" && last.record.output === "done")
      assert.strictEqual(yield* Ref.get(runs), 1)

      // follow: false ends at the head.
      const replay = yield* client.events(session.id, { after: 2, follow: false }).pipe(Stream.runCollect)
      assert.deepStrictEqual(Chunk.toReadonlyArray(replay).map((f) => f.cursor), cursors.slice(2))

      assert.strictEqual((yield* client.rename(session.id, "renamed")).title, "renamed")
      assert.isTrue((yield* client.archive(session.id, true)).archived)
      const snapshot = yield* client.snapshot(session.id)
      assert.strictEqual(snapshot.session.title, "renamed")
      assert.strictEqual(snapshot.openCallbacks, 0)
      assert.strictEqual((yield* client.close(session.id)).status, "closed")
      const closed = yield* serverError(client.send(session.id, { text: "more" }))
      assert.strictEqual(closed.kind, "session_closed")
    })))

  it.live("errors arrive as ServerError kinds; another token's session is not_found, like an unknown one", () =>
    Effect.scoped(Effect.gen(function*() {
      const { path } = yield* daemon(yield* Ref.make(0))
      const anonymous = yield* connect(path)
      assert.strictEqual((yield* serverError(anonymous.agents)).kind, "unauthenticated")

      const owner = yield* connect(path, TOKEN_A)
      const intruder = yield* connect(path, TOKEN_B)
      const session = yield* owner.create({ agent: "worker" })
      const foreign = yield* serverError(intruder.get(session.id))
      const unknownId = yield* makeSessionId
      const unknown = yield* serverError(intruder.get(unknownId))
      assert.strictEqual(foreign.kind, "not_found")
      assert.strictEqual(foreign.message.replace(session.id, "<id>"), unknown.message.replace(unknownId, "<id>"))
      const foreignEvents = yield* serverError(Stream.runDrain(intruder.events(session.id, { follow: false })))
      assert.strictEqual(foreignEvents.kind, "not_found")

      const unknownAgent = yield* serverError(owner.create({ agent: "nobody" }))
      assert.deepStrictEqual([unknownAgent.kind, unknownAgent.message], ["not_found", "unknown agent nobody"])
      const mismatch = yield* serverError(owner.interrupt(session.id, yield* makeTurnId))
      assert.strictEqual(mismatch.kind, "turn_mismatch")
      assert.deepStrictEqual((mismatch.details as { activeTurnId: unknown }).activeTurnId, null)
    })))

  it.live("provideCallbacks answers approvals; interrupting it withdraws the provider", () =>
    Effect.scoped(Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const { a, path, sessions } = yield* daemon(runs)
      const client = yield* connect(path, TOKEN_A)
      const session = yield* client.create({ agent: "timed" })
      const asked = yield* Deferred.make<readonly [string, number | undefined, number]>()
      const provider = yield* Effect.fork(
        client.provideCallbacks(session.id, ["approval"], (callback) =>
          Effect.as(
            Deferred.succeed(asked, [callback.request.toolName, callback.expiresAt, callback.openedAt] as const),
            Option.some({ decision: "approve" })
          ))
      )
      // The agent's approval timeout: the callback the provider is offered says when it expires.
      const accepted = yield* client.send(session.id, { text: "ship it" })
      const [toolName, expiresAt, openedAt] = yield* Deferred.await(asked)
      assert.strictEqual(toolName, "deploy")
      // Set by the turn just before its commit stamps openedAt: a minute on, give or take the commit.
      assert.approximately(expiresAt! - openedAt, 60_000, 1_000)
      const result = yield* sessions.awaitTurn(a, session.id, accepted.turnId!)
      assert.strictEqual(result.output, "done")
      assert.strictEqual(yield* Ref.get(runs), 1)
      yield* Fiber.interrupt(provider)
      // The connection is still good for other exchanges.
      assert.strictEqual((yield* client.get(session.id)).status, "idle")
    })))

  it.live("a provider's answer of the wrong shape fails it with InvalidCallbackAnswer; nothing is sent and the callback stays open", () =>
    Effect.scoped(Effect.gen(function*() {
      const { a, path, sessions } = yield* daemon(yield* Ref.make(0))
      const client = yield* connect(path, TOKEN_A)
      const session = yield* client.create({ agent: "worker" })
      const provider = yield* Effect.fork(
        // A cast stands for plain JavaScript: the handler's type would refuse it.
        client.provideCallbacks(session.id, ["approval"], () => Effect.succeed(Option.some({ decision: "maybe" } as never)))
      )
      yield* client.send(session.id, { text: "ship it" })
      const exit = yield* Fiber.await(provider)
      assert.isTrue(Exit.isFailure(exit))
      const error = Cause.squash((exit as Exit.Failure<unknown, unknown>).cause) as { _tag: string; kind: string; callbackId: string }
      assert.strictEqual(error._tag, "InvalidCallbackAnswer")
      assert.strictEqual(error.kind, "approval")
      const open = yield* sessions.callbacks(a, session.id)
      assert.deepStrictEqual(open.map((callback) => callback.callbackId), [error.callbackId])
    })))

  it.live("a subscriber that falls behind is ended as a slow consumer, and the client resumes without a gap", () =>
    Effect.scoped(Effect.gen(function*() {
      const { a, ends, path, sessions } = yield* daemon(yield* Ref.make(0), 8)
      // A connection is paced by its slowest stream, so the stalled subscription gets one of its own.
      const client = yield* SessionClient.connect(path, { token: TOKEN_A, streamBuffer: 1 })
      const control = yield* connect(path, TOKEN_A)
      const session = yield* control.create({ agent: "talker" })
      const release = yield* Deferred.make<void>()
      const subscribed = yield* Deferred.make<void>()
      const head = (yield* control.snapshot(session.id)).cursor
      // The consumer holds its first event until the turn is over: the socket fills, then the server's buffer.
      const reader = yield* client.events(session.id, { volatile: true }).pipe(
        Stream.tap(() => Effect.andThen(Deferred.succeed(subscribed, undefined), Deferred.await(release))),
        Stream.takeUntil(({ event }) => event._tag === "durable" && event.record._tag === "turn_ended"),
        Stream.runCollect,
        Effect.fork
      )
      assert.strictEqual(head, 1)
      // A second subscriber that keeps up. Without one, the stalled subscription would be the session's last
      // live subscriber, and its leaving mid-turn hits a host bug: the turn is interrupted (see the report).
      const watcher = yield* control.events(session.id).pipe(
        Stream.takeUntil(({ event }) => event._tag === "durable" && event.record._tag === "turn_ended"),
        Stream.runDrain,
        Effect.fork
      )
      yield* Deferred.await(subscribed)
      // Both replays (one event each) are over; give their servers a moment to start following live.
      yield* Effect.sleep("100 millis")
      const accepted = yield* control.send(session.id, { text: "talk" })
      yield* sessions.awaitTurn(a, session.id, accepted.turnId!)
      yield* Fiber.join(watcher)
      yield* Deferred.succeed(release, undefined)
      const frames = Chunk.toReadonlyArray(yield* Fiber.join(reader))
      const cursors = frames.flatMap(({ cursor }) => (cursor === undefined ? [] : [cursor]))
      assert.deepStrictEqual(cursors, Array.from({ length: cursors.length }, (_, i) => i + 1), "every durable event once")
      // The server ended the stalled subscription as a slow consumer, and the client subscribed again from its cursor.
      assert.include(yield* Ref.get(ends), "slow_consumer")
      const last = frames.at(-1)!.event
      assert.isTrue(last._tag === "durable" && last.record._tag === "turn_ended" && last.record.output === LONG)
    })))

  describe("reconnecting", () => {
    const fast = { initialDelay: "10 millis", maxDelay: "50 millis" } as const

    it.live("a daemon that restarts: the event stream resumes from its cursor, requests reconnect", () =>
      Effect.scoped(Effect.gen(function*() {
        const { a, path, sessions, start, stop } = yield* daemon(yield* Ref.make(0))
        const client = yield* SessionClient.connect(path, { token: TOKEN_A, reconnect: { ...fast, attempts: 100 } })
        const session = yield* client.create({ agent: "talker" })
        const first = client.connection
        const firstTurn = yield* Deferred.make<void>()
        let ended = 0
        const reader = yield* client.events(session.id).pipe(
          Stream.tap(({ event }) => isTurnEnd(event) && ++ended === 1 ? Deferred.succeed(firstTurn, undefined) : Effect.void),
          Stream.takeUntil(({ event }) => isTurnEnd(event) && ended === 2),
          Stream.runCollect,
          Effect.fork
        )
        const one = yield* client.send(session.id, { text: "one" })
        yield* sessions.awaitTurn(a, session.id, one.turnId!)
        yield* Deferred.await(firstTurn)

        // The daemon goes away (its socket file too) and comes back on the same path.
        yield* stop
        yield* Effect.sleep("100 millis")
        yield* start
        const two = yield* client.send(session.id, { text: "two" })
        yield* sessions.awaitTurn(a, session.id, two.turnId!)
        const frames = Chunk.toReadonlyArray(yield* Fiber.join(reader))
        const cursors = frames.flatMap(({ cursor }) => (cursor === undefined ? [] : [cursor]))
        assert.deepStrictEqual(cursors, Array.from({ length: cursors.length }, (_, i) => i + 1), "every durable event once")
        assert.strictEqual(frames.filter(({ event }) => isTurnEnd(event)).length, 2)
        assert.notStrictEqual(client.connection, first, "a new connection")
        assert.strictEqual((yield* client.get(session.id)).status, "idle")
      })))

    it.live("a daemon that stays away: streams and requests fail with Closed after the bounded attempts", () =>
      Effect.scoped(Effect.gen(function*() {
        const { path, stop } = yield* daemon(yield* Ref.make(0))
        const client = yield* SessionClient.connect(path, { token: TOKEN_A, reconnect: { ...fast, attempts: 3 } })
        const session = yield* client.create({ agent: "talker" })
        const reader = yield* Effect.fork(Stream.runDrain(client.events(session.id)))
        yield* Effect.sleep("50 millis")
        yield* stop
        const error = yield* Effect.flip(Fiber.join(reader))
        assert.strictEqual(error._tag, "Closed")
        assert.match((error as { reason: string }).reason, /reconnecting failed: cannot connect to unix:.*ENOENT/)
        const later = yield* Effect.flip(client.get(session.id))
        assert.strictEqual(later._tag, "Closed")
      })))

    it.live("reconnect: false, and a client made over a caller's connection, never reconnect", () =>
      Effect.scoped(Effect.gen(function*() {
        const { path, start, stop } = yield* daemon(yield* Ref.make(0))
        const once = yield* SessionClient.connect(path, { token: TOKEN_A, reconnect: false })
        const raw = SessionClient.make(yield* AgentClient.make(path))
        yield* raw.hello({ token: TOKEN_A })
        const session = yield* once.create({ agent: "talker" })
        const streams = yield* Effect.fork(Effect.all([
          Effect.flip(Stream.runDrain(once.events(session.id))),
          Effect.flip(Stream.runDrain(raw.events(session.id)))
        ], { concurrency: 2 }))
        yield* Effect.sleep("50 millis")
        yield* stop
        yield* start
        const [fromOnce, fromRaw] = yield* Fiber.join(streams)
        assert.deepStrictEqual([fromOnce._tag, fromRaw._tag], ["Closed", "Closed"])
        assert.strictEqual((yield* Effect.flip(once.get(session.id)))._tag, "Closed")
      })))

    it.live("reconnectSchedule: exponential, capped at maxDelay (with jitter), `attempts` connection attempts in all", () =>
      Effect.gen(function*() {
        const schedule = SessionClient.reconnectSchedule({ initialDelay: "100 millis", maxDelay: "1 second", attempts: 8 })
        const delays = Chunk.toReadonlyArray(yield* Schedule.run(Schedule.delays(schedule), 0, Chunk.range(1, 7)))
        const nominal = [100, 200, 400, 800, 1000, 1000, 1000]
        delays.map(Duration.toMillis).forEach((ms, i) => {
          assert.isAtLeast(ms, nominal[i]! * 0.8 - 1, `wait ${i}`)
          assert.isAtMost(ms, nominal[i]! * 1.2 + 1, `wait ${i}`)
        })
        // Counted where it is used: a retry of a connection that keeps failing.
        let attempts = 0
        yield* Effect.flip(Effect.retry(
          Effect.suspend(() => Effect.fail(++attempts)),
          SessionClient.reconnectSchedule({ initialDelay: "1 millis", maxDelay: "2 millis", attempts: 8 })
        ))
        assert.strictEqual(attempts, 8)
      }))
  })

  describe("Promise API", () => {
    it.live("PromiseClient.connect: requests, events as an async iterator, a provider with an async handler, disconnect", () =>
      Effect.scoped(Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const { a, path, sessions } = yield* daemon(runs)
        const client = yield* Effect.promise(() => PromiseClient.connect(path, { token: TOKEN_A, timeout: "5 seconds" }))
        const result = yield* Effect.promise(async () => {
          await client.ping()
          const agents = await client.agents()
          const session = await client.create({ agent: "timed", title: "deploys" })
          const refused = await client.create({ agent: "nobody" }).then(() => undefined, (error: unknown) => error)
          const asked: Array<string> = []
          const expiries: Array<number | undefined> = []
          const provider = client.provideCallbacks(session.id, ["approval"], async (callback) => {
            asked.push(callback.request.toolName)
            expiries.push(callback.expiresAt === undefined ? undefined : callback.expiresAt - callback.openedAt)
            return { decision: "approve" }
          })
          const events = await client.events(session.id)
          const accepted = await client.send(session.id, { text: "ship it" })
          const kinds: Array<string> = []
          for await (const { event } of events) {
            if (event._tag === "durable") kinds.push(event.record._tag)
            if (isTurnEnd(event)) break
          }
          await provider.stop()
          await provider.done
          const renamed = await client.rename(session.id, "renamed")
          const page = await client.list()
          return { accepted, agents, asked, expiries, kinds, page, refused, renamed, session }
        })
        assert.deepStrictEqual(result.agents.map((agent) => agent.name), ["worker", "talker", "timed"])
        assert.instanceOf(result.refused, SessionClient.ServerError)
        assert.strictEqual((result.refused as SessionClient.ServerError).kind, "not_found")
        assert.deepStrictEqual(result.asked, ["deploy"])
        assert.lengthOf(result.expiries, 1)
        assert.approximately(result.expiries[0]!, 60_000, 1_000, "the PendingCallback carries expiresAt")
        assert.includeMembers(result.kinds, ["turn_started", "callback_opened", "callback_resolved", "turn_ended"])
        assert.strictEqual(result.renamed.title, "renamed")
        assert.deepStrictEqual(result.page.items.map((s) => s.id), [result.session.id])
        const turn = yield* sessions.awaitTurn(a, result.session.id, result.accepted.turnId!)
        assert.strictEqual(turn.output, "done")
        assert.strictEqual(yield* Ref.get(runs), 1)

        // After disconnect, calls reject with Closed; disconnecting again is harmless.
        yield* Effect.promise(() => client.disconnect())
        const closed = yield* Effect.promise(() => client.get(result.session.id).then(() => undefined, (error: unknown) => error))
        assert.instanceOf(closed, AgentClient.Closed)
        yield* Effect.promise(() => client.disconnect())
      })))

    it.live("an event iterator ends after a replay (follow: false) and rejects with the stream's error", () =>
      Effect.scoped(Effect.gen(function*() {
        const { path } = yield* daemon(yield* Ref.make(0))
        const owner = yield* Effect.promise(() => PromiseClient.connect(path, { token: TOKEN_A }))
        const other = yield* Effect.promise(() => PromiseClient.connect(path, { token: TOKEN_B }))
        const outcome = yield* Effect.promise(async () => {
          const session = await owner.create({ agent: "talker" })
          const cursors: Array<number | undefined> = []
          for await (const frame of await owner.events(session.id, { follow: false })) cursors.push(frame.cursor)
          const foreign = await other.events(session.id)
          const error = await foreign.next().then(() => undefined, (error: unknown) => error)
          const after = await foreign.next()
          await owner.disconnect()
          await other.disconnect()
          return { after, cursors, error }
        })
        assert.deepStrictEqual(outcome.cursors, [1])
        assert.instanceOf(outcome.error, SessionClient.ServerError)
        assert.strictEqual((outcome.error as SessionClient.ServerError).kind, "not_found")
        assert.isTrue(outcome.after.done)
      })))
  })
})
