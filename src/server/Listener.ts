/**
 * Listeners: where connections come from. Each is a scoped effect that binds,
 * accepts, and serves every connection with `Connection.serve` in a
 * `FiberSet` owned by the listener's scope; closing the scope stops accepting
 * and interrupts every connection it accepted.
 *
 * - `unix`: a unix socket created with mode 0600 without any window in which
 *   another user could open it (bound inside a fresh 0700 directory, chmod-ed,
 *   then renamed into place). A socket file left by a dead daemon is replaced;
 *   a live daemon on the path is `AddressInUse`. Trusted-local by default
 *   (docs/decisions/0004-trusted-local.md).
 * - `tcp`: host and port (0 picks a free port; the bound one is reported).
 *   Never trusted-local: any local user can open a TCP port.
 * - `stdio`: one connection over the process's stdin and stdout (or given
 *   streams), for a daemon run as a child process. Trusted-local by default:
 *   only the parent process holds the pipes.
 *
 * Every listener has its own limits (`Limits`), so abuse of one never refuses
 * another's clients: a TCP port full of hostile peers leaves the trusted local
 * socket open. A connection beyond a listener's connection limit gets the
 * id-range preamble and then `core.error { kind: "busy" }` on id 0 in place of
 * `core.ready`, and is closed. Connections that have not authenticated yet
 * have a second, smaller limit: when it is full, the one that has waited
 * longest is closed (`busy` on id 0) to make room, so peers that never
 * authenticate can delay a client by at most one round of evictions, never
 * lock it out.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { chmod, lstat, mkdir, mkdtemp, rename, rm, unlink } from "node:fs/promises"
import * as net from "node:net"
import { dirname, join, sep } from "node:path"
import type { Readable, Writable } from "node:stream"
import * as NodeTransport from "../internal/NodeTransport.js"
import * as Transport from "../protocol/Transport.js"
import type { Authenticator } from "./Authenticator.js"
import * as Connection from "./Connection.js"
import type { Router } from "./Router.js"

/** Where a listener accepts connections. */
export type Address =
  | { readonly _tag: "Unix"; readonly path: string }
  | { readonly _tag: "Tcp"; readonly host: string; readonly port: number }
  | { readonly _tag: "Stdio" }

/** Another daemon is alive on this address. */
export class AddressInUse extends Schema.TaggedError<AddressInUse>()("AddressInUse", {
  address: Schema.String
}) {
  override get message() {
    return `${this.address} is in use by a running daemon`
  }
}

/** The listener could not be set up. */
export class ListenError extends Schema.TaggedError<ListenError>()("ListenError", {
  address: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `cannot listen on ${this.address}: ${this.reason}`
  }
}

/** A bound listener. */
export interface Bound {
  readonly address: Address
  /** Completes when the listener stops on its own (the stdio connection ended); never for sockets. */
  readonly done: Effect.Effect<void>
}

/** The limits of one listener; each listener has its own. */
export interface Limits {
  /** Concurrent connections on this listener (default 1024); one more is refused with `busy`. */
  readonly maxConnections?: number | undefined
  /**
   * Connections on this listener that have not authenticated yet (default 64):
   * one more closes the one that has waited longest, with `busy`.
   */
  readonly maxUnauthenticated?: number | undefined
  /** Connection limits and handshake settings (auth and idle timeouts, frame size…), over the server's. */
  readonly connection?: Connection.Options | undefined
}

/** The default of `Limits.maxConnections`. */
export const DEFAULT_MAX_CONNECTIONS = 1024

/** The default of `Limits.maxUnauthenticated`. */
export const DEFAULT_MAX_UNAUTHENTICATED = 64

/** Settings shared by the listeners of one server: the defaults of each listener's own limits, and more. */
export interface Shared extends Limits {
  /** The `init_time_ns` of `core.ready` (default: when the listener was bound). */
  readonly initTimeNs?: bigint | undefined
  /** Bytes buffered per socket before writers wait (the socket's high-water mark; default 64 KiB). */
  readonly writeBufferBytes?: number | undefined
}

/** A unix socket listener. */
export interface UnixOptions extends Limits {
  readonly path: string
  /** Whether peers are trusted-local (default true: the socket is 0600 in a directory only we can enter). */
  readonly trustedLocal?: boolean | undefined
}

