/**
 * The daemon's network face: the listeners named in the options, each with
 * its own connection limits (the server's defaults, or the listener's own),
 * serving the `Router` with the `Authenticator`. Building the layer binds every listener; closing
 * it stops accepting, interrupts every connection and removes the unix
 * socket file.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Authenticator } from "./Authenticator.js"
import * as Connection from "./Connection.js"
import * as Listener from "./Listener.js"
import type { Router } from "./Router.js"

/** Which listeners to run, and the limits each has unless its own options say otherwise. */
export interface Options {
  /** A unix socket path, or its options (its own limits among them). */
  readonly unix?: string | Listener.UnixOptions | undefined
  /** A TCP host and port (port 0 picks one), and its own limits. */
  readonly tcp?: Listener.TcpOptions | undefined
  /** One connection over stdin/stdout (`true`), or over given streams. */
  readonly stdio?: boolean | Listener.StdioOptions | undefined
  /** Concurrent connections per listener (default 1024); more are refused with `busy`. */
  readonly maxConnections?: number | undefined
  /** Connections per listener not yet authenticated (default 64); one more closes the one waiting longest. */
  readonly maxUnauthenticated?: number | undefined
  /** Bytes buffered per socket before writers wait (default 64 KiB). */
  readonly writeBufferBytes?: number | undefined
  /** Per-connection limits and handshake settings (auth and idle timeouts among them). */
  readonly connection?: Connection.Options | undefined
}

/** The default of `Options.maxConnections`, per listener. */
export const DEFAULT_MAX_CONNECTIONS = Listener.DEFAULT_MAX_CONNECTIONS

/** A running server. */
export class Server extends Context.Tag("troupe/Server")<
  Server,
  {
    /** Every bound address, in the order unix, tcp, stdio. */
    readonly addresses: ReadonlyArray<Listener.Address>
    /** The unix socket path, if listening on one. */
    readonly unixPath: Option.Option<string>
    /** The bound TCP host and port, if listening on TCP. */
    readonly tcp: Option.Option<{ readonly host: string; readonly port: number }>
    /** Completes when the stdio connection has ended; never without stdio. */
    readonly stdioDone: Effect.Effect<void>
  }
>() {}

/** Binds the configured listeners in the current scope. */
export const make = (
  options: Options
): Effect.Effect<Server["Type"], Listener.ListenError | Listener.AddressInUse, Scope.Scope | Router | Authenticator> =>
  Effect.gen(function*() {
    if (options.unix === undefined && options.tcp === undefined && (options.stdio ?? false) === false) {
      return yield* Effect.fail(new Listener.ListenError({ address: "(none)", reason: "no listener configured" }))
    }
    const shared: Listener.Shared = {
      // One warning limiter for the whole server: a flood of bad input over many connections is still one line a second.
      connection: { warnings: new Connection.PeerWarnings(), ...options.connection },
      maxConnections: options.maxConnections,
      maxUnauthenticated: options.maxUnauthenticated,
      initTimeNs: yield* Clock.currentTimeNanos,
      writeBufferBytes: options.writeBufferBytes
    }
    const addresses: Array<Listener.Address> = []
    let unixPath = Option.none<string>()
    let tcp = Option.none<{ readonly host: string; readonly port: number }>()
    let stdioDone: Effect.Effect<void> = Effect.never
    if (options.unix !== undefined) {
      const bound = yield* Listener.unix(typeof options.unix === "string" ? { path: options.unix } : options.unix, shared)
      addresses.push(bound.address)
      if (bound.address._tag === "Unix") unixPath = Option.some(bound.address.path)
    }
    if (options.tcp !== undefined) {
      const bound = yield* Listener.tcp(options.tcp, shared)
      addresses.push(bound.address)
      if (bound.address._tag === "Tcp") tcp = Option.some({ host: bound.address.host, port: bound.address.port })
    }
    if (options.stdio !== undefined && options.stdio !== false) {
      const bound = yield* Listener.stdio(options.stdio === true ? {} : options.stdio, shared)
      addresses.push(bound.address)
      stdioDone = bound.done
    }
    return Server.of({ addresses, unixPath, tcp, stdioDone })
  })

/** The listeners of `options` as a layer over a `Router` and an `Authenticator`. */
export const layer = (
  options: Options
): Layer.Layer<Server, Listener.ListenError | Listener.AddressInUse, Router | Authenticator> =>
  Layer.scoped(Server, make(options))
