/**
 * Per-run options: what a message may set for the turn it starts, over the
 * session's agent. They travel in the `message` command and are frozen into
 * the `turn_started` record, so a turn resumed after a crash runs under them.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { ModelSettings, NoToolPolicy, Permission } from "./Agent.js"
import { Budgets } from "./Budget.js"

/** Overrides for one turn: permissions, model settings, budgets, the no-tool policy and the cycle bound. */
export class RunOptions extends Schema.Class<RunOptions>("troupe/RunOptions")({
  /** Rules here win over the agent's; the default here, when set, over the agent's default. */
  permissions: Schema.optional(Schema.Struct({
    default: Schema.optional(Permission),
    rules: Schema.optional(Schema.Record({ key: Schema.String, value: Permission }))
  })),
  /** Field by field over the agent's settings, which are over the host's defaults. */
  settings: Schema.optional(ModelSettings),
  /** Dimension by dimension over the session's budgets, which are over the agent's. */
  budgets: Schema.optional(Budgets),
  /** Over the agent's `noToolPolicy` (every agent of the turn, handoff targets included). */
  noToolPolicy: Schema.optional(NoToolPolicy),
  /** Over the agent's `maxCycles` (every agent of the turn, handoff targets included). */
  maxCycles: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)))
}) {}

const decode = Schema.decodeUnknownSync(RunOptions)

/** Revives stored run options (plain JSON) as a `RunOptions`. */
export const fromJson = (json: unknown): RunOptions => decode(json)
