/**
 * Product telemetry caused over the wire: a daemon (session routes over the
 * test runtime) with `LogTelemetry` writing to a temp file. A client that says
 * `excludeFromAnalytics: true` in `auth.hello` has its events written with
 * `excluded: true`, through the turn its message starts; another client's are
 * not excluded; a refused hello is `auth.failed`.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import * as LogTelemetry from "../../src/layers/LogTelemetry.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import { Router } from "../../src/server/Router.js"
import * as Server from "../../src/server/Server.js"
import * as SessionRoutes from "../../src/server/SessionRoutes.js"
import { Sessions } from "../../src/services/Sessions.js"
import * as Troupe from "../../src/Troupe.js"
import { agent, principal } from "../support/fixtures.js"
import { awaitEvents, readEvents } from "../support/telemetryFile.js"
import * as H from "./harness.js"

const TOKEN_QUIET = "token-quiet"
const TOKEN_LOUD = "token-loud"

/** The product events written so far, without their times. */
const lines = (path: string): ReadonlyArray<Record<string, unknown>> => readEvents(path).map(({ at: _at, ...event }) => event)

/** Runs a client as if its own telemetry were enabled. */
const telemetryOn = Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TROUPE_TELEMETRY_ENABLED", "true"]])))

describe("Connection telemetry", () => {
  it.live("events caused by an excluded connection are excluded; a refused hello is auth.failed", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* H.tempDir
      const file = join(dir, "telemetry.jsonl")
      const path = join(dir, "agent.sock")
      const quiet = principal("quiet")
      const loud = principal("loud")
      const runtime = Troupe.layerTest({ telemetry: LogTelemetry.layer({ path: file }) })
      const routes = SessionRoutes.layer.pipe(Layer.provide(AgentCatalog.layer([agent("echo")])))
      const app = Layer.provideMerge(
        Layer.mergeAll(routes, Authenticator.layerStatic({ [TOKEN_QUIET]: quiet, [TOKEN_LOUD]: loud })),
        runtime
      )
      const context = yield* Layer.build(Layer.provideMerge(Server.layer({ unix: { path, trustedLocal: false } }), app))
      const sessions = yield* Effect.provide(Sessions, context)

      const excluded = yield* SessionClient.connect(path, { token: TOKEN_QUIET, excludeFromAnalytics: true, reconnect: false })
      const first = yield* excluded.create({ agent: "echo" })
      const sent = yield* excluded.send(first.id, { text: "hi" })
      yield* sessions.awaitTurn(quiet, first.id, sent.turnId!)
      // The turn's product event is written after its record is persisted: wait for it, so the order below is fixed.
      yield* awaitEvents(file, 2)

      // (Tests run with TROUPE_TELEMETRY_ENABLED=false, which a client reports: this one has telemetry on.)
      const included = yield* SessionClient.connect(path, { token: TOKEN_LOUD, reconnect: false }).pipe(telemetryOn)
      yield* included.create({ agent: "echo" })

      const refused = yield* Effect.flip(SessionClient.connect(path, { token: "wrong", reconnect: false }).pipe(telemetryOn))
      assert.strictEqual(refused._tag, "ServerError")

      const events = lines(file)
      assert.deepStrictEqual(events.map((event) => [event["event"], event["excluded"]]), [
        ["session.started", true],
        ["turn.ended", true],
        ["session.started", false],
        ["auth.failed", false]
      ])
      assert.deepStrictEqual(events[3], { event: "auth.failed", category: "unauthenticated", status: 401, excluded: false })
    })))

  it.live("a refused hello is excluded if it asks or its connection is; an ill-shaped hello is auth.failed invalid_input", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* H.tempDir
      const file = join(dir, "telemetry.jsonl")
      const path = join(dir, "agent.sock")
      yield* Layer.build(
        Server.layer({ unix: { path, trustedLocal: false } }).pipe(
          Layer.provide(Layer.mergeAll(
            Layer.succeed(Router, H.routerOf({})),
            H.tokenAuth,
            LogTelemetry.layer({ path: file })
          ))
        )
      )
      const peer = yield* H.rawConnect({ path })
      const quiet = yield* peer.exchange(1, 0, "auth.hello", { token: "wrong", excludeFromAnalytics: true })
      const shapeless = yield* peer.exchange(2, 0, "auth.hello", { token: 42 })
      const welcome = yield* peer.exchange(3, 0, "auth.hello", { token: H.TOKEN, excludeFromAnalytics: true })
      const loud = yield* peer.exchange(4, 0, "auth.hello", { token: "wrong" })
      assert.deepStrictEqual([quiet.t, shapeless.t, welcome.t, loud.t], ["core.error", "core.error", "auth.welcome", "core.error"])
      assert.deepStrictEqual(lines(file), [
        { event: "auth.failed", category: "unauthenticated", status: 401, excluded: true },
        { event: "auth.failed", category: "invalid_input", status: 400, excluded: false },
        // The connection is excluded since its welcome: a later hello it sends is reported excluded, flag or not.
        { event: "auth.failed", category: "unauthenticated", status: 401, excluded: true }
      ])
    })))

  it.live("a client whose own telemetry is disabled says so, with a token or to a trusted listener", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* H.tempDir
      const file = join(dir, "telemetry.jsonl")
      const trusted = join(dir, "trusted.sock")
      const guarded = join(dir, "guarded.sock")
      const runtime = Troupe.layerTest({ telemetry: LogTelemetry.layer({ path: file }) })
      const routes = SessionRoutes.layer.pipe(Layer.provide(AgentCatalog.layer([agent("echo")])))
      const app = Layer.provideMerge(
        Layer.mergeAll(
          routes,
          Authenticator.layerTrustedLocal(principal("local"), Authenticator.layerStatic({ [TOKEN_LOUD]: principal("loud") }))
        ),
        runtime
      )
      yield* Layer.build(Layer.provideMerge(
        Layer.mergeAll(
          Server.layer({ unix: { path: trusted, trustedLocal: true } }),
          Server.layer({ unix: { path: guarded, trustedLocal: false } })
        ),
        app
      ))
      const disabled = Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TROUPE_TELEMETRY_ENABLED", "false"]])))
      const local = yield* SessionClient.connect(trusted, { reconnect: false }).pipe(disabled)
      yield* local.create({ agent: "echo" })
      const remote = yield* SessionClient.connect(guarded, { token: TOKEN_LOUD, reconnect: false }).pipe(disabled)
      yield* remote.create({ agent: "echo" })
      const enabled = yield* SessionClient.connect(guarded, { token: TOKEN_LOUD, reconnect: false }).pipe(telemetryOn)
      yield* enabled.create({ agent: "echo" })
      assert.deepStrictEqual(lines(file).map((event) => [event["event"], event["excluded"]]), [
        ["session.started", true],
        ["session.started", true],
        ["session.started", false]
      ])
    })))

  it.live("a client's telemetryEnabled option overrides TROUPE_TELEMETRY_ENABLED, either way", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* H.tempDir
      const file = join(dir, "telemetry.jsonl")
      const trusted = join(dir, "trusted.sock")
      const runtime = Troupe.layerTest({ telemetry: LogTelemetry.layer({ path: file }) })
      const routes = SessionRoutes.layer.pipe(Layer.provide(AgentCatalog.layer([agent("echo")])))
      const app = Layer.provideMerge(Layer.mergeAll(routes, Authenticator.layerTrustedLocal(principal("local"))), runtime)
      yield* Layer.build(Layer.provideMerge(Server.layer({ unix: { path: trusted, trustedLocal: true } }), app))
      const disabled = Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TROUPE_TELEMETRY_ENABLED", "false"]])))
      const off = yield* SessionClient.connect(trusted, { reconnect: false, telemetryEnabled: false }).pipe(telemetryOn)
      yield* off.create({ agent: "echo" })
      const on = yield* SessionClient.connect(trusted, { reconnect: false, telemetryEnabled: true }).pipe(disabled)
      yield* on.create({ agent: "echo" })
      assert.deepStrictEqual(lines(file).map((event) => [event["event"], event["excluded"]]), [
        ["session.started", true],
        ["session.started", false]
      ])
    })))
})
