/**
 * The agents a daemon serves, by name. A remote `session.create` names its
 * agent; the definition itself stays on the server, so a client can neither
 * inject instructions nor widen an agent's tools or permissions.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Agent } from "../schema/Agent.js"

/** The port. */
export class AgentCatalog extends Context.Tag("troupe/AgentCatalog")<
  AgentCatalog,
  {
    /** The agent of that name, if this daemon serves it. */
    readonly get: (name: string) => Option.Option<Agent>
    /** Every agent served, in the order given. */
    readonly list: ReadonlyArray<Agent>
  }
>() {}

/** A catalog of `agents`; two agents of one name are a defect (a request could not say which it meant). */
export const make = (agents: ReadonlyArray<Agent>): Effect.Effect<AgentCatalog["Type"]> =>
  Effect.suspend(() => {
    const byName = new Map<string, Agent>()
    for (const agent of agents) {
      if (byName.has(agent.name)) return Effect.dieMessage(`AgentCatalog: two agents are named ${agent.name}`)
      byName.set(agent.name, agent)
    }
    const list = [...agents]
    return Effect.succeed(AgentCatalog.of({
      get: (name) => Option.fromNullable(byName.get(name)),
      list
    }))
  })

/** The catalog as a layer. */
export const layer = (agents: ReadonlyArray<Agent>): Layer.Layer<AgentCatalog> => Layer.effect(AgentCatalog, make(agents))
