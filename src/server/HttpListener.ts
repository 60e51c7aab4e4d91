/**
 * The HTTP listener (HTTP.md): the `http/Api` served by
 * `@effect/platform-node`'s HTTP server on one or more addresses, beside the
 * socket listeners, over the same `Sessions`, catalog and `Authenticator`.
 *
 * Each request passes `HttpGuard` (Host, Origin, route, body limits), then
 * the `Authorization` middleware (a bearer token through the
 * `Authenticator`; on a `trustLocal` loopback listener, no token is the
 * local principal), then its handler (`HttpRoutes`, `HttpEvents`).
 * Node's own limits bound the rest: headers within `headersTimeout`, idle
 * keep-alive connections closed after `keepAliveTimeout`, at most
 * `maxConnections` sockets.
 *
 * Closing the layer drains: every open event stream ends with `event: end`
 * reason `shutdown` and its cursor, then the servers close.
 *
 * `staticAssets` serves files (the inspector's page) for GET requests no
 * endpoint takes, behind the same Host check. `writes` makes a listener
 * read-only (every state-changing endpoint 403 `forbidden`), or read-only but
 * for callback answers.
 *
 * @since 0.3.0
 */
import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { createServer } from "node:http"
import { Api } from "../http/Api.js"
import { SessionId } from "../schema/Ids.js"
import { Principal } from "../schema/Principal.js"
import { AgentCatalog } from "../services/AgentCatalog.js"
import { Sessions } from "../services/Sessions.js"
import { SessionStore } from "../services/SessionStore.js"
import { Authenticator } from "./Authenticator.js"
import * as HttpEvents from "./HttpEvents.js"
import * as HttpGuard from "./HttpGuard.js"
import * as HttpRoutes from "./HttpRoutes.js"
import { ListenError } from "./Listener.js"

/** One address to listen on (port 0 picks a free one). */
export interface Address {
  readonly host: string
  readonly port: number
}

/** The listener's options; everything but `listen` has a default. */
export interface Options {
  /** The addresses, one server each. */
  readonly listen: ReadonlyArray<Address>
  /** A request without a token is the local principal (`--http-trust-local`); only on loopback addresses. */
  readonly trustLocal?: boolean | undefined
  /** Browser origins allowed to write and read cross-origin (`--http-cors ORIGIN`). */
  readonly cors?: ReadonlyArray<string> | undefined
  /** Host names besides the bound addresses that requests may name (a reverse proxy's name). */
  readonly hostNames?: ReadonlyArray<string> | undefined
  /** The largest request body, in bytes (default 1 MiB). */
  readonly maxBodyBytes?: number | undefined
  /** Open event streams per principal (default 64). */
  readonly streamsPerPrincipal?: number | undefined
  /** The longest an event stream stays silent before a `: ping` (default 15 s). */
  readonly heartbeat?: Duration.DurationInput | undefined
  /** Live events an event stream may fall behind by before it ends `slow_consumer` (default 1024). */
  readonly eventBuffer?: number | undefined
  /** How long a client has to send its request headers (default 10 s). */
  readonly headersTimeout?: Duration.DurationInput | undefined
  /** How long an idle keep-alive connection stays open (default 5 s). */
  readonly keepAliveTimeout?: Duration.DurationInput | undefined
  /** Sockets per server (default 1024). */
  readonly maxConnections?: number | undefined
  /** How long the drain waits for event streams to write their `end` (default 2 s). */
  readonly drainTimeout?: Duration.DurationInput | undefined
  /** Files served beside the API (the inspector); see `HttpGuard.Assets`. */
  readonly staticAssets?: HttpGuard.Assets | undefined
  /** Which state-changing endpoints are taken (default `all`; `troupe inspect` takes `none` or `answers`); see `HttpGuard.Writes`. */
  readonly writes?: HttpGuard.Writes | undefined
}

/** The default body limit: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

/** A running HTTP listener. */
export class HttpListener extends Context.Tag("troupe/HttpListener")<
  HttpListener,
  {
    /** The bound addresses, in the order given. */
    readonly addresses: ReadonlyArray<Address>
    /** Event and callback streams open now. */
    readonly openStreams: Effect.Effect<number>
  }
>() {}

/** Whether `host` is a loopback address (127.x.y.z, ::1, localhost): the only ones a trusted-local listener binds. */
export const isLoopback = (host: string): boolean => host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)

