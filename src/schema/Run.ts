/**
 * Per-run options: what a message may set for the turn it starts, over the
 * session's agent. They travel in the `message` command and are frozen into
 * the `turn_started` record, so a turn resumed after a crash runs under them.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { ModelSettings, Permission } from "./Agent.js"
import { Budgets } from "./Budget.js"
import { CompactionSettings } from "./Compaction.js"

/** Overrides for one turn: permissions, model settings and budgets. */
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
  /** Field by field over the agent's compaction settings. */
  compaction: Schema.optional(CompactionSettings)
}) {}

const decode = Schema.decodeUnknownSync(RunOptions)

/** Revives stored run options (plain JSON) as a `RunOptions`. */
export const fromJson = (json: unknown): RunOptions => decode(json)
