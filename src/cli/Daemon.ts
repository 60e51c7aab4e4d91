/**
 * The daemon of `troupe serve`. It composes the runtime (`Troupe.layer` over
 * the chosen store and model, with the `EnvTelemetry` layer), the session
 * routes over the agents it serves, an authenticator (trusted-local for the
 * unix socket and stdio, tokens from `--tokens`), and the listeners.
 *
 * Start-up prints one line per listener on stderr and emits
 * `daemon.started`; a failure emits `daemon.failed` with its category and
 * exits non-zero with one line saying why. On SIGINT or SIGTERM (or when the
 * stdio peer leaves) it stops accepting (the listeners close, connections
 * end), waits up to `--grace` for running turns to finish or park
 * (`SessionHost.drain`), then closes the host (actors release their leases)
 * and the store, and exits 0. Parked and unfinished turns resume on the next
 * start. A second signal exits at once.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Option } from "effect"
import * as net from "node:net"
import * as EnvTelemetry from "../layers/EnvTelemetry.js"
import type { Agent } from "../schema/Agent.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import * as AgentCatalog from "../server/AgentCatalog.js"
import * as Authenticator from "../server/Authenticator.js"
import * as Listener from "../server/Listener.js"
import * as Server from "../server/Server.js"
import * as SessionRoutes from "../server/SessionRoutes.js"
import { SessionHost } from "../services/SessionHost.js"
import * as Telemetry from "../services/Telemetry.js"
import * as Troupe from "../Troupe.js"
import * as Address from "./Address.js"
import * as AgentsFile from "./AgentsFile.js"
import * as ExitCode from "./ExitCode.js"
import * as LocalPrincipal from "./LocalPrincipal.js"
import * as ModelOption from "./ModelOption.js"
import * as Output from "./Output.js"
import type { ServeOptions } from "./Serve.js"
import * as Signals from "./Signals.js"
import * as StoreOption from "./StoreOption.js"

/** Which listeners to run: the default named socket when none is given. */
const listenersOf = (o: ServeOptions) =>
  Effect.gen(function*() {
    const unix = yield* Address.unixPath(o)
    const none = Option.isNone(unix) && Option.isNone(o.tcp) && !o.stdio
    return {
      unix: none ? Option.some(yield* Address.socketOf(Address.DEFAULT_NAME)) : unix,
      tcp: o.tcp,
      stdio: o.stdio
    }
  })

/** Whether a live daemon already answers on a unix socket (checked before the store is opened). */
const liveAt = (path: string): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const socket = net.connect({ path })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => {
      socket.destroy()
      resume(Effect.succeed(false))
    })
    return Effect.sync(() => socket.destroy())
  }).pipe(Effect.timeoutTo({ duration: "2 seconds", onTimeout: () => true, onSuccess: (live) => live }))

/** A start-up failure: its `daemon.failed` category and the exit it causes. */
interface StartupFailure {
  readonly category: ProductEvent.FailureCategory
  readonly failure: ExitCode.CliFailure
}

const causeMessage = (cause: unknown): string =>
  cause instanceof Error ? cause.message : typeof cause === "string" ? cause : "unknown cause"

/** Starts the daemon and serves until a signal; see the module comment. */
export const serve = (o: ServeOptions): Effect.Effect<void, ExitCode.CliFailure> =>
  Effect.scoped(Effect.gen(function*() {
    // Listen first: a signal during start-up still stops the daemon cleanly.
    const signal = yield* Signals.listen
    const out = yield* Output.make({ json: false })
    const telemetry = yield* Layer.build(EnvTelemetry.layerConfig).pipe(
      Effect.mapError((error) => ExitCode.usage(`telemetry configuration: ${String(error)}`))
    )
    const emit = (event: ProductEvent.ProductEvent) => Effect.provide(Telemetry.emit(event), telemetry)
    let stopping = false

    const startup = Effect.gen(function*() {
      const configError = (what: string) => (error: unknown): StartupFailure => ({
        category: "invalid_input",
        failure: ExitCode.usage(`${what}: ${String(error)}`)
      })
      const store = yield* StoreOption.resolveStore(o.store).pipe(Effect.mapError(configError("TROUPE_HOME")))
      const model = yield* ModelOption.resolve(o.model).pipe(Effect.mapError(configError("model configuration")))
      const agents: ReadonlyArray<Agent> = Option.isSome(o.agents)
        ? yield* AgentsFile.load(o.agents.value).pipe(
          Effect.mapError((error): StartupFailure => ({ category: "invalid_input", failure: ExitCode.usage(error.message) }))
        )
        : model.builtIns
      const listeners = yield* listenersOf(o).pipe(
        Effect.mapError((failure): StartupFailure => ({ category: "invalid_input", failure }))
      )
      const auth = yield* Layer.build(
        Authenticator.layerTrustedLocal(
          LocalPrincipal.current(),
          Option.isSome(o.tokens) ? Authenticator.layerFile(o.tokens.value) : undefined
        )
      ).pipe(
        Effect.mapError((error): StartupFailure => ({ category: "invalid_input", failure: ExitCode.usage(error.message) }))
      )
      if (Option.isSome(listeners.unix) && (yield* liveAt(listeners.unix.value))) {
        return yield* Effect.fail<StartupFailure>({
          category: "conflict",
          failure: ExitCode.startFailed(`unix:${listeners.unix.value} is in use by a running daemon`)
        })
      }
      if (Option.isSome(model.note)) yield* out.note(`troupe: ${model.note.value}`)
      const missing = ModelOption.missingDefault(model, agents)
      if (Option.isSome(missing)) yield* out.note(`troupe: warning: ${missing.value}; their turns will fail`)

      const runtime = yield* Layer.build(
        Troupe.layer(StoreOption.layer(store), {
          model: model.layer,
          // The built-in agent's tools run here; agents from a file have client tools only.
          tools: Option.isSome(o.agents) ? undefined : model.tools,
          telemetry: Layer.succeedContext(telemetry)
        })
      ).pipe(
        Effect.mapError((error): StartupFailure => ({
          category: "unavailable",
          failure: ExitCode.startFailed(
            `cannot open the store ${StoreOption.describe(store)}: ${causeMessage(error.cause)}`
          )
        }))
      )
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
          stdio: listeners.stdio
        }).pipe(
          Layer.provide(SessionRoutes.layer),
          Layer.provide(AgentCatalog.layer(agents)),
          Layer.provide(Layer.succeedContext(auth)),
          Layer.provide(Layer.succeedContext(runtime))
        )
      ).pipe(
        Effect.mapError((error): StartupFailure => ({
          category: error._tag === "AddressInUse" ? "conflict" : "unavailable",
          failure: ExitCode.startFailed(error.message)
        }))
      )
      return { server: Context.get(server, Server.Server), store, model, agents }
    })

    const started = yield* startup.pipe(
      Effect.catchAllDefect((defect) =>
        Effect.fail<StartupFailure>({ category: "internal", failure: ExitCode.startFailed(causeMessage(defect)) })
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

