/**
 * Ready-made runtimes: the `Sessions` API over the in-process host, a store
 * and a model, composed as one layer. Pick the store; pass model scripts and
 * host tuning as options.
 *
 * @since 0.1.0
 */
import * as Layer from "effect/Layer"
import * as InProcessHost from "./actors/InProcessHost.js"
import * as WorkerPool from "./actors/WorkerPool.js"
import * as MemorySessionStore from "./layers/MemorySessionStore.js"
import * as PgSessionStore from "./layers/PgSessionStore.js"
import * as ScriptedModel from "./layers/ScriptedModel.js"
import * as PgStoreSignals from "./layers/PgStoreSignals.js"
import * as SqliteSessionStore from "./layers/SqliteSessionStore.js"
import type { StoreUnavailable, ToolNotProvided } from "./schema/Errors.js"
import * as CallbackBroker from "./services/CallbackBroker.js"
import type { Agent } from "./schema/Agent.js"
import * as AgentCatalog from "./services/AgentCatalog.js"
import * as CostMeter from "./services/CostMeter.js"
import * as Guardrails from "./services/Guardrails.js"
import type { Model } from "./services/Model.js"
import type { SessionHost } from "./services/SessionHost.js"
import * as Sessions from "./services/Sessions.js"
import type { SessionStore } from "./services/SessionStore.js"
import * as StoreSignals from "./services/StoreSignals.js"
import * as Telemetry from "./services/Telemetry.js"
import * as Toolkit from "./services/Toolkit.js"
import * as Toolsets from "./services/Toolsets.js"

/** Everything a composed runtime provides (its `AgentCatalog` is `options.agents`: what the session routes create by name, too). */
export type Services =
  | Sessions.Sessions
  | SessionHost
  | SessionStore
  | Model
  | CallbackBroker.CallbackBroker
  | Toolkit.Toolkit
  | AgentCatalog.AgentCatalog

/** Options shared by every runtime. */
export interface RuntimeOptions {
  /** Host tuning: lease TTL, idle timeout, poll interval, owner name. */
  readonly host?: InProcessHost.Options | undefined
  /** The model layer; defaults to the scripted model with `scripts`. */
  readonly model?: Layer.Layer<Model> | undefined
  /** Scripts for the default scripted model. */
  readonly scripts?: ScriptedModel.Scripts | undefined
  /** The server tools this host runs (`Toolkit.layer([...])`); default none. */
  readonly tools?: Layer.Layer<Toolkit.Toolkit> | undefined
  /** The toolsets (MCP servers) agents declare and sessions bind (`McpToolsets.layer({...})`); default none. */
  readonly toolsets?: Layer.Layer<Toolsets.Toolsets> | undefined
  /** The guardrails agents may name (`Guardrails.layer([...])`); default none. */
  readonly guardrails?: Layer.Layer<Guardrails.Guardrails> | undefined
  /** Prices for the cost budget (`CostMeter.layer({...})`); default free. */
  readonly costs?: Layer.Layer<CostMeter.CostMeter> | undefined
  /**
   * The runtime's one catalog of agents, by name: what a spawn, an agent's
   * `subagents` and a daemon's `session.create` resolve names against
   * (`AgentCatalog`, provided with the runtime); default none.
   */
  readonly agents?: ReadonlyArray<Agent> | undefined
  /**
   * How commits by other processes sharing the store are signalled here
   * (`SqliteStoreSignals.layer`, `PgStoreSignals.layer`); default none, for a
   * store no other process shares. `layerSqlite` and `layerPg` set it.
   */
  readonly signals?: Layer.Layer<StoreSignals.StoreSignals> | undefined
  /** Product telemetry (`LogTelemetry.layer(...)`, `OtelTelemetry.layer(...)`, `EnvTelemetry.layerConfig`); default none. */
  readonly telemetry?: Layer.Layer<Telemetry.Telemetry> | undefined
}

/** Wires the API, the host and a model over any store layer. */
export const layer = <E, R>(
  store: Layer.Layer<SessionStore, E, R>,
  options: RuntimeOptions = {}
): Layer.Layer<Services, E | ToolNotProvided, R> => {
  const model = options.model ?? ScriptedModel.layer(options.scripts)
  const extras = Layer.mergeAll(
    // The agents' own tools join the host's; an agent naming a host tool no one provides stops the build.
    Toolkit.withAgents(options.tools ?? Toolkit.layerEmpty, options.agents ?? []),
    options.toolsets ?? Toolsets.layerNoop,
    options.costs ?? CostMeter.layerNoop,
    options.guardrails ?? Guardrails.layerEmpty,
    options.telemetry ?? Telemetry.layerNoop,
    AgentCatalog.layer(options.agents ?? []),
    options.signals ?? StoreSignals.layerNoop
  )
  // The store last: a store layer that brings its own signals (`SqliteSessionStore.layerWithSignals`) keeps them.
  const base = Layer.provideMerge(CallbackBroker.layer, Layer.mergeAll(model, extras, store))
  const host = Layer.provideMerge(InProcessHost.layer(options.host), base)
  return Layer.provideMerge(Sessions.layer, host)
}

/** A runtime on a fresh in-memory store and the scripted model: for tests. */
export const layerTest = (options: RuntimeOptions = {}): Layer.Layer<Services, ToolNotProvided> =>
  layer(MemorySessionStore.layer, options)

/**
 * Host options for a store other processes may share: their commands are
 * signalled (`StoreSignals`), and noticed within `inboxPoll` should a signal be lost;
 * the host is one worker of their pool (`WorkerPool`): it claims runnable sessions
 * every `WorkerPool.claimInterval` and takes its share of a burst.
 */
export const sharedStoreHost = (host: InProcessHost.Options = {}): InProcessHost.Options => ({
  inboxPoll: "1 second",
  pollInterval: WorkerPool.claimInterval(host.leaseTtl),
  spread: true,
  ...host
})

/**
 * A runtime on a SQLite file (or `:memory:`); other processes on the same file are signalled
 * through it, on the store's own connection (`SqliteSessionStore.layerWithSignals`), unless
 * `options.signals` says otherwise.
 */
export const layerSqlite = (
  sqlite: SqliteSessionStore.Options,
  options: RuntimeOptions = {}
): Layer.Layer<Services, StoreUnavailable | ToolNotProvided> =>
  layer(options.signals === undefined ? SqliteSessionStore.layerWithSignals(sqlite) : SqliteSessionStore.layer(sqlite), {
    ...options,
    host: sharedStoreHost(options.host)
  })

/** A runtime on PostgreSQL; other workers on the same database are signalled by `LISTEN/NOTIFY` (`PgStoreSignals`). */
export const layerPg = (
  pg: PgSessionStore.Options,
  options: RuntimeOptions = {}
): Layer.Layer<Services, StoreUnavailable | ToolNotProvided> =>
  layer(PgSessionStore.layer(pg), { signals: PgStoreSignals.layer({ url: pg.url }), ...options, host: sharedStoreHost(options.host) })
