/**
 * troupe: an actor-model runtime for AI-agent sessions on Effect.
 *
 * Start at `Troupe` (ready-made runtimes) and `Sessions` (the public API).
 * Modules are listed in alphabetical order.
 *
 * @since 0.1.0
 */
/** The frozen agent definition a session runs: instructions, model, tools, policies. */
export * as Agent from "./schema/Agent.js"
/** The agents a daemon serves, by name. */
export * as AgentCatalog from "./services/AgentCatalog.js"
/** The raw client tier: frames in, frames out, CBOR left to the caller (Effect and Promise APIs). */
export * as AgentClient from "./client/AgentClient.js"
/** Who a connection acts for: tokens, and trust for local connections. */
export * as Authenticator from "./server/Authenticator.js"
/** Per-turn budgets and the usage they are measured against. */
export * as Budget from "./schema/Budget.js"
/** Callbacks: requests for something outside the runtime to answer. */
export * as Callback from "./schema/Callback.js"
/** Hands open callbacks to the providers registered on a session or its ancestors, and admits their answers. */
export * as CallbackBroker from "./services/CallbackBroker.js"
/** Callback handlers typed by kind: approval answers, and each client tool's typed success. */
export * as CallbackHandlers from "./schema/CallbackHandlers.js"
/** The CBOR profile of the wire: what troupe writes and what it agrees to read. */
export * as Cbor from "./protocol/Cbor.js"
/** Context compaction settings (per agent and per run) and the `context_compacted` record. */
export * as Compaction from "./schema/Compaction.js"
/** Serves one connection over a `Transport`: handshake, framing, `core.*`, `auth.hello`. */
export * as Connection from "./server/Connection.js"
/** Prices model calls for the `costMicros` budget and the usage every turn reports. */
export * as CostMeter from "./services/CostMeter.js"
/** A `Model` over `@effect/ai`'s `LanguageModel`, for any `@effect/ai` provider. */
export * as EffectAiModel from "./layers/EffectAiModel.js"
/** The frame body: a CBOR map of version, type and payload. */
export * as Envelope from "./protocol/Envelope.js"
/** Chooses the `Telemetry` layer from configuration (`TROUPE_TELEMETRY_*`). */
export * as EnvTelemetry from "./layers/EnvTelemetry.js"
/** Errors that cross a boundary (store, wire, public API). */
export * as Errors from "./schema/Errors.js"
/** What subscribers of a session see: durable log records with their cursor, and volatile deltas. */
export * as Event from "./schema/Event.js"
/** The clients' forward-compatibility rule: what a newer daemon sends that a client cannot read passes through as `Unknown`. */
export * as ForwardCompatible from "./client/ForwardCompatible.js"
/** Frames: length, id, flags and body. */
export * as Frame from "./protocol/Frame.js"
/** Guardrails: host checks an agent names, run on a turn's message and final output. */
export * as Guardrails from "./services/Guardrails.js"
/** The connection handshake: the id range preamble and `core.ready`. */
export * as Handshake from "./protocol/Handshake.js"
/** The Promise API of `HttpSessionClient`, for plain TypeScript (`await HttpPromiseClient.connect(url)`). */
export * as HttpPromiseClient from "./client/HttpPromiseClient.js"
/** The typed HTTP client: the `Sessions` API of a remote daemon over HTTP, from the same `HttpApi` it serves (Effect API). */
export * as HttpSessionClient from "./client/HttpSessionClient.js"
/** Branded identifiers, `<prefix>_<ulid>`. */
export * as Ids from "./schema/Ids.js"
/** Commands admitted durably through a session's inbox before they are acted on. */
export * as Inbox from "./schema/Inbox.js"
/** The in-process `SessionHost`: one actor per live session in this process. */
export * as InProcessHost from "./actors/InProcessHost.js"
/** JSON values and their canonical text. */
export * as Json from "./schema/Json.js"
/** Leases (who may drive a session) and commits (fenced, atomic appends). */
export * as Lease from "./schema/Lease.js"
/** Listeners: unix socket, TCP and stdio, each serving its connections. */
export * as Listener from "./server/Listener.js"
/** A `Telemetry` that writes each product event as one JSON line. */
export * as LogTelemetry from "./layers/LogTelemetry.js"
/** The `Toolsets` port over MCP servers (stdio and Streamable HTTP), on the official SDK. */
export * as McpToolsets from "./layers/McpToolsets.js"
/** The in-memory `SessionStore`, for tests and ephemeral runs. */
export * as MemorySessionStore from "./layers/MemorySessionStore.js"
/** The `Model` port: one streaming call to a language model. */
export * as Model from "./services/Model.js"
/** Where a named daemon listens. */
export * as Naming from "./protocol/Naming.js"
/** A `Model` over the OpenAI Chat Completions wire format (OpenAI, vLLM, Ollama, …). */
export * as OpenAiCompatibleModel from "./layers/OpenAiCompatibleModel.js"
/** Operations (model calls and tool calls) and their retained receipts. */
export * as Operation from "./schema/Operation.js"
/** A `Telemetry` on OpenTelemetry, exporting over OTLP/HTTP. */
export * as OtelTelemetry from "./layers/OtelTelemetry.js"
/** The `SessionStore` on PostgreSQL. */
export * as PgSessionStore from "./layers/PgSessionStore.js"
/** `StoreSignals` on PostgreSQL: `LISTEN/NOTIFY` from the committing transaction, deltas forwarded best effort. */
export * as PgStoreSignals from "./layers/PgStoreSignals.js"
/** Session policies: messages during a turn, and spawning subagents. */
export * as Policy from "./schema/Policy.js"
/** Who acts: every session belongs to one principal's workspace. */
export * as Principal from "./schema/Principal.js"
/** Product events: what `Telemetry` reports about the use of troupe. */
export * as ProductEvent from "./schema/ProductEvent.js"
/** The Promise API of `SessionClient`, for plain TypeScript (`await PromiseClient.connect(path)`). */
export * as PromiseClient from "./client/PromiseClient.js"
/** Errors of the wire codec and the `core.error` payload they are answered with. */
export * as ProtocolError from "./protocol/ProtocolError.js"
/** The append-only log: every durable step of a session is a record with a gap-free `seq`. */
export * as Record from "./schema/Record.js"
/** The seam between a connection and what its messages mean. */
export * as Router from "./server/Router.js"
/** Per-run options: what a message may set for the turn it starts. */
export * as Run from "./schema/Run.js"
/** A deterministic `Model` whose replies come from scripts. */
export * as ScriptedModel from "./layers/ScriptedModel.js"
/** The daemon's network face: listeners with their connection limits. */
export * as Server from "./server/Server.js"
/** The session as the store keeps it and callers see it. */
export * as Session from "./schema/Session.js"
/** The typed client tier: the `Sessions` API of a remote daemon (Effect API). */
export * as SessionClient from "./client/SessionClient.js"
/** The `SessionHost` port: where a session's actor runs. */
export * as SessionHost from "./services/SessionHost.js"
/** The routes of troupe's own message types, onto the `Sessions` API. */
export * as SessionRoutes from "./server/SessionRoutes.js"
/** The public `Sessions` API: create, send, await, interrupt, read. */
export * as Sessions from "./services/Sessions.js"
/** The `SessionStore` port: the single source of truth. */
export * as SessionStore from "./services/SessionStore.js"
/** The `SessionStore` on SQLite (better-sqlite3). */
export * as SqliteSessionStore from "./layers/SqliteSessionStore.js"
/** `StoreSignals` on a SQLite file: a cheap `PRAGMA data_version` check while anything is watched. */
export * as SqliteStoreSignals from "./layers/SqliteStoreSignals.js"
/** The `StoreSignals` port: another process sharing the store changed a session. */
export * as StoreSignals from "./services/StoreSignals.js"
/** The `Telemetry` port: product events with bounded dimensions, and span attributes. */
export * as Telemetry from "./services/Telemetry.js"
/** Tools: what an agent may call. */
export * as Tool from "./services/Tool.js"
/** The server tools this host can run, by name. */
export * as Toolkit from "./services/Toolkit.js"
/** Toolsets: named groups of tools (MCP servers) agents declare and sessions bind, and the servers' shapes. */
export * as Toolset from "./schema/Toolset.js"
/** The `Toolsets` port: the toolsets a host serves, opened per session. */
export * as Toolsets from "./services/Toolsets.js"
/** A duplex byte stream as the connection code sees it. */
export * as Transport from "./protocol/Transport.js"
/** Ready-made runtimes: the `Sessions` API over a host, a store and a model, as one layer. */
export * as Troupe from "./Troupe.js"
/** Turn status and outcomes. */
export * as Turn from "./schema/Turn.js"
/** What a turn runs under, resolved once when it starts. */
export * as TurnPlan from "./actors/TurnPlan.js"
