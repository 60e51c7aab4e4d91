/**
 * `troupe/schema`: the contract's types and Schemas alone — agents, sessions,
 * records, events, errors, ids — without the runtime, the clients or any
 * driver, for a program that only reads or writes troupe's data (a client in
 * another process, a UI, a tool that validates an agents file). The same
 * modules as the package root's namespaces of the same names.
 *
 * @since 0.3.0
 */
/** The frozen agent definition a session runs: instructions, model, tools, policies. */
export * as Agent from "./Agent.js"
/** Per-turn budgets and the usage they are measured against. */
export * as Budget from "./Budget.js"
/** Callbacks: requests for something outside the runtime to answer. */
export * as Callback from "./Callback.js"
/** Callback handlers typed by kind: approval answers, and each client tool's typed success. */
export * as CallbackHandlers from "./CallbackHandlers.js"
/** Context compaction settings (per agent and per run) and the `context_compacted` record. */
export * as Compaction from "./Compaction.js"
/** Errors that cross a boundary (store, wire, public API). */
export * as Errors from "./Errors.js"
/** What subscribers of a session see: durable log records with their cursor, and volatile deltas. */
export * as Event from "./Event.js"
/** Branded identifiers, `<prefix>_<ulid>`. */
export * as Ids from "./Ids.js"
/** Commands admitted durably through a session's inbox before they are acted on. */
export * as Inbox from "./Inbox.js"
/** JSON values and their canonical text. */
export * as Json from "./Json.js"
/** Leases (who may drive a session) and commits (fenced, atomic appends). */
export * as Lease from "./Lease.js"
/** Operations (model calls and tool calls) and their retained receipts. */
export * as Operation from "./Operation.js"
/** Session policies: messages during a turn, and spawning subagents. */
export * as Policy from "./Policy.js"
/** Who acts: every session belongs to one principal's workspace. */
export * as Principal from "./Principal.js"
/** Product events: what `Telemetry` reports about the use of troupe. */
export * as ProductEvent from "./ProductEvent.js"
/** The append-only log: every durable step of a session is a record with a gap-free `seq`. */
export * as Record from "./Record.js"
/** Per-run options: what a message may set for the turn it starts. */
export * as Run from "./Run.js"
/** The session as the store keeps it and callers see it. */
export * as Session from "./Session.js"
/** Toolsets: named groups of tools (MCP servers) agents declare and sessions bind, and the servers' shapes. */
export * as Toolset from "./Toolset.js"
/** Turn status and outcomes. */
export * as Turn from "./Turn.js"
