/**
 * End to end over a real unix socket and TCP: a daemon as `troupe serve` runs
 * one (`Server` with both listeners, the session routes, the agent catalog,
 * a token authenticator with two tenants, the runtime on a SQLite file),
 * driven by `SessionClient`. Every scenario runs over both transports:
 *
 * - two tenants are isolated: every operation on another tenant's session is
 *   `not_found`, and lists are disjoint;
 * - a connection dropped mid-stream (a proxy between client and daemon cuts
 *   it, during the replay and again while following a turn) resumes without
 *   gaps or duplicates: the cursors the client saw are exactly the log's;
 * - a subscriber that falls behind is ended as a slow consumer and resumes;
 * - bad frames of every kind get the specified answer while a second client,
 *   following a session, carries on unaffected.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Either, Fiber, Layer, Option, Ref, type Scope, Stream } from "effect"
import * as net from "node:net"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import * as Cbor from "../../src/protocol/Cbor.js"
import * as Frame from "../../src/protocol/Frame.js"
import { makeCallbackId, makeTurnId, type SessionId } from "../../src/schema/Ids.js"
import type { Principal } from "../../src/schema/Principal.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import * as Server from "../../src/server/Server.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Troupe from "../../src/Troupe.js"
import { agent, principal } from "../support/fixtures.js"
import * as H from "../server/harness.js"

const TOKEN_A = "token-tenant-a"
const TOKEN_B = "token-tenant-b"

/** A long reply: thousands of deltas, more than the socket and both buffers hold. */
const LONG = Array.from({ length: 6000 }, (_, i) => `word${i}`).join(" ")

type Via = "unix" | "tcp"

/** A running daemon and what the tests look at inside it. */
interface Daemon {
  readonly unix: H.Target
  readonly tcp: H.Target
  readonly a: Principal
  readonly b: Principal
  readonly sessions: Sessions["Type"]
  /** The reason of every `session.events` exchange's end, in order. */
  readonly ends: Ref.Ref<ReadonlyArray<string>>
  /** How many `session.events` exchanges were opened. */
  readonly subscriptions: Ref.Ref<number>
}

/** A daemon on a fresh unix socket and a TCP port, over a SQLite file, in the test's scope. */
const daemon = (options: { readonly eventBuffer?: number } = {}) =>
  Effect.gen(function*() {
    const dir = yield* H.tempDir
    const path = join(dir, "agent.sock")
    const a = principal("a")
    const b = principal("b")
    const runtime = Troupe.layerSqlite({ filename: join(dir, "troupe.db") }, { scripts: { agents: { talker: [LONG] } } })
    const { ends, routes: observed, subscriptions } = yield* H.observedSessionRoutes({ eventBuffer: options.eventBuffer })
    const routes = observed.pipe(Layer.provide(AgentCatalog.layer([agent("echo"), agent("talker")])))
    const app = Layer.provideMerge(
      Layer.mergeAll(routes, Authenticator.layerStatic({ [TOKEN_A]: a, [TOKEN_B]: b })),
      runtime
    )
    const server = Server.layer({ unix: { path, trustedLocal: false }, tcp: { host: "127.0.0.1", port: 0 } })
    const context = yield* Layer.build(Layer.provideMerge(server, app))
    const port = Option.getOrThrow(Context.get(context, Server.Server).tcp).port
    return {
      unix: { path },
      tcp: { host: "127.0.0.1", port },
      a,
      b,
      sessions: Context.get(context, Sessions),
      ends,
      subscriptions
    } satisfies Daemon
  })

/** A client of `target` (a socket path or a TCP address). */
const connectTo = (
  target: H.Target,
  token: string,
  options: SessionClient.ConnectOptions = {}
): Effect.Effect<SessionClient.SessionClient, unknown, Scope.Scope> => {
  const settings = { token, timeout: "5 seconds", ...options } as const
  return "path" in target
    ? SessionClient.connect(target.path, settings)
    : SessionClient.connectTcp(target.host, target.port, settings)
}

