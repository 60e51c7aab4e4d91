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
 * A connection beyond the shared connection limit gets the id-range preamble
 * and then `core.error { kind: "busy" }` on id 0 in place of `core.ready`,
 * and is closed.
 *
 * @since 0.1.0
 */
import { Clock, Deferred, Effect, FiberSet, Option, Schema, type Scope } from "effect"
import { chmod, lstat, mkdir, mkdtemp, rename, rm, unlink } from "node:fs/promises"
import * as net from "node:net"
import { dirname, join, sep } from "node:path"
import type { Readable, Writable } from "node:stream"
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

/** Settings shared by the listeners of one server. */
export interface Shared {
  /** Connection limits and handshake settings. */
  readonly connection?: Connection.Options | undefined
  /** Permits for concurrent connections across listeners; without it, connections are unlimited. */
  readonly slots?: Effect.Semaphore | undefined
  /** The `init_time_ns` of `core.ready` (default: when the listener was bound). */
  readonly initTimeNs?: bigint | undefined
  /** Bytes buffered per socket before writers wait (the socket's high-water mark; default 64 KiB). */
  readonly writeBufferBytes?: number | undefined
}

/** A unix socket listener. */
export interface UnixOptions {
  readonly path: string
  /** Whether peers are trusted-local (default true: the socket is 0600 in a directory only we can enter). */
  readonly trustedLocal?: boolean | undefined
}

/** A TCP listener. */
export interface TcpOptions {
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

/** Serves one accepted transport, within the shared connection limit. */
const serveLimited = (
  transport: Transport.Transport,
  accepted: Connection.Accepted,
  shared: Shared
): Effect.Effect<void, never, Router | Authenticator> => {
  const serve = Connection.serve(transport, accepted, shared.connection)
  if (shared.slots === undefined) return serve
  return shared.slots.withPermitsIfAvailable(1)(serve).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Connection.refuse(transport, BUSY, shared.connection),
      onSome: () => Effect.void
    }))
  )
}

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
      resume(Effect.fail(Transport.errorCode(error)))
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
  shared: Shared,
  noDelay: boolean
): Effect.Effect<void, never, Scope.Scope | Router | Authenticator> =>
  Effect.gen(function*() {
    const fibers = yield* FiberSet.make()
    const run = yield* FiberSet.runtime(fibers)<Router | Authenticator>()
    server.on("connection", (socket: net.Socket) => {
      if (noDelay) socket.setNoDelay(true)
      // The transport listens for errors from here on; an unheard socket error would be thrown.
      const transport = Transport.fromDuplex(socket)
      run(serveLimited(transport, accepted, shared))
    })
    server.on("error", (error) => {
      // Errors while binding are the bind's to report; later ones are only logged.
      if (server.listening) run(Effect.logWarning(`listener error: ${Transport.errorCode(error)}`))
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
      const code = Transport.errorCode(error)
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
      catch: (error) => fail(`cannot create ${dir} (${Transport.errorCode(error)})`)
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
      catch: (error) => fail(`cannot create a staging directory in ${dir} (${Transport.errorCode(error)})`)
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
        catch: (error) => fail(`cannot move the socket into place (${Transport.errorCode(error)})`)
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
    yield* acceptInto(server, { listener: "unix", trustedLocal: options.trustedLocal ?? true, times }, shared, false)
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
    yield* acceptInto(server, { listener: "tcp", trustedLocal: false, times }, shared, true)
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
    const transport = Transport.fromStreams(input, output, {
      closeInput: input !== process.stdin,
      closeOutput: output !== process.stdout
    })
    const times = yield* readyTimes(shared)
    const done = yield* Deferred.make<void>()
    const fibers = yield* FiberSet.make()
    yield* FiberSet.run(
      fibers,
      serveLimited(transport, { listener: "stdio", trustedLocal: options.trustedLocal ?? true, times }, shared).pipe(
        Effect.ensuring(Deferred.succeed(done, undefined))
      )
    )
    return { address: { _tag: "Stdio" }, done: Deferred.await(done) }
  })
