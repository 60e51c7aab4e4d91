/**
 * The daemon of `troupe serve`. It composes the runtime (`Troupe.layer` over
 * the chosen store and model and the agents it serves, with the `EnvTelemetry`
 * layer), the session routes over the runtime's catalog, an authenticator (trusted-local for the
 * unix socket and stdio, tokens from `--tokens`), and the listeners.
 *
 * Start-up prints one line per listener on stderr and emits
 * `daemon.started`; a failure emits `daemon.failed` with its category and
 * exits non-zero with one line saying why. On SIGINT or SIGTERM (or when the
 * stdio peer leaves) it stops accepting (the listeners close, connections
 * end) and hands its sessions over (`SessionHost.drain`): a session with no
 * busy turn is released at once, a busy one when its turn finishes or parks,
 * within `--grace`; then it closes the host (the remaining actors release
 * their leases) and the store, and exits 0. Another worker on the store, or
 * the next start, takes the sessions up. A second signal exits at once.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { existsSync } from "node:fs"
import { dirname } from "node:path"
import * as ProductEvent from "../schema/ProductEvent.js"
import * as Authenticator from "../server/Authenticator.js"
import * as Listener from "../server/Listener.js"
import * as Server from "../server/Server.js"
import * as SessionRoutes from "../server/SessionRoutes.js"
import { SessionHost } from "../services/SessionHost.js"
import * as Telemetry from "../services/Telemetry.js"
import * as Address from "./Address.js"
import * as ExitCode from "./ExitCode.js"
import * as LocalPrincipal from "./LocalPrincipal.js"
import * as ModelOption from "./ModelOption.js"
import * as Output from "./Output.js"
import type { ServeOptions } from "./ServeOptions.js"
import * as Setup from "./Setup.js"
import * as WorkspaceToolkit from "./WorkspaceToolkit.js"
import * as Signals from "./Signals.js"
import * as StoreOption from "./StoreOption.js"

/** Which listeners to run: the default named socket when none is given. */
const listenersOf = (o: ServeOptions) =>
  Effect.gen(function*() {
    const unix = yield* Address.unixPath(o)
    // A named daemon's directory is troupe's own to create; a path given with --socket is not.
    if (Option.isSome(o.socket) && !existsSync(dirname(o.socket.value))) {
      return yield* Effect.fail(ExitCode.usage(
        `--socket: the directory ${dirname(o.socket.value)} does not exist`,
        "create it first, or use --name NAME for a socket under $TROUPE_HOME"
      ))
    }
    const none = Option.isNone(unix) && Option.isNone(o.tcp) && !o.stdio
    return {
      unix: none ? Option.some(yield* Address.socketOf(Address.DEFAULT_NAME)) : unix,
      tcp: o.tcp,
      stdio: o.stdio
    }
  })

