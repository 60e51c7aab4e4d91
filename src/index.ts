/**
 * troupe: an actor-model runtime for AI-agent sessions on Effect.
 *
 * Start at `Troupe` (ready-made runtimes) and `Sessions` (the public API).
 *
 * @since 0.1.0
 */
export * as Troupe from "./Troupe.js"
export * as Sessions from "./services/Sessions.js"
export * as SessionStore from "./services/SessionStore.js"
export * as SessionHost from "./services/SessionHost.js"
export * as Model from "./services/Model.js"
export * as Tool from "./services/Tool.js"
export * as MemorySessionStore from "./layers/MemorySessionStore.js"
export * as SqliteSessionStore from "./layers/SqliteSessionStore.js"
export * as PgSessionStore from "./layers/PgSessionStore.js"
export * as ScriptedModel from "./layers/ScriptedModel.js"
export * as OpenAiCompatibleModel from "./layers/OpenAiCompatibleModel.js"
export * as InProcessHost from "./actors/InProcessHost.js"
export * as Agent from "./schema/Agent.js"
export * as Budget from "./schema/Budget.js"
export * as Callback from "./schema/Callback.js"
export * as Errors from "./schema/Errors.js"
export * as Event from "./schema/Event.js"
export * as Ids from "./schema/Ids.js"
export * as Inbox from "./schema/Inbox.js"
export * as Json from "./schema/Json.js"
export * as Lease from "./schema/Lease.js"
export * as Operation from "./schema/Operation.js"
export * as Policy from "./schema/Policy.js"
export * as Principal from "./schema/Principal.js"
export * as Record from "./schema/Record.js"
export * as Session from "./schema/Session.js"
export * as Turn from "./schema/Turn.js"
export * as EffectAiModel from "./layers/EffectAiModel.js"
