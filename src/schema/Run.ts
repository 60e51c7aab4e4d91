/**
 * Per-run options: what a message may set for the turn it starts, over the
 * session's agent (permissions only add to the agent's: decision 0017). They travel in the `message` command and are frozen into
 * the `turn_started` record, so a turn resumed after a crash runs under them.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { ModelSettings, NoToolPolicy, Permission, PermissionLayer, PermissionRules } from "./Agent.js"
import { Budgets } from "./Budget.js"
import { CompactionSettings } from "./Compaction.js"
import { ApprovalSettings } from "./Policy.js"

/** Options of one turn: a permission layer, approval settings, model settings, budgets, compaction, the no-tool policy and the cycle bound (and layers inherited from a parent). */
export class RunOptions extends Schema.Class<RunOptions>("troupe/RunOptions")({
  /**
   * One more permission layer over the host's, the agent's and the parent's:
   * it can deny or ask about more, never lift their denials (docs/agent-loop.md).
   */
  permissions: Schema.optional(Schema.Struct({
    default: Schema.optional(Permission),
    rules: Schema.optional(Schema.Record({ key: Schema.String, value: Permission })),
    ...PermissionRules
  })),
  /** Approval mode and timeout over the agent's. */
  approvals: Schema.optional(ApprovalSettings),
  /** The layers of the parent turn that sent a child's message: they bind the child's turn too. */
  inherited: Schema.optional(Schema.Array(PermissionLayer)),
  /** Field by field over the agent's settings, which are over the host's defaults. */
  settings: Schema.optional(ModelSettings),
  /** Dimension by dimension over the session's budgets, which are over the agent's. */
  budgets: Schema.optional(Budgets),
  /** Field by field over the agent's compaction settings. */
  compaction: Schema.optional(CompactionSettings),
  /** Over the agent's `noToolPolicy` (every agent of the turn, handoff targets included). */
  noToolPolicy: Schema.optional(NoToolPolicy),
  /** Over the agent's `maxCycles` (every agent of the turn, handoff targets included). */
  maxCycles: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)))
}) {}

const decode = Schema.decodeUnknownSync(RunOptions)

/** Revives stored run options (plain JSON) as a `RunOptions`. */
export const fromJson = (json: unknown): RunOptions => decode(json)
