/**
 * The viewer of `troupe inspect`: the inspector's page and the HTTP API
 * (docs/http.md) over a store, with no daemon. It opens the store with a
 * host that runs nothing (`InProcessHost` `runs: false`): it claims no
 * session and starts no actor, so a daemon on the same store (or the next
 * one to start) keeps driving every session, and the page follows what it
 * writes through the store's signals.
 *
 * Read-only unless `--allow-answers`: every state-changing endpoint (create,
 * message, interrupt, close, rename and archive, answers) is 403 `forbidden`
 * (`HttpGuard.Writes`), and the page shows none of those controls; with
 * `--allow-answers` callback answers are taken, and admitted to the
 * session's inbox for its daemon to apply (first answer wins, as anywhere).
 *
 * On loopback, requests without a token act as the local user (the sessions
 * `troupe run` and a daemon's unix socket make); with `--tokens FILE` every
 * request needs a token of the file, and sees that principal's sessions
 * (required off loopback). It prints the page's address, and ends on SIGINT
 * or SIGTERM: open event streams end with `shutdown`, then the store closes.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { existsSync } from "node:fs"
import * as Inspector from "../inspector/Inspector.js"
import * as Authenticator from "../server/Authenticator.js"
import * as HttpListener from "../server/HttpListener.js"
import * as ExitCode from "./ExitCode.js"
import type { InspectOptions } from "./InspectOptions.js"
import * as LocalPrincipal from "./LocalPrincipal.js"
import * as ModelOption from "./ModelOption.js"
import * as Output from "./Output.js"
import * as Setup from "./Setup.js"
import * as Signals from "./Signals.js"
import * as StoreOption from "./StoreOption.js"

/** What the listener takes, and how the note says it. */
const modeOf = (allowAnswers: boolean) =>
  allowAnswers
    ? { writes: "answers" as const, said: "read-only but for callback answers" }
    : { writes: "none" as const, said: "read-only (--allow-answers to answer callbacks)" }

/** The store to open, refused when there is nothing to inspect there. */
const storeOf = (o: InspectOptions): Effect.Effect<StoreOption.Store, ExitCode.CliFailure> =>
  Effect.gen(function*() {
    const store = yield* StoreOption.resolveStore(o.store).pipe(
      Effect.mapError((error) => ExitCode.usage(`TROUPE_HOME: ${String(error)}`))
    )
    if (store.kind === "memory" || (store.kind === "sqlite" && store.filename === ":memory:")) {
      return yield* Effect.fail(ExitCode.usage(
        `--store ${StoreOption.describe(store)}: a new in-memory store has nothing to inspect`,
        "give the file or database a daemon or troupe run writes (--store sqlite:PATH or postgres:URL)"
      ))
    }
    // A viewer does not create a store: a missing file is a mistyped path, or nothing written yet.
    if (store.kind === "sqlite" && !existsSync(store.filename)) {
      return yield* Effect.fail(ExitCode.usage(
        `no store at ${store.filename}`,
        "troupe run and troupe serve write one there; or give --store sqlite:PATH or postgres:URL"
      ))
    }
    return store
  })

/** Serves the inspector until a signal; see the module comment. */
export const inspect = (o: InspectOptions): Effect.Effect<void, ExitCode.CliFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const signal = yield* Signals.listen
    const out = yield* Output.make({ json: false })
    const trustLocal = Option.isNone(o.tokens)
    if (trustLocal && !HttpListener.isLoopback(o.http.host)) {
      return yield* Effect.fail(ExitCode.usage(
        `--http ${o.http.host}: off loopback every request needs a token`,
        "give --tokens FILE (docs/configuration.md), or serve on 127.0.0.1"
      ))
    }
    const store = yield* storeOf(o)
    const auth = yield* Layer.build(
      Option.isSome(o.tokens) ? Authenticator.layerFile(o.tokens.value) : Authenticator.layerTrustedLocal(LocalPrincipal.current())
    ).pipe(Effect.mapError((error) => ExitCode.usage(error.message)))
    // No agents and no tools: a viewer creates nothing and runs nothing; the scripted model is never called.
    const model = yield* ModelOption.resolve("scripted").pipe(Effect.orDie)
    const runtime = yield* Setup.runtime(
      { store, model, agents: [], fromFile: true },
      yield* Setup.telemetry,
      { claims: false, runs: false }
    ).pipe(Effect.mapError((error) => error.failure))
    const mode = modeOf(o.allowAnswers)
    const listener = yield* Layer.build(
      HttpListener.layer({
        listen: [o.http],
        trustLocal,
        writes: mode.writes,
        staticAssets: yield* Inspector.makeWith({ writes: mode.writes })
      }).pipe(
        Layer.provide(Layer.succeedContext(auth)),
        Layer.provide(Layer.succeedContext(runtime))
      )
    ).pipe(Effect.mapError((error) => ExitCode.startFailed(error.message)))
    const [address] = Context.get(listener, HttpListener.HttpListener).addresses
    const url = `http://${HttpListener.hostHeader(address!.host, address!.port)}/`
    yield* out.note(`troupe: inspector at ${url} · store ${StoreOption.describe(store)} · ${mode.said}`)
    yield* out.line(url)
    const reason = yield* signal
    yield* out.note(`troupe: stopping (${reason})`)
  })).pipe(
    Effect.zipRight(Effect.sync(() => process.stderr.write("troupe: stopped\n")))
  )
