/**
 * Shared pieces of the transport tests: a temp directory, a test router whose
 * handlers report what happened to them, a server started in the test's
 * scope, and a raw peer that writes arbitrary bytes and reads frames back.
 */
import { Context, Deferred, Duration, Effect, Either, Layer, Option, Queue, Ref, Schema, type Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Envelope from "../../src/protocol/Envelope.js"
import * as Frame from "../../src/protocol/Frame.js"
import * as Handshake from "../../src/protocol/Handshake.js"
import * as Messages from "../../src/protocol/Messages.js"
import type { Principal } from "../../src/schema/Principal.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import type * as Connection from "../../src/server/Connection.js"
import { type Handler, type Outgoing, type Route, Router, WireError } from "../../src/server/Router.js"
import type * as Listener from "../../src/server/Listener.js"
import * as Server from "../../src/server/Server.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as SessionRoutes from "../../src/server/SessionRoutes.js"
import * as Troupe from "../../src/Troupe.js"
import { deployingAgent } from "../support/deploy.js"
import { principal as freshPrincipal } from "../support/fixtures.js"

/** A directory removed with the scope. Short, so socket paths stay under the 108-byte limit. */
export const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "tr-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** The token the tests authenticate with, and its principal. */
export const TOKEN = "s3cret-token"
export const tokenPrincipal: Principal = freshPrincipal("token-user")
/** The principal of trusted-local peers. */
export const localPrincipal: Principal = freshPrincipal("local-user")

/** Authenticates `TOKEN` only (no trusted-local). */
export const tokenAuth = Authenticator.layerStatic({ [TOKEN]: tokenPrincipal })
/** Trusted-local peers are `localPrincipal`; `TOKEN` works too. */
export const localAuth = Authenticator.layerTrustedLocal(localPrincipal, tokenAuth)

/** The peer an exchange saw. */
export interface SeenPeer {
  readonly principal: Option.Option<Principal>
  readonly excludeFromAnalytics: boolean
}

/** What the test handlers report. */
export interface Probes {
  /** Completed when `test.hang` has started, with its id. */
  readonly hangStarted: Queue.Queue<number>
  /** Receives the id of every `test.hang` that was interrupted. */
  readonly hangInterrupted: Queue.Queue<number>
  /** Receives the id of every stream handler that was interrupted. */
  readonly streamInterrupted: Queue.Queue<number>
  /** Receives the id of every `test.items` stream that has emitted all its items. */
  readonly itemsEmitted: Queue.Queue<number>
  /** Receives the peer of every `test.whoami`. */
  readonly peers: Queue.Queue<SeenPeer>
  /** Opened to let every `test.gate` finish. */
  readonly gate: Deferred.Deferred<void>
}

/** Fresh probes. */
export const makeProbes: Effect.Effect<Probes> = Effect.gen(function*() {
  return {
    hangStarted: yield* Queue.unbounded<number>(),
    hangInterrupted: yield* Queue.unbounded<number>(),
    streamInterrupted: yield* Queue.unbounded<number>(),
    itemsEmitted: yield* Queue.unbounded<number>(),
    peers: yield* Queue.unbounded<SeenPeer>(),
    gate: yield* Deferred.make<void>()
  }
})

const Count = Schema.Struct({ n: Schema.Int.pipe(Schema.between(0, 1_000_000)) })

const request = (handler: Handler): Route => ({ kind: "request", handler })
const stream = (handler: Handler): Route => ({ kind: "stream", handler })

/**
 * The test routes:
 * - `test.echo` → `test.echoed` with the same payload;
 * - `test.fail` → `core.error not_found`; `test.die` → a defect carrying a secret;
 * - `test.count { n }` → invalid_payload unless `n` is an int; else `test.counted { n }`;
 * - `test.hang` waits forever (reports start and interruption); `test.gate` waits for `probes.gate`;
 * - `test.whoami` reports the exchange's peer;
 * - `test.items { n }` (stream) emits n `test.item { i }` then `test.end`;
 * - `test.deaf` (stream) emits `test.open`, never reads follow-ups, ends when `probes.gate` opens;
 * - `test.follow` (stream) emits `test.open`, then echoes follow-ups as `test.got` until
 *   `test.cancel`, which ends it with `test.cancelled`.
 */
export const testRoutes = (probes: Probes): Record<string, Route> => ({
  "test.echo": request((exchange) => Effect.succeed({ type: "test.echoed", payload: exchange.payload })),
  "test.fail": request(() => Effect.fail(new WireError({ kind: "not_found", message: "nothing here" }))),
  "test.die": request(() => Effect.die(new Error("tenant 42 secret: hunter2"))),
  "test.count": request((exchange) =>
    Schema.decodeUnknown(Count)(exchange.payload).pipe(
      Effect.mapError((error) => new WireError({ kind: "invalid_payload", message: error.message })),
      Effect.map((count): Outgoing => ({ type: "test.counted", payload: { n: count.n } }))
    )
  ),
  "test.hang": request((exchange) =>
    Queue.offer(probes.hangStarted, exchange.id).pipe(
      Effect.andThen(Effect.never),
      Effect.onInterrupt(() => Queue.offer(probes.hangInterrupted, exchange.id))
    )
  ),
  "test.gate": request(() => Effect.as(Deferred.await(probes.gate), { type: "test.opened", payload: {} })),
  "test.whoami": request((exchange) =>
    Queue.offer(probes.peers, {
      principal: exchange.peer.principal,
      excludeFromAnalytics: exchange.peer.excludeFromAnalytics
    }).pipe(Effect.as({ type: "test.you", payload: { listener: exchange.peer.listener } }))
  ),
  "test.items": stream((exchange) =>
    Effect.gen(function*() {
      const { n } = yield* Effect.orDie(Schema.decodeUnknown(Count)(exchange.payload))
      for (let i = 0; i < n; i++) yield* exchange.emit({ type: "test.item", payload: { i } })
      yield* Queue.offer(probes.itemsEmitted, exchange.id)
      return { type: "test.end", payload: { n } }
    }).pipe(Effect.onInterrupt(() => Queue.offer(probes.streamInterrupted, exchange.id)))
  ),
  "test.deaf": stream((exchange) =>
    exchange.emit({ type: "test.open", payload: {} }).pipe(
      Effect.andThen(Deferred.await(probes.gate)),
      Effect.as({ type: "test.end", payload: {} }),
      Effect.onInterrupt(() => Queue.offer(probes.streamInterrupted, exchange.id))
    )
  ),
  "test.follow": stream((exchange) =>
    Effect.gen(function*() {
      yield* exchange.emit({ type: "test.open", payload: {} })
      for (;;) {
        const next = yield* Queue.take(exchange.followUps)
        if (next.type === "test.cancel") return { type: "test.cancelled", payload: {} }
        yield* exchange.emit({ type: "test.got", payload: { type: next.type, payload: next.payload } })
      }
    }).pipe(Effect.onInterrupt(() => Queue.offer(probes.streamInterrupted, exchange.id)))
  )
})

/** A router over a table of routes. */
export const routerOf = (routes: Record<string, Route>): Router["Type"] =>
  Router.of({ route: (type) => Object.hasOwn(routes, type) ? routes[type] : undefined })

/** Starts a server in the current scope. */
export const startServer = (
  options: Server.Options,
  router: Router["Type"],
  auth: Layer.Layer<Authenticator.Authenticator> = tokenAuth
): Effect.Effect<Server.Server["Type"], Listener.ListenError | Listener.AddressInUse, Scope.Scope> =>
  Layer.build(
    Server.layer(options).pipe(Layer.provide(Layer.merge(Layer.succeed(Router, router), auth)))
  ).pipe(Effect.map((context) => Context.get(context, Server.Server)))

/** A server with the test routes on a unix socket (trusted-local) and on TCP (token), in this scope. */
export const testDaemon = (connection?: Connection.Options) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const probes = yield* makeProbes
    const path = join(dir, "agent.sock")
    const server = yield* startServer(
      { unix: path, tcp: { host: "127.0.0.1", port: 0 }, connection },
      routerOf(testRoutes(probes)),
      localAuth
    )
    return { dir, path, probes, port: Option.getOrThrow(server.tcp).port }
  })

