/**
 * The daemon's network face: the listeners named in the options, sharing one
 * connection limit and one set of connection settings, serving the `Router`
 * with the `Authenticator`. Building the layer binds every listener; closing
 * it stops accepting, interrupts every connection and removes the unix
 * socket file.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, type Scope } from "effect"
import type { Authenticator } from "./Authenticator.js"
import type * as Connection from "./Connection.js"
import * as Listener from "./Listener.js"
import type { Router } from "./Router.js"

/** Which listeners to run, and the limits they share. */
export interface Options {
  /** A unix socket path, or its options. */
  readonly unix?: string | Listener.UnixOptions | undefined
  /** A TCP host and port (port 0 picks one). */
  readonly tcp?: Listener.TcpOptions | undefined
  /** One connection over stdin/stdout (`true`), or over given streams. */
  readonly stdio?: boolean | Listener.StdioOptions | undefined
  /** Concurrent connections over all listeners (default 1024); more are refused with `busy`. */
  readonly maxConnections?: number | undefined
  /** Bytes buffered per socket before writers wait (default 64 KiB). */
  readonly writeBufferBytes?: number | undefined
  /** Per-connection limits and handshake settings. */
  readonly connection?: Connection.Options | undefined
}

/** The default of `Options.maxConnections`. */
export const DEFAULT_MAX_CONNECTIONS = 1024

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
      connection: options.connection,
      slots: yield* Effect.makeSemaphore(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS),
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
