/**
 * The session (actor) as the store keeps it and callers see it.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { Agent } from "./Agent.js"
import { Budgets } from "./Budget.js"
import { SessionId, TurnId } from "./Ids.js"
import { JsonObject } from "./Json.js"
import { BusyPolicy, SubagentPolicy } from "./Policy.js"
import { Principal } from "./Principal.js"

/**
 * Derived status: `idle` (no active turn), `running`, `waiting` (the active
 * turn has an open callback), `closed` (accepts nothing more).
 */
export const SessionStatus = Schema.Literal("idle", "running", "waiting", "closed")
/** @since 0.1.0 */
export type SessionStatus = typeof SessionStatus.Type

/** A session as stored: identity, lineage, frozen agent, policies and head. */
export class Session extends Schema.Class<Session>("troupe/Session")({
  id: SessionId,
  principal: Principal,
  agent: Agent,
  parentId: Schema.NullOr(SessionId),
  rootId: SessionId,
  /** Agent names from the root down to this session. */
  agentPath: Schema.Array(Schema.String),
  /** A permanent alias, unique among the parent's children. */
  alias: Schema.NullOr(Schema.String),
  title: Schema.NullOr(Schema.String),
  archived: Schema.Boolean,
  status: SessionStatus,
  activeTurnId: Schema.NullOr(TurnId),
  busyPolicy: BusyPolicy,
  budgets: Schema.NullOr(Budgets),
  subagentPolicy: Schema.NullOr(SubagentPolicy),
  metadata: JsonObject,
  /** Sequence number of the newest log record (0 before any). */
  headSeq: Schema.Number,
  createdAt: Schema.Number,
  updatedAt: Schema.Number
}) {}

/** Which sessions a listing covers. */
export const ListScope = Schema.Union(
  Schema.Literal("roots"),
  Schema.Struct({ children: SessionId }),
  Schema.Struct({ tree: SessionId })
)
/** @since 0.1.0 */
export type ListScope = typeof ListScope.Type

/** One page of a newest-first listing; `nextCursor` is opaque. */
export class SessionPage extends Schema.Class<SessionPage>("troupe/SessionPage")({
  items: Schema.Array(Session),
  nextCursor: Schema.optional(Schema.String)
}) {}

/** One direct child of a session, as `children(...)` lists it. */
export class ChildEntry extends Schema.Class<ChildEntry>("troupe/ChildEntry")({
  session: Session,
  /** Its permanent alias, unique among its parent's children. */
  alias: Schema.NullOr(Schema.String),
  /** Its agent's name. */
  agent: Schema.String,
  /** Agent names from the root down to this child. */
  agentPath: Schema.Array(Schema.String)
}) {}

/** One page of a session's direct children, newest first; `nextCursor` is opaque. */
export class ChildPage extends Schema.Class<ChildPage>("troupe/ChildPage")({
  items: Schema.Array(ChildEntry),
  nextCursor: Schema.optional(Schema.String)
}) {}

/** One session of a subtree. */
export class TreeNode extends Schema.Class<TreeNode>("troupe/TreeNode")({
  session: Session,
  parentId: SessionId,
  alias: Schema.NullOr(Schema.String),
  agentPath: Schema.Array(Schema.String)
}) {}

/**
 * A session and every session below it, oldest first (a parent always
 * before its children), at most `maxTreeNodes` nodes.
 */
export class SessionTree extends Schema.Class<SessionTree>("troupe/SessionTree")({
  root: Session,
  nodes: Schema.Array(TreeNode)
}) {}

/** The most nodes `tree(...)` returns; a larger subtree is paged with `list({ scope: { tree } })`. */
export const maxTreeNodes = 10_000