/** A TCP listener. */
export interface TcpOptions extends Limits {
  readonly host: string
  /** 0 picks a free port. */
  readonly port: number
}

/** The stdio listener. */
export interface StdioOptions {
  /** Default `process.stdin`. */
  readonly input?: Readable | undefined
  /** Default `process.stdout`. */
  readonly output?: Writable | undefined
  /** Whether the peer is trusted-local (default true: only the parent process holds the pipes). */
  readonly trustedLocal?: boolean | undefined
}

/** The default per-socket write buffer. */
export const DEFAULT_WRITE_BUFFER = 64 * 1024

/** The longest unix socket path (`sun_path` holds 108 bytes on Linux, 104 on macOS, with the terminating NUL). */
export const MAX_SOCKET_PATH = process.platform === "linux" ? 107 : 103

/** Nanoseconds since the epoch at which this process started. */
const processStartNs = (): bigint => BigInt(Math.round(performance.timeOrigin * 1_000_000))

/** A description of an address, for errors and logs. */
export const formatAddress = (address: Address): string => {
  switch (address._tag) {
    case "Unix":
      return `unix:${address.path}`
    case "Tcp":
      return `tcp:${address.host.includes(":") ? `[${address.host}]` : address.host}:${address.port}`
    case "Stdio":
      return "stdio"
  }
}

const BUSY = { kind: "busy", message: "the daemon is at its connection limit", retryable: true } as const

/**
 * The connections of one listener that have not authenticated yet, oldest
 * first. Admitting one more than `max` evicts the oldest.
 */
class Waiting {
  private readonly queue = new Map<number, () => void>()
  private next = 0
  constructor(private readonly max: number) {}

  admit(): { readonly admission: Connection.Admission; readonly leave: () => void } {
    const key = this.next++
    const evicted = Deferred.unsafeMake<void>(FiberId.none)
    while (this.queue.size >= this.max) {
      const [oldest, evict] = this.queue.entries().next().value!
      this.queue.delete(oldest)
      evict()
    }
    this.queue.set(key, () => Deferred.unsafeDone(evicted, Exit.void))
    const leave = () => {
      this.queue.delete(key)
    }
    return { admission: { authenticated: leave, evicted: Deferred.await(evicted) }, leave }
  }
}

/** One listener's limits in force: its connection permits, its waiting room, its connection settings. */
interface State {
  readonly slots: Effect.Semaphore
  readonly waiting: Waiting
  readonly connection: Connection.Options
}

const stateOf = (shared: Shared, own: Limits = {}, override: Connection.Options = {}): Effect.Effect<State> =>
  Effect.map(
    Effect.makeSemaphore(own.maxConnections ?? shared.maxConnections ?? DEFAULT_MAX_CONNECTIONS),
    (slots) => ({
      slots,
      waiting: new Waiting(Math.max(1, own.maxUnauthenticated ?? shared.maxUnauthenticated ?? DEFAULT_MAX_UNAUTHENTICATED)),
      connection: { ...shared.connection, ...own.connection, ...override }
    })
  )

/** Serves one accepted transport, within its listener's limits. */
const serveLimited = (
  transport: Transport.Transport,
  accepted: Connection.Accepted,
  state: State
): Effect.Effect<void, never, Router | Authenticator> =>
  state.slots.withPermitsIfAvailable(1)(Effect.suspend(() => {
    const { admission, leave } = state.waiting.admit()
    return Connection.serve(transport, { ...accepted, admission }, state.connection).pipe(Effect.ensuring(Effect.sync(leave)))
  })).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Connection.refuse(transport, BUSY, state.connection),
      onSome: () => Effect.void
    }))
  )

const readyTimes = (shared: Shared) =>
  Effect.map(Clock.currentTimeNanos, (readyTimeNs): Connection.ReadyTimes => ({
    bootTimeNs: processStartNs(),
    initTimeNs: shared.initTimeNs ?? readyTimeNs,
    readyTimeNs
  }))

const listen = (server: net.Server, options: net.ListenOptions): Effect.Effect<void, string> =>
  Effect.async<void, string>((resume) => {
    const onError = (error: unknown) => {
      server.off("listening", onListening)
      resume(Effect.fail(NodeTransport.errorCode(error)))
    }
    const onListening = () => {
      server.off("error", onError)
      resume(Effect.void)
    }
    server.once("error", onError)
    server.once("listening", onListening)
    server.listen(options)
  })