/** A relay between clients and a daemon that the test can cut. */
interface Proxy {
  /** Where clients connect. */
  readonly target: H.Target
  /** Destroys every relayed connection, both sides; the proxy keeps accepting. */
  readonly drop: Effect.Effect<void>
  /** Connections accepted so far. */
  readonly accepted: () => number
}

/** A proxy to `upstream`, listening on the same kind of address (a socket in `dir`, or a TCP port). */
const proxy = (upstream: H.Target, dir: string): Effect.Effect<Proxy, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: net.Server; readonly proxy: Proxy }, Error>((resume) => {
      const sockets = new Set<net.Socket>()
      let accepted = 0
      const server = net.createServer((downstream) => {
        accepted++
        const up = net.connect(upstream)
        for (const socket of [downstream, up]) {
          sockets.add(socket)
          socket.on("error", () => undefined)
          socket.on("close", () => {
            sockets.delete(socket)
            downstream.destroy()
            up.destroy()
          })
        }
        if ("port" in upstream) {
          downstream.setNoDelay(true)
          up.setNoDelay(true)
        }
        downstream.pipe(up)
        up.pipe(downstream)
      })
      const listen = "path" in upstream ? { path: join(dir, `proxy-${accepted}-${Date.now()}.sock`) } : { host: "127.0.0.1", port: 0 }
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(listen, () => {
        const address = server.address()
        const target: H.Target = typeof address === "string"
          ? { path: address }
          : { host: "127.0.0.1", port: address!.port }
        resume(Effect.succeed({
          server,
          proxy: {
            target,
            drop: Effect.sync(() => {
              for (const socket of sockets) socket.destroy()
            }),
            accepted: () => accepted
          }
        }))
      })
    }),
    ({ proxy, server }) =>
      Effect.andThen(
        proxy.drop,
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
        })
      )
  ).pipe(Effect.map(({ proxy }) => proxy))

const serverError = <A, E>(self: Effect.Effect<A, E>) =>
  Effect.flip(self).pipe(
    Effect.map((error) => {
      assert.instanceOf(error, SessionClient.ServerError)
      return error as SessionClient.ServerError
    })
  )

const isTurnEnd = (event: SessionClient.EventFrame["event"]) => event._tag === "durable" && event.record._tag === "turn_ended"

/** The durable cursors of `frames`, in order. */
const cursorsOf = (frames: ReadonlyArray<SessionClient.EventFrame>) =>
  frames.flatMap(({ cursor }) => (cursor === undefined ? [] : [cursor]))

/** The session's whole log as the daemon has it: cursor and record kind of every durable event. */
const logOf = (d: Daemon, owner: Principal, sessionId: SessionId) =>
  d.sessions.events(owner, sessionId, { follow: false }).pipe(
    Stream.runCollect,
    Effect.map((events) =>
      Chunk.toReadonlyArray(events).flatMap((event) =>
        event._tag === "durable" ? [[event.cursor, event.record._tag] as const] : []
      )
    )
  )

const VIAS: ReadonlyArray<Via> = ["unix", "tcp"]

