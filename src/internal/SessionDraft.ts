/**
 * How a `CreateSession` request becomes a stored `Session` and its first
 * record, identically in every store layer.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { Agent, childAgentNames } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import { SpawnRefused } from "../schema/Errors.js"
import type { SessionId } from "../schema/Ids.js"
import { canonical } from "../schema/Json.js"
import { SubagentPolicy } from "../schema/Policy.js"
import { type Principal, principalFields } from "../schema/Principal.js"
import { inherit, type ToolsetRef } from "../schema/Toolset.js"
import { ChildSpawned, SessionCreated } from "../schema/Record.js"
import { Session } from "../schema/Session.js"
import * as Trusted from "../schema/Trusted.js"
import type { CreateSession, SpawnChild } from "../services/SessionStore.js"

/**
 * The tenancy a session belongs to: the whole principal triple (customer,
 * organization, workspace), case-insensitive. Two principals see each other's
 * sessions only when all three match; `userId` does not partition.
 */
export const tenantOf = (principal: Principal): string =>
  `${principal.customerId.toLowerCase()}/${principal.organizationId.toLowerCase()}/${principal.workspaceId.toLowerCase()}`

/** The policy a root gets when its agent declares subagents and no policy is given (DESIGN §7). */
export const defaultSubagentPolicy: SubagentPolicy = new SubagentPolicy({ maxDepth: 3, maxChildTurns: 10 })

/**
 * The policy a new session is created with: a child's is its root's, copied
 * frozen (its parent's, which is the root's); a root's is the one asked for,
 * else its agent's, else the default when its agent declares subagents, else none.
 */
export const policyOf = (input: CreateSession, parent: Session | undefined): SubagentPolicy | null =>
  parent !== undefined
    ? parent.subagentPolicy
    : input.subagentPolicy ?? input.agent.subagentPolicy ?? (childAgentNames(input.agent).length > 0 ? defaultSubagentPolicy : null)

const encodeAgent = Schema.encodeSync(Agent)
const encodeBudgets = Schema.encodeSync(Budgets)
const encodePolicy = Schema.encodeSync(SubagentPolicy)

/**
 * The texts of each `Agent` value seen so far: its canonical text (for
 * fingerprints) and its stored JSON text (what a SQL store writes). An `Agent`
 * is immutable, and callers mostly create many sessions of one agent value:
 * its encoding (most of a fingerprint's cost, and of a SQL create's) is made once.
 */
const agentTexts = new WeakMap<Agent, { readonly encoded: unknown; canonical?: string; json?: string }>()

const encodedOf = (agent: Agent) => {
  let texts = agentTexts.get(agent)
  if (texts === undefined) {
    texts = { encoded: encodeAgent(agent) }
    agentTexts.set(agent, texts)
  }
  return texts
}

const agentText = (agent: Agent): string => {
  const texts = encodedOf(agent)
  return texts.canonical ??= canonical(texts.encoded)
}

/** `JSON.stringify` of the encoded `agent`, made once per `Agent` value. */
export const agentJson = (agent: Agent): string => {
  const texts = encodedOf(agent)
  return texts.json ??= JSON.stringify(texts.encoded)
}

/**
 * The canonical content of a create request: what "the same request" means
 * for idempotency keys. The text of `canonical` over the whole request, with
 * the agent's part taken from `agentText` (`agent` is the first key in sorted
 * order, and the rest is never empty: `alias`, `title`… are always there).
 */
export const fingerprint = (input: CreateSession): string =>
  `{"agent":${agentText(input.agent)},${
    canonical({
      principal: principalFields(input.principal),
      title: input.title ?? null,
      parentId: input.parentId ?? null,
      alias: input.alias ?? null,
      busyPolicy: input.busyPolicy ?? "queue",
      budgets: input.budgets ? encodeBudgets(input.budgets) : null,
      subagentPolicy: input.subagentPolicy ? encodePolicy(input.subagentPolicy) : null,
      metadata: input.metadata ?? {}
    }).slice(1)
  }`

/**
 * What a session stores as its create request's fingerprint: the fingerprint
 * under an idempotency key, the only case a later request is compared with
 * it; nothing (an empty text) without one, which spares each plain create
 * the canonical encoding of its whole request.
 */
export const printOf = (input: CreateSession): string =>
  input.idempotencyKey === undefined ? "" : fingerprint(input)