/**
 * A daemon on a trusted-local unix socket serving the real session routes
 * over the test runtime, with one agent, `worker` (it answers "done").
 */
export const sessionDaemon = Effect.gen(function*() {
  const context = yield* Layer.build(
    Layer.effect(Router, SessionRoutes.make()).pipe(
      Layer.provide(AgentCatalog.layer([deployingAgent("worker", "Deploys.")])),
      Layer.provideMerge(Troupe.layerTest({ scripts: { agents: { worker: ["done"] } } }))
    )
  )
  const router = Context.get(context, Router)
  const dir = yield* tempDir
  const path = join(dir, "agent.sock")
  yield* startServer({ unix: path }, router, localAuth)
  return { path, router }
})

/**
 * The real session routes, with each `session.events` stream counted as it
 * starts (`subscriptions`) and the reason it ended noted (`ends`).
 */
export const observedSessionRoutes = (options: SessionRoutes.Options = {}) =>
  Effect.gen(function*() {
    const ends = yield* Ref.make<ReadonlyArray<string>>([])
    const subscriptions = yield* Ref.make(0)
    const routes = Layer.effect(
      Router,
      Effect.map(SessionRoutes.make(options), (router) =>
        Router.of({
          route: (type) => {
            const route = router.route(type)
            if (route === undefined || type !== Messages.Type.sessionEvents) return route
            return {
              ...route,
              handler: (exchange) =>
                Effect.andThen(
                  Ref.update(subscriptions, (n) => n + 1),
                  Effect.tap(route.handler(exchange), (end) =>
                    Ref.update(ends, (all) => [...all, (end.payload as { reason: string }).reason]))
                )
            }
          }
        }))
    )
    return { routes, ends, subscriptions }
  })

/** The body of a message. */
export const body = (type: string, payload: unknown): Uint8Array => Envelope.encodeBodyUnsafe(type, payload)