/** `host:port` as a `Host` header names it. */
export const hostHeader = (host: string, port: number) => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`)

/** What readiness asks the store: a read of a session that does not exist answers `SessionNotFound` when the store is up. */
const probePrincipal = Schema.decodeUnknownSync(Principal)({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const probeSession = Schema.decodeUnknownSync(SessionId)("ses_00000000000000000000000000")

/** Binds the servers in the current scope. */
export const make = (
  options: Options
): Effect.Effect<HttpListener["Type"], ListenError, Scope.Scope | Sessions | SessionStore | AgentCatalog | Authenticator> =>
  Effect.gen(function*() {
    if (options.listen.length === 0) return yield* new ListenError({ address: "(none)", reason: "no HTTP address configured" })
    const nonLocal = options.listen.find((address) => !isLoopback(address.host))
    if (options.trustLocal === true && nonLocal !== undefined) {
      return yield* new ListenError({
        address: hostHeader(nonLocal.host, nonLocal.port),
        reason: "--http-trust-local is only for loopback addresses (127.0.0.1, ::1, localhost)"
      })
    }
    const sessions = yield* Sessions
    // Read for the listing's summaries only (`SessionSummaries`); every endpoint goes through `Sessions`.
    const store = yield* SessionStore
    const catalog = yield* AgentCatalog
    const auth = yield* Authenticator
    const drain = yield* Deferred.make<void>()
    const deps = { sessions, catalog, eventBuffer: Math.max(1, options.eventBuffer ?? 1024) }
    const streams = HttpEvents.make(deps, drain, {
      perPrincipal: Math.max(1, options.streamsPerPrincipal ?? 64),
      heartbeat: Duration.decode(options.heartbeat ?? "15 seconds"),
      eventBuffer: deps.eventBuffer
    })
    const readiness = sessions.get(probePrincipal, probeSession).pipe(
      Effect.as(true),
      Effect.catchTags({ SessionNotFound: () => Effect.succeed(true), StoreUnavailable: () => Effect.succeed(false) }),
      Effect.timeoutTo({ duration: "5 seconds", onTimeout: () => false, onSuccess: (ready) => ready })
    )
    const hosts = new Set<string>((options.hostNames ?? []).map((name) => name.toLowerCase()))
    const cors = options.cors ?? []
    const guard = HttpApiBuilder.middleware(
      Api,
      HttpGuard.middleware({ hosts: () => hosts, cors, maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, assets: options.staticAssets, writes: options.writes })
    )
    const api = HttpApiBuilder.api(Api).pipe(
      Layer.provide(HttpRoutes.layer(deps, streams, readiness, store)),
      Layer.provide(HttpRoutes.authorization(auth, options.trustLocal === true))
    )
    const scope = yield* Effect.scope
    const addresses: Array<Address> = []
    for (const wanted of options.listen) {
      const node = createServer({
        headersTimeout: Duration.toMillis(options.headersTimeout ?? "10 seconds"),
        requestTimeout: 60_000,
        keepAliveTimeout: Duration.toMillis(options.keepAliveTimeout ?? "5 seconds")
      })
      node.maxConnections = options.maxConnections ?? 1024
      const server = yield* Layer.buildWithScope(NodeHttpServer.layer(() => node, { host: wanted.host, port: wanted.port }), scope).pipe(
        Effect.mapError((error) => new ListenError({ address: hostHeader(wanted.host, wanted.port), reason: String(error.cause ?? error) }))
      )
      const bound = Context.get(server, HttpServer.HttpServer).address
      const port = bound._tag === "TcpAddress" ? bound.port : wanted.port
      const address = { host: wanted.host, port }
      addresses.push(address)
      hosts.add(hostHeader(wanted.host, port).toLowerCase())
      if (isLoopback(wanted.host)) {
        for (const name of ["localhost", "127.0.0.1", "[::1]"]) hosts.add(`${name}:${port}`)
      }
      yield* Layer.buildWithScope(
        HttpApiBuilder.serve(HttpGuard.outer({ cors })).pipe(
          Layer.provide(guard),
          Layer.provide(api),
          Layer.provide(Layer.succeedContext(server))
        ),
        scope
      )
    }
    // Added after the servers: it runs before they close, so open streams can write their end.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* Deferred.succeed(drain, undefined)
        yield* Effect.sync(streams.openStreams).pipe(
          Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (open) => open === 0 }),
          Effect.timeoutOption(options.drainTimeout ?? "2 seconds")
        )
      })
    )
    return HttpListener.of({ addresses, openStreams: Effect.sync(streams.openStreams) })
  })

/** The listener as a layer. */
export const layer = (options: Options): Layer.Layer<HttpListener, ListenError, Sessions | SessionStore | AgentCatalog | Authenticator> =>
  Layer.scoped(HttpListener, make(options))

/** Whether the options name any address. */
export const configured = (options: Option.Option<Options>): boolean => Option.isSome(options) && options.value.listen.length > 0