/** Accepts connections on `server` into a FiberSet of this scope. */
const acceptInto = (
  server: net.Server,
  accepted: Connection.Accepted,
  state: State,
  noDelay: boolean
): Effect.Effect<void, never, Scope.Scope | Router | Authenticator> =>
  Effect.gen(function*() {
    const fibers = yield* FiberSet.make()
    const run = yield* FiberSet.runtime(fibers)<Router | Authenticator>()
    server.on("connection", (socket: net.Socket) => {
      if (noDelay) socket.setNoDelay(true)
      // The transport listens for errors from here on; an unheard socket error would be thrown.
      const transport = NodeTransport.fromDuplex(socket)
      run(serveLimited(transport, accepted, state))
    })
    server.on("error", (error) => {
      // Errors while binding are the bind's to report; later ones are only logged.
      if (server.listening) run(Effect.logWarning(`listener error: ${NodeTransport.errorCode(error)}`))
    })
  })

const closeServer = (server: net.Server): Effect.Effect<void> =>
  Effect.sync(() => {
    // Stops accepting; connections are interrupted by their FiberSet, so the close callback is not awaited.
    server.close()
  })

/** What is at a socket path: nothing, a socket nobody listens on, or a live daemon. */
const probe = (path: string): Effect.Effect<"absent" | "stale" | "live", ListenError> =>
  Effect.async<"absent" | "stale" | "live", ListenError>((resume) => {
    const socket = net.connect({ path })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed("live"))
    })
    socket.once("error", (error) => {
      socket.destroy()
      const code = NodeTransport.errorCode(error)
      if (code === "ECONNREFUSED") resume(Effect.succeed("stale"))
      else if (code === "ENOENT") resume(Effect.succeed("absent"))
      // A full accept backlog: someone is listening.
      else if (code === "EAGAIN") resume(Effect.succeed("live"))
      else resume(Effect.fail(new ListenError({ address: `unix:${path}`, reason: `cannot probe the existing socket (${code})` })))
    })
    return Effect.sync(() => socket.destroy())
  }).pipe(
    // A daemon that accepts but never answers is still alive.
    Effect.timeoutTo({ duration: "2 seconds", onTimeout: () => "live" as const, onSuccess: (state) => state })
  )

interface Identity {
  readonly dev: number
  readonly ino: number
}

/**
 * Binds `server` at `path` with mode 0600: the socket is created in a fresh
 * 0700 directory next to `path`, restricted, then renamed over `path`, so it
 * is never reachable with wider permissions.
 */
const bindUnix = (server: net.Server, path: string): Effect.Effect<Identity, ListenError | AddressInUse> => {
  const address = `unix:${path}`
  const fail = (reason: string) => new ListenError({ address, reason })
  const dir = dirname(path)
  return Effect.gen(function*() {
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
      return yield* Effect.fail(fail(`the path is longer than ${MAX_SOCKET_PATH} bytes, the limit of a unix socket address`))
    }
    yield* Effect.tryPromise({
      try: () => mkdir(dir, { recursive: true, mode: 0o700 }),
      catch: (error) => fail(`cannot create ${dir} (${NodeTransport.errorCode(error)})`)
    })
    const dirMode = yield* Effect.promise(() => lstat(dir).then((s) => s.mode, () => 0))
    if ((dirMode & 0o077) !== 0) {
      // Linux checks the socket's own mode on connect; some BSDs do not, and there the directory is the only guard.
      yield* Effect.logWarning(
        `${dir} is open to other users (mode ${(dirMode & 0o777).toString(8)}); only the socket's mode 0600 keeps them out`
      )
    }
    const existing = yield* Effect.promise(() => lstat(path).then((s) => s, () => undefined))
    if (existing !== undefined) {
      if (!existing.isSocket()) return yield* Effect.fail(fail("the path exists and is not a socket"))
      const state = yield* probe(path)
      if (state === "live") return yield* Effect.fail(new AddressInUse({ address }))
      // A stale socket is replaced by the rename below.
    }
    const staging = yield* Effect.tryPromise({
      try: () => mkdtemp(`${dir}${sep}.`),
      catch: (error) => fail(`cannot create a staging directory in ${dir} (${NodeTransport.errorCode(error)})`)
    })
    const staged = join(staging, "s")
    return yield* Effect.gen(function*() {
      yield* Effect.mapError(listen(server, { path: staged }), (code) => fail(code))
      return yield* Effect.tryPromise({
        try: async (): Promise<Identity> => {
          await chmod(staged, 0o600)
          await rename(staged, path)
          const bound = await lstat(path)
          return { dev: bound.dev, ino: bound.ino }
        },
        catch: (error) => fail(`cannot move the socket into place (${NodeTransport.errorCode(error)})`)
      })
    }).pipe(
      Effect.tapError(() => closeServer(server)),
      Effect.ensuring(Effect.promise(() => rm(staging, { recursive: true, force: true })))
    )
  })
}