/** Starts the daemon and serves until a signal; see the module comment. */
export const serve = (o: ServeOptions): Effect.Effect<void, ExitCode.CliFailure> =>
  Effect.scoped(Effect.gen(function*() {
    // Listen first: a signal during start-up still stops the daemon cleanly.
    const signal = yield* Signals.listen
    const out = yield* Output.make({ json: false })
    const telemetry = yield* Setup.telemetry
    const emit = (event: ProductEvent.ProductEvent) => Effect.provide(Telemetry.emit(event), telemetry)
    let stopping = false

    const startup = Effect.gen(function*() {
      const invalid = (failure: ExitCode.CliFailure): Setup.SetupFailure => ({ category: "invalid_input", failure })
      const resolved = yield* Setup.resolve(o)
      const listeners = yield* listenersOf(o).pipe(Effect.mapError(invalid))
      const auth = yield* Layer.build(
        Authenticator.layerTrustedLocal(
          LocalPrincipal.current(),
          Option.isSome(o.tokens) ? Authenticator.layerFile(o.tokens.value) : undefined
        )
      ).pipe(Effect.mapError((error) => invalid(ExitCode.usage(error.message))))
      const { agents, model } = resolved
      if (Option.isSome(model.note)) {
        yield* out.note(`troupe: ${model.note.value}: ${
          resolved.fromFile ? "the scripted model answers your agents" : "serving the built-in demo agents on the scripted model"
        }`)
      }
      if (Option.isSome(listeners.tcp) && Option.isNone(o.tokens)) {
        yield* out.note(
          "troupe: warning: --tcp without --tokens: TCP clients always need a token, so none can connect — give --tokens FILE (docs/configuration.md)"
        )
      }
      if (WorkspaceToolkit.usesBuiltins(agents) || Option.isSome(o.workspace)) {
        yield* out.note(`troupe: built-in tools work in ${WorkspaceToolkit.rootOf(o)}${o.workspacePerSession ? " (a directory per session tree)" : ""}`)
      }
      const missing = ModelOption.missingDefault(model, agents)
      if (Option.isSome(missing)) yield* out.note(`troupe: warning: ${missing.value}; their turns will fail`)

      const runtime = yield* Setup.runtime(resolved, telemetry, { leaseTtl: o.leaseTtl, maxBusyActors: o.maxBusy })
      const host = Context.get(runtime, SessionHost)
      // Registered between the runtime and the server, so on the way out it runs after the
      // listeners have closed and before the host and the store do.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function*() {
          if (!stopping) return
          yield* out.status(`waiting up to ${Duration.format(o.grace)} for running turns to finish or park`)
          const drained = yield* host.drain(o.grace)
          yield* out.status(undefined)
          if (!drained) {
            yield* out.note("troupe: grace period over: turns still running are stopped; they resume on the next start")
          }
        })
      )
      const server = yield* Layer.build(
        Server.layer({
          unix: Option.getOrUndefined(listeners.unix),
          tcp: Option.getOrUndefined(listeners.tcp),
          stdio: listeners.stdio,
          maxConnections: o.maxConnections,
          maxUnauthenticated: o.maxUnauthenticated,
          connection: { authTimeout: o.authTimeout, idleTimeout: o.idleTimeout }
        }).pipe(
          Layer.provide(SessionRoutes.layer),
          Layer.provide(Layer.succeedContext(auth)),
          Layer.provide(Layer.succeedContext(runtime))
        )
      ).pipe(
        Effect.mapError((error): Setup.SetupFailure => ({
          category: error._tag === "AddressInUse" ? "conflict" : "unavailable",
          failure: ExitCode.startFailed(error.message)
        }))
      )
      // The HTTP API beside the sockets, on the same runtime, catalog and tokens; closed (drained) before them.
      // Its server and the inspector are loaded only when asked for (`--http`), so a daemon without them starts without them.
      const http = o.http.length === 0 ? [] : yield* Effect.gen(function*() {
        const [HttpListener, Inspector] = yield* Effect.promise(() =>
          Promise.all([import("../server/HttpListener.js"), import("../inspector/Inspector.js")])
        )
        const listener = Context.get(
          yield* Layer.build(
            HttpListener.layer({
              listen: o.http,
              trustLocal: o.httpTrustLocal,
              cors: o.httpCors,
              // The inspector's page at `/`, over the same API (bundled on the first request from a source checkout).
              staticAssets: yield* Inspector.make
            }).pipe(
              Layer.provide(Layer.succeedContext(auth)),
              Layer.provide(Layer.succeedContext(runtime))
            )
          ).pipe(
            Effect.mapError((error): Setup.SetupFailure => ({ category: "unavailable", failure: ExitCode.startFailed(error.message) }))
          ),
          HttpListener.HttpListener
        )
        return listener.addresses.map((address) => `http://${HttpListener.hostHeader(address.host, address.port)}`)
      })
      return { server: Context.get(server, Server.Server), http, store: resolved.store, model, agents }
    })

    const started = yield* startup.pipe(
      Effect.catchAllDefect((defect) =>
        Effect.fail<Setup.SetupFailure>({ category: "internal", failure: ExitCode.startFailed(Setup.causeMessage(defect)) })
      ),
      Effect.tapError((error) => emit(ProductEvent.failure("daemon.failed", error.category))),
      Effect.mapError((error) => error.failure)
    )

    // Emitted before the lines that tell clients where to connect, so it precedes what they cause.
    yield* emit(ProductEvent.daemonStarted({
      listeners: {
        unix: Option.isSome(started.server.unixPath),
        tcp: Option.isSome(started.server.tcp),
        stdio: o.stdio
      },
      store: StoreOption.kindOf(started.store),
      model: started.model.kind
    }))

    for (const address of started.server.addresses) {
      yield* out.note(`troupe: listening on ${Listener.formatAddress(address)}`)
    }
    for (const url of started.http) {
      yield* out.note(`troupe: listening on ${url}`)
    }
    yield* out.note(
      `troupe: store ${StoreOption.describe(started.store)} · model ${started.model.description} · agents ${
        started.agents.map((agent) => agent.name).join(", ")
      }`
    )
    const reason = yield* Effect.raceFirst(
      signal,
      Effect.as(started.server.stdioDone, "the stdio client left" as const)
    )
    stopping = true
    yield* out.note(`troupe: stopping (${reason})`)
  })).pipe(
    Effect.zipRight(Effect.sync(() => process.stderr.write("troupe: stopped\n")))
  )