describe("remote sessions end to end", () => {
  for (const via of VIAS) {
    describe(`over ${via}`, () => {
      it.live("two tenants are isolated: another tenant's session is not_found everywhere; lists are disjoint", () =>
        Effect.scoped(Effect.gen(function*() {
          const d = yield* daemon()
          const owner = yield* connectTo(d[via], TOKEN_A)
          const other = yield* connectTo(d[via], TOKEN_B)
          const mine = yield* owner.create({ agent: "echo", title: "tenant a" })
          const theirs = yield* other.create({ agent: "echo", title: "tenant b" })
          const accepted = yield* owner.send(mine.id, { text: "hello" })
          yield* d.sessions.awaitTurn(d.a, mine.id, accepted.turnId!)

          assert.deepStrictEqual((yield* owner.list()).items.map((s) => s.id), [mine.id])
          assert.deepStrictEqual((yield* other.list()).items.map((s) => s.id), [theirs.id])
          assert.deepStrictEqual((yield* other.list({ scope: "roots", includeArchived: true })).items.map((s) => s.id), [theirs.id])

          const callbackId = yield* makeCallbackId
          const turnId = yield* makeTurnId
          const attempts: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
            ["get", other.get(mine.id)],
            ["send", other.send(mine.id, { text: "intrude" })],
            ["steer", other.send(mine.id, { text: "intrude", mode: "steer" })],
            ["snapshot", other.snapshot(mine.id)],
            ["rename", other.rename(mine.id, "taken")],
            ["archive", other.archive(mine.id, true)],
            ["close", other.close(mine.id)],
            ["interrupt", other.interrupt(mine.id, turnId)],
            ["answerCallback", other.answerCallback(mine.id, { callbackId, result: { decision: "approve" } })],
            ["events (replay)", Stream.runDrain(other.events(mine.id, { follow: false }))],
            ["events (follow)", Stream.runDrain(other.events(mine.id))],
            ["provideCallbacks", other.provideCallbacks(mine.id, ["approval"], () => Effect.succeed(Option.none()))],
            ["list children", other.list({ scope: { children: mine.id } })]
          ]
          for (const [name, attempt] of attempts) {
            const error = yield* serverError(attempt)
            assert.strictEqual(error.kind, "not_found", name)
            assert.notInclude(error.message, "tenant a", name)
          }
          // Nothing changed: the owner's session is as it was, its log only the owner's turn.
          const after = yield* owner.get(mine.id)
          assert.deepStrictEqual([after.title, after.archived, after.status], ["tenant a", false, "idle"])
          const texts = (yield* logOf(d, d.a, mine.id)).map(([, kind]) => kind)
          assert.strictEqual(texts.filter((kind) => kind === "turn_ended").length, 1)
        })))

      it.live("a connection dropped mid-stream (during the replay, then while following turns) resumes without gaps or duplicates", () =>
        Effect.scoped(Effect.gen(function*() {
          const d = yield* daemon()
          const dir = yield* H.tempDir
          const relay = yield* proxy(d[via], dir)
          const client = yield* connectTo(relay.target, TOKEN_A, {
            reconnect: { initialDelay: "10 millis", maxDelay: "100 millis" },
            // The client stops reading the socket once 4 frames wait for the consumer.
            streamBuffer: 4
          })
          // Each `talker` turn commits its long reply twice (the model call's output and the turn's), so the
          // log is far larger than every buffer between daemon and client: a cut during the replay loses data.
          const session = yield* client.create({ agent: "talker" })
          for (let i = 0; i < 16; i++) {
            const accepted = yield* client.send(session.id, { text: `message ${i}` })
            yield* d.sessions.awaitTurn(d.a, session.id, accepted.turnId!)
          }
          const head = (yield* client.snapshot(session.id)).cursor
          const logBytes = JSON.stringify(yield* Stream.runCollect(d.sessions.events(d.a, session.id, { follow: false }))).length
          assert.isAbove(logBytes, 1_500_000)

          const caughtUp = yield* Deferred.make<void>()
          const queued = 4
          let seen = 0
          let drops = 0
          let liveEnds = 0
          const reader = yield* client.events(session.id).pipe(
            Stream.tap(({ cursor, event }) =>
              Effect.gen(function*() {
                seen++
                if (cursor !== undefined && cursor > head && isTurnEnd(event)) liveEnds++
                // The first cut: early in the replay.
                if (seen === 7) {
                  drops++
                  yield* relay.drop
                }
                if (cursor === head) yield* Deferred.succeed(caughtUp, undefined)
                // The second cut: at the first live event, while the first of the queued turns runs.
                if (cursor === head + 1) {
                  drops++
                  yield* relay.drop
                }
              })
            ),
            Stream.takeUntil(() => liveEnds === queued),
            Stream.runCollect,
            Effect.fork
          )
          yield* Deferred.await(caughtUp)
          // Several turns at once: they run one after another, mostly after the cut.
          const accepted = yield* Effect.forEach(
            Array.from({ length: queued }, (_, i) => `more ${i}`),
            (text) => client.send(session.id, { text })
          )
          for (const { turnId } of accepted) {
            if (turnId !== undefined) assert.strictEqual((yield* d.sessions.awaitTurn(d.a, session.id, turnId)).output, LONG)
          }
          const frames = Chunk.toReadonlyArray(yield* Fiber.join(reader))

          assert.strictEqual(drops, 2)
          assert.strictEqual(relay.accepted(), 3, "the client connected again after each cut")
          assert.strictEqual(yield* Ref.get(d.subscriptions), 3, "and subscribed again after each")
          const log = yield* logOf(d, d.a, session.id)
          assert.deepStrictEqual(cursorsOf(frames), log.map(([cursor]) => cursor), "every durable event of the log, once, in order")
          assert.deepStrictEqual(
            frames.flatMap(({ event }) => (event._tag === "durable" ? [event.record._tag] : [])),
            log.map(([, kind]) => kind)
          )
          // The client is usable after the cuts, on its new connection.
          assert.strictEqual((yield* client.get(session.id)).status, "idle")
        })))

      it.live("a subscriber that falls behind is ended as a slow consumer and resumes without a gap", () =>
        Effect.scoped(Effect.gen(function*() {
          const d = yield* daemon({ eventBuffer: 8 })
          // A connection is paced by its slowest stream, so the stalled subscription gets one of its own.
          const slow = yield* connectTo(d[via], TOKEN_A, { streamBuffer: 1 })
          const control = yield* connectTo(d[via], TOKEN_A)
          const session = yield* control.create({ agent: "talker" })
          const release = yield* Deferred.make<void>()
          const subscribed = yield* Deferred.make<void>()
          const reader = yield* slow.events(session.id, { volatile: true }).pipe(
            Stream.tap(() => Effect.andThen(Deferred.succeed(subscribed, undefined), Deferred.await(release))),
            Stream.takeUntil(({ event }) => isTurnEnd(event)),
            Stream.runCollect,
            Effect.fork
          )
          // A second subscriber that keeps up (see the SessionClient test on why the session needs one).
          const watcher = yield* control.events(session.id).pipe(
            Stream.takeUntil(({ event }) => isTurnEnd(event)),
            Stream.runDrain,
            Effect.fork
          )
          yield* Deferred.await(subscribed)
          yield* Effect.sleep("100 millis")
          const accepted = yield* control.send(session.id, { text: "talk" })
          yield* d.sessions.awaitTurn(d.a, session.id, accepted.turnId!)
          yield* Fiber.join(watcher)
          yield* Deferred.succeed(release, undefined)
          const frames = Chunk.toReadonlyArray(yield* Fiber.join(reader))
          assert.include(yield* Ref.get(d.ends), "slow_consumer")
          const log = yield* logOf(d, d.a, session.id)
          assert.deepStrictEqual(cursorsOf(frames), log.map(([cursor]) => cursor), "every durable event once")
          const last = frames.at(-1)!.event
          assert.isTrue(last._tag === "durable" && last.record._tag === "turn_ended" && last.record.output === LONG)
        })))

      it.live("bad frames of every kind get their answer while a second client, following a session, carries on", () =>
        Effect.scoped(Effect.gen(function*() {
          const d = yield* daemon()
          const bystander = yield* connectTo(d[via], TOKEN_A, { reconnect: false })
          const connection = bystander.connection
          const session = yield* bystander.create({ agent: "echo" })
          const turns = 3
          const follower = yield* bystander.events(session.id).pipe(
            Stream.filter(({ event }) => isTurnEnd(event)),
            Stream.take(turns),
            Stream.runCollect,
            Effect.fork
          )
          const envelope = (fields: Record<string, unknown>) => Either.getOrThrow(Cbor.encode(fields))
          const { FLAG_SESSION_START: START, FLAG_SHUTDOWN: SHUTDOWN, FLAG_TERMINAL: TERMINAL } = Frame
          const cases: ReadonlyArray<{
            readonly name: string
            readonly bytes: Uint8Array
            readonly id: number
            readonly kind: string
            readonly open: boolean
          }> = [
            { name: "bad CBOR", bytes: H.rawFrame(5, 0, Buffer.from("ffff", "hex")), id: 5, kind: "malformed_message", open: true },
            { name: "not an envelope", bytes: H.rawFrame(5, 0, envelope({ v: 7, t: "session.get" })), id: 5, kind: "malformed_message", open: true },
            {
              name: "payload not CBOR",
              bytes: H.rawFrame(5, 0, envelope({ v: 7, t: "session.get", p: Buffer.from("ff", "hex") })),
              id: 5,
              kind: "malformed_message",
              open: true
            },
            {
              name: "v != 7",
              bytes: H.rawFrame(5, 0, envelope({ v: 8, t: "session.get", p: Buffer.from("a0", "hex") })),
              id: 5,
              kind: "unsupported_protocol_generation",
              open: true
            },
            { name: "unknown type", bytes: H.frame(6, 0, "session.explode", {}), id: 6, kind: "unsupported_message_type", open: true },
            { name: "unknown flag bits", bytes: H.frame(7, 0x10, "session.list", {}), id: 7, kind: "invalid_flags", open: true },
            { name: "SHUTDOWN on a request id", bytes: H.frame(7, SHUTDOWN, "session.list", {}), id: 7, kind: "invalid_flags", open: true },
            {
              name: "session.events without SESSION_START",
              bytes: H.frame(7, 0, "session.events", { sessionId: session.id }),
              id: 7,
              kind: "invalid_flags",
              open: true
            },
            { name: "session.list with SESSION_START", bytes: H.frame(7, START, "session.list", {}), id: 7, kind: "invalid_flags", open: true },
            { name: "bad payload", bytes: H.frame(8, 0, "session.get", { sessionId: 42 }), id: 8, kind: "invalid_payload", open: true },
            { name: "oversize length", bytes: Buffer.from("00400001000000", "hex"), id: 0, kind: "malformed_message", open: false },
            { name: "short length", bytes: Buffer.from("00000003000000", "hex"), id: 0, kind: "malformed_message", open: false },
            { name: "id 0 without SHUTDOWN", bytes: H.frame(0, 0, "core.ping", {}), id: 0, kind: "invalid_id", open: false },
            { name: "id outside the range", bytes: H.frame(0xffff_ffff, 0, "core.ping", {}), id: 0, kind: "invalid_id", open: false }
          ]
          let sent = 0
          for (const c of cases) {
            const peer = yield* H.rawConnect(d[via])
            assert.strictEqual((yield* peer.exchange(1, 0, "auth.hello", { token: TOKEN_B })).t, "auth.welcome", c.name)
            yield* peer.write(c.bytes)
            const answer = yield* peer.nextMessage
            assert.deepStrictEqual([answer.id, answer.flags, answer.t], [c.id, TERMINAL, "core.error"], c.name)
            assert.strictEqual((answer.payload as { kind: string }).kind, c.kind, c.name)
            if (c.open) assert.strictEqual(yield* H.ping(peer, 11), "core.pong#11/1", c.name)
            else assert.strictEqual(yield* peer.next, "closed", c.name)
            // The bystander carries on: requests answered, a turn runs, its events arrive.
            if (sent < turns) {
              const accepted = yield* bystander.send(session.id, { text: `after ${c.name}` })
              yield* d.sessions.awaitTurn(d.a, session.id, accepted.turnId!)
              sent++
            }
            yield* bystander.ping
          }
          const ends = Chunk.toReadonlyArray(yield* Fiber.join(follower))
          assert.strictEqual(ends.length, turns)
          assert.strictEqual(bystander.connection, connection, "the bystander never reconnected")
          assert.deepStrictEqual(
            cursorsOf(ends),
            (yield* logOf(d, d.a, session.id)).filter(([, kind]) => kind === "turn_ended").map(([cursor]) => cursor)
          )
        })))
    })
  }
})