/** The bytes of a frame with any id, flags and body: no check, so tests can send what encoders refuse. */
export const rawFrame = (id: number, flags: number, bytes: Uint8Array): Uint8Array => {
  const out = Buffer.alloc(9 + bytes.length)
  out.writeUInt32BE(5 + bytes.length, 0)
  out.writeUInt32BE(id, 4)
  out[8] = flags
  out.set(bytes, 9)
  return out
}

/** The bytes of a message frame (any id and flags). */
export const frame = (id: number, flags: number, type: string, payload: unknown): Uint8Array =>
  rawFrame(id, flags, body(type, payload))

/** A frame's message. */
export const decode = (raw: Frame.RawFrame): { readonly id: number; readonly flags: number; readonly t: string; readonly payload: unknown } => {
  const decoded = Envelope.decodeBody(raw.body)
  if (Either.isLeft(decoded)) throw new Error(`undecodable frame on id ${raw.id}: ${decoded.left.message}`)
  return { id: raw.id, flags: raw.flags, t: decoded.right.t, payload: decoded.right.payload }
}

/** Where a raw peer connects. */
export type Target = { readonly path: string } | { readonly host: string; readonly port: number }

/** A peer that writes any bytes and reads the server's frames. */
export interface RawPeer {
  /** Every byte of the handshake: preamble and core.ready frame. */
  readonly handshake: Uint8Array
  readonly range: Handshake.IdRange
  readonly ready: Frame.RawFrame
  readonly write: (bytes: Uint8Array) => Effect.Effect<void>
  /** The next frame, or `closed` once the server hung up (fails after 5 s: a guard, not a wait). */
  readonly next: Effect.Effect<Frame.RawFrame | "closed">
  /** The next frame, decoded; fails if the connection closed. */
  readonly nextMessage: Effect.Effect<ReturnType<typeof decode>>
  /** Sends a message and returns the next frame decoded. */
  readonly exchange: (id: number, flags: number, type: string, payload: unknown) => Effect.Effect<ReturnType<typeof decode>>
  readonly destroy: Effect.Effect<void>
}

const GUARD = Duration.seconds(5)

/** Connects a raw peer in the current scope and reads the handshake. */
export const rawConnect = (target: Target): Effect.Effect<RawPeer, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const received = yield* Queue.unbounded<Frame.RawFrame | "closed">()
    const head: Array<Buffer> = []
    let headBytes = 0
    const decoder = Frame.makeDecoder()
    const socket = yield* Effect.acquireRelease(
      Effect.async<net.Socket, Error>((resume) => {
        const socket = net.connect(target)
        socket.once("connect", () => resume(Effect.succeed(socket)))
        socket.once("error", (error) => resume(Effect.fail(error)))
      }),
      (socket) => Effect.sync(() => socket.destroy())
    )
    socket.on("error", () => undefined)
    socket.on("data", (chunk: Buffer) => {
      let rest = chunk
      if (headBytes < Handshake.PREAMBLE_SIZE) {
        const take = Math.min(Handshake.PREAMBLE_SIZE - headBytes, rest.length)
        head.push(rest.subarray(0, take))
        headBytes += take
        rest = rest.subarray(take)
      }
      const decoded = decoder.push(rest)
      for (const frame of decoded.frames) Queue.unsafeOffer(received, frame)
    })
    socket.on("close", () => Queue.unsafeOffer(received, "closed"))
    const next = Queue.take(received).pipe(
      Effect.timeoutFail({ duration: GUARD, onTimeout: () => new Error("no frame within 5 s") }),
      Effect.orDie
    )
    const nextMessage = Effect.flatMap(next, (frame) =>
      frame === "closed" ? Effect.die(new Error("connection closed")) : Effect.sync(() => decode(frame)))
    const ready = yield* next
    if (ready === "closed") return yield* Effect.fail(new Error("closed during the handshake"))
    const preamble = Buffer.concat(head)
    const range = Either.getOrThrow(Handshake.decodePreamble(preamble))
    const write = (bytes: Uint8Array) =>
      Effect.async<void>((resume) => {
        socket.write(bytes, () => resume(Effect.void))
      })
    return {
      handshake: Buffer.concat([preamble, Frame.encodeUnsafe(ready)]),
      range,
      ready,
      write,
      next,
      nextMessage,
      exchange: (id, flags, type, payload) => Effect.andThen(write(frame(id, flags, type, payload)), nextMessage),
      destroy: Effect.sync(() => socket.destroy())
    } satisfies RawPeer
  })

/** The id 0 `core.error` kind and whether the server then closed, for fatal cases. */
export const expectClosedAfter = (peer: RawPeer) =>
  Effect.gen(function*() {
    const error = yield* peer.nextMessage
    const after = yield* peer.next
    return { error, closed: after === "closed" }
  })

/** A ping exchange on `peer` with id `id`; returns the answer's type. */
export const ping = (peer: RawPeer, id: number) =>
  Effect.map(peer.exchange(id, 0, "core.ping", {}), (answer) => `${answer.t}#${answer.id}/${answer.flags}`)