/** The new session, with lineage derived from its parent (if any). */
export const draft = (
  id: SessionId,
  input: CreateSession,
  parent: Session | undefined,
  now: number
): Session =>
  Trusted.make(Session, {
    id,
    principal: input.principal,
    agent: input.agent,
    parentId: parent?.id ?? null,
    rootId: parent?.rootId ?? id,
    agentPath: [...(parent?.agentPath ?? []), input.agent.name],
    alias: input.alias ?? null,
    title: input.title ?? null,
    archived: false,
    status: "idle",
    activeTurnId: null,
    busyPolicy: input.busyPolicy ?? "queue",
    budgets: input.budgets ?? null,
    subagentPolicy: policyOf(input, parent),
    metadata: input.metadata ?? {},
    headSeq: 1,
    createdAt: now,
    updatedAt: now
  })

/** The `session_created` record every session's log starts with. */
export const createdRecord = (session: Session): SessionCreated =>
  Trusted.make(SessionCreated, { agentName: session.agent.name, parentId: session.parentId, title: session.title })

/** The create request a spawn makes of its child. */
export const childInput = (spawn: SpawnChild, parent: Session, sessionId: SessionId, alias: string): CreateSession => ({
  principal: spawn.principal,
  // A child inherits its parent's toolset declarations (it opens its own protocol sessions for them).
  agent: withToolsets(spawn.agent, parent.agent.toolsets),
  title: spawn.title,
  parentId: parent.id,
  alias,
  busyPolicy: spawn.busyPolicy,
  budgets: spawn.budgets,
  metadata: spawn.metadata,
  sessionId
})

/** `agent` declaring `inherited` toolsets beside its own (the same value when that adds none). */
const withToolsets = (agent: Agent, inherited: ReadonlyArray<ToolsetRef> | undefined): Agent => {
  const merged = inherit(agent.toolsets, inherited)
  return merged === agent.toolsets || merged?.length === (agent.toolsets?.length ?? 0) ? agent : new Agent({ ...agent, toolsets: merged }, true)
}

/** The alias a spawn gives a child when none is asked for: `<agent>-<n>`. */
export const aliasFor = (agentName: string, n: number): string => `${agentName}-${n}`

/** The parent's `child_spawned` record of a spawn. */
export const spawnRecord = (spawn: SpawnChild, child: Session): ChildSpawned =>
  new ChildSpawned({
    childSessionId: child.id,
    agentName: child.agent.name,
    alias: child.alias,
    ...(spawn.turnId === undefined ? {} : { turnId: spawn.turnId }),
    ...(spawn.operationId === undefined ? {} : { operationId: spawn.operationId })
  }, true)

/**
 * Why the tree's policy refuses `parent` a child of agent `agentName`, given
 * how many children it has and how many child turns its tree has had; or
 * undefined when it allows it. Every store checks the same rules, inside its
 * transaction, with the counts read under the locks.
 */
export const spawnRefusal = (
  parent: Session,
  agentName: string,
  children: number,
  childTurns: number
): SpawnRefused | undefined => {
  const policy = parent.subagentPolicy
  const sessionId = parent.id
  if (policy === null) return new SpawnRefused({ sessionId, reason: "no_policy" })
  const allowed = policy.allowedAgents ?? childAgentNames(parent.agent)
  if (!allowed.includes(agentName)) return new SpawnRefused({ sessionId, reason: "agent_not_allowed", agent: agentName })
  // The root is depth 0; a child is one deeper than its parent.
  const depth = parent.agentPath.length
  if (depth > policy.maxDepth) {
    return new SpawnRefused({ sessionId, reason: "max_depth", limit: policy.maxDepth, observed: depth })
  }
  if (policy.maxChildren !== undefined && children + 1 > policy.maxChildren) {
    return new SpawnRefused({ sessionId, reason: "max_children", limit: policy.maxChildren, observed: children + 1 })
  }
  return childTurnRefusal(parent, childTurns)
}

/** Why the tree's policy refuses one more child turn (`session` is the one asking), or undefined. */
export const childTurnRefusal = (session: Session, childTurns: number): SpawnRefused | undefined => {
  const policy = session.subagentPolicy
  if (policy === null) return new SpawnRefused({ sessionId: session.id, reason: "no_policy" })
  if (policy.maxChildTurns !== undefined && childTurns + 1 > policy.maxChildTurns) {
    return new SpawnRefused({
      sessionId: session.id,
      reason: "max_child_turns",
      limit: policy.maxChildTurns,
      observed: childTurns + 1
    })
  }
  return undefined
}
