/**
 * How a `CreateSession` request becomes a stored `Session` and its first
 * record, identically in every store layer.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Agent } from "../schema/Agent.js"
import { Budgets } from "../schema/Budget.js"
import type { SessionId } from "../schema/Ids.js"
import { canonical } from "../schema/Json.js"
import { SubagentPolicy } from "../schema/Policy.js"
import { Principal } from "../schema/Principal.js"
import { SessionCreated } from "../schema/Record.js"
import { Session } from "../schema/Session.js"
import type { CreateSession } from "./SessionStore.js"

const encodeAgent = Schema.encodeSync(Agent)
const encodePrincipal = Schema.encodeSync(Principal)
const encodeBudgets = Schema.encodeSync(Budgets)
const encodePolicy = Schema.encodeSync(SubagentPolicy)

/**
 * The canonical content of a create request: what "the same request" means
 * for idempotency keys.
 */
export const fingerprint = (input: CreateSession): string =>
  canonical({
    principal: encodePrincipal(input.principal),
    agent: encodeAgent(input.agent),
    title: input.title ?? null,
    parentId: input.parentId ?? null,
    alias: input.alias ?? null,
    busyPolicy: input.busyPolicy ?? "queue",
    budgets: input.budgets ? encodeBudgets(input.budgets) : null,
    subagentPolicy: input.subagentPolicy ? encodePolicy(input.subagentPolicy) : null,
    metadata: input.metadata ?? {}
  })

/** The new session, with lineage derived from its parent (if any). */
export const draft = (
  id: SessionId,
  input: CreateSession,
  parent: Session | undefined,
  now: number
): Session =>
  new Session({
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
    subagentPolicy: input.subagentPolicy ?? null,
    metadata: input.metadata ?? {},
    headSeq: 1,
    createdAt: now,
    updatedAt: now
  }, true)

/** The `session_created` record every session's log starts with. */
export const createdRecord = (session: Session): SessionCreated =>
  new SessionCreated({ agentName: session.agent.name, parentId: session.parentId, title: session.title }, true)