/** Removes the socket file if it is still ours (a successor may have replaced it). */
const unlinkIfOurs = (path: string, identity: Identity): Effect.Effect<void> =>
  Effect.promise(async () => {
    const current = await lstat(path).catch(() => undefined)
    if (current !== undefined && current.dev === identity.dev && current.ino === identity.ino) {
      await unlink(path).catch(() => undefined)
    }
  })

/** Listens on a unix socket (mode 0600) until the scope closes; the socket file is removed then. */
export const unix = (
  options: UnixOptions,
  shared: Shared = {}
): Effect.Effect<Bound, ListenError | AddressInUse, Scope.Scope | Router | Authenticator> =>
  Effect.gen(function*() {
    const server = net.createServer({ highWaterMark: shared.writeBufferBytes ?? DEFAULT_WRITE_BUFFER })
    const times = yield* readyTimes(shared)
    const state = yield* stateOf(shared, options)
    yield* acceptInto(server, { listener: "unix", trustedLocal: options.trustedLocal ?? true, times }, state, false)
    yield* Effect.acquireRelease(
      bindUnix(server, options.path),
      (identity) => Effect.andThen(closeServer(server), unlinkIfOurs(options.path, identity))
    )
    return { address: { _tag: "Unix", path: options.path }, done: Effect.never }
  })

/** Listens on TCP until the scope closes; `address` holds the bound port. */
export const tcp = (
  options: TcpOptions,
  shared: Shared = {}
): Effect.Effect<Bound, ListenError, Scope.Scope | Router | Authenticator> =>
  Effect.gen(function*() {
    const server = net.createServer({ highWaterMark: shared.writeBufferBytes ?? DEFAULT_WRITE_BUFFER })
    const times = yield* readyTimes(shared)
    const state = yield* stateOf(shared, options)
    yield* acceptInto(server, { listener: "tcp", trustedLocal: false, times }, state, true)
    const requested = formatAddress({ _tag: "Tcp", host: options.host, port: options.port })
    yield* Effect.acquireRelease(
      Effect.mapError(listen(server, { host: options.host, port: options.port }), (reason) =>
        new ListenError({ address: requested, reason })),
      () => closeServer(server)
    )
    const bound = server.address()
    if (bound === null || typeof bound === "string") {
      return yield* Effect.fail(new ListenError({ address: requested, reason: "no bound address" }))
    }
    return { address: { _tag: "Tcp", host: bound.address, port: bound.port }, done: Effect.never }
  })

/** Serves one connection over stdin/stdout (or the given streams); `done` completes when it ends. */
export const stdio = (
  options: StdioOptions = {},
  shared: Shared = {}
): Effect.Effect<Bound, never, Scope.Scope | Router | Authenticator> =>
  Effect.gen(function*() {
    const input = options.input ?? process.stdin
    const output = options.output ?? process.stdout
    // The process's own stdio outlives the connection; streams handed in are the connection's.
    const transport = NodeTransport.fromStreams(input, output, {
      closeInput: input !== process.stdin,
      closeOutput: output !== process.stdout
    })
    const times = yield* readyTimes(shared)
    const done = yield* Deferred.make<void>()
    const fibers = yield* FiberSet.make()
    // The one connection of a child process is never idle-closed: the daemon lives as long as it does.
    const state = yield* stateOf(shared, {}, { idleTimeout: undefined })
    yield* FiberSet.run(
      fibers,
      serveLimited(transport, { listener: "stdio", trustedLocal: options.trustedLocal ?? true, times }, state).pipe(
        Effect.ensuring(Deferred.succeed(done, undefined))
      )
    )
    return { address: { _tag: "Stdio" }, done: Deferred.await(done) }
  })
