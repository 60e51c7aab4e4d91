/**
 * The `Toolkit`: the server tools this host can run, by name. An agent's
 * `tools` are the model-facing contracts frozen into the session; the toolkit
 * holds the handlers that run them. A call of a tool the agent declares as a
 * client tool never reaches the toolkit (the client runs it); a call of a
 * server tool this host has no handler for reaches the model as a tool error.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type Agent, carriedTools, reachable, type ToolSpec } from "../schema/Agent.js"
import { ToolNotProvided } from "../schema/Errors.js"
import type { SessionId } from "../schema/Ids.js"
import * as Tool from "./Tool.js"

/** A tool ready to run: its requirements already provided. */
export interface Runnable {
  readonly spec: ToolSpec
  /** Runs the tool on the model's argument text; failures are error outcomes. */
  readonly run: (argumentsText: string, context: Tool.ToolContext) => Effect.Effect<Tool.ToolOutcome>
  /** Whether the tool itself asks for an approval of this call (`Tool.make`'s `needsApproval`). */
  readonly needsApproval?: ((argumentsText: string, context: Tool.ToolContext) => Effect.Effect<boolean>) | undefined
}

/** The port. */
export class Toolkit extends Context.Tag("troupe/Toolkit")<
  Toolkit,
  {
    /** The runnable tool named `name`, if this host has one. */
    readonly get: (name: string) => Runnable | undefined
    /** Told when a session closes, so tools can release what it owns (its `process.*` processes); absent: nothing to release. */
    readonly sessionClosed?: ((sessionId: SessionId) => Effect.Effect<void>) | undefined
  }
>() {}

// Tools differ in argument, result and error types; the toolkit only runs them.
type AnyTool<R> = Tool.Tool<any, any, any, any, any, R>

/** A toolkit of server tools; their handlers' requirements come from the layer's context. */
export const layer = <const Tools extends ReadonlyArray<AnyTool<any>>>(
  tools: Tools
): Layer.Layer<Toolkit, never, Tools[number] extends AnyTool<infer R> ? R : never> =>
  Layer.effect(Toolkit, Effect.map(Effect.context<any>(), (context) => toolkitOf(tools, context)))

/** The toolkit of `tools`, their handlers' requirements from `context`. */
const toolkitOf = <R>(tools: ReadonlyArray<AnyTool<R>>, built: Context.Context<R>): Toolkit["Type"] => {
  // The layer build's memo map is no service of a tool's: without it, tools that require
  // nothing run as they are, rather than through a `provide` (~20 Effect steps) per call.
  const context = Context.omit(Layer.CurrentMemoMap)(built) as Context.Context<R>
  const provided = <A>(effect: Effect.Effect<A, never, R>): Effect.Effect<A> =>
    context.unsafeMap.size === 0 ? effect as Effect.Effect<A> : Effect.provide(effect, context)
  const byName = new Map<string, Runnable>()
  for (const tool of tools) {
    if (tool.handler === undefined) continue
    byName.set(tool.name, {
      spec: tool.spec,
      run: (argumentsText, call) => provided(Tool.run(tool, argumentsText, call)),
      needsApproval: tool.needsApproval === undefined
        ? undefined
        : (argumentsText, call) => provided(Tool.needsApproval(tool, argumentsText, call))
    })
  }
  return Toolkit.of({ get: (name) => byName.get(name) })
}

/** A toolkit with no tools. */
export const layerEmpty: Layer.Layer<Toolkit> = Layer.succeed(Toolkit, Toolkit.of({ get: () => undefined }))

/**
 * The host tools `agents` name that neither `toolkit` nor the agents
 * themselves (tools given to `Agent.make`) provide; client tools and agent
 * tools (`asTool`) need none.
 */
export const missing = (
  toolkit: Toolkit["Type"],
  agents: ReadonlyArray<Agent>
): ReadonlyArray<ToolNotProvided> => {
  const out: Array<ToolNotProvided> = []
  for (const agent of agents.flatMap(reachable)) {
    for (const spec of agent.tools) {
      if (spec.client || spec.agent !== undefined || toolkit.get(spec.name) !== undefined) continue
      out.push(new ToolNotProvided({ agent: agent.name, tool: spec.name }))
    }
  }
  return out
}

/**
 * `base` with the tools that `agents` (and the agents they hand off to or
 * run as tools) carry, `base`'s own winning by name; fails to build with
 * `ToolNotProvided` when an agent names a host tool no one provides, so a
 * runtime missing a handler never starts (rather than a model being told
 * `no handler` at its first call).
 */
export const withAgents = <E, R>(
  base: Layer.Layer<Toolkit, E, R>,
  agents: ReadonlyArray<Agent>
): Layer.Layer<Toolkit, E | ToolNotProvided, R> =>
  Layer.effect(
    Toolkit,
    Effect.gen(function*() {
      const own = yield* Toolkit
      const carried = new Map<string, Runnable>()
      for (const agent of agents.flatMap(reachable)) {
        for (const tool of carriedTools(agent)) {
          if (carried.has(tool.spec.name)) continue
          // `Agent.make` keeps only tools with a handler needing no service: a `Tool.make` result.
          const runnable = toolkitOf([tool as AnyTool<never>], Context.empty()).get(tool.spec.name)
          if (runnable !== undefined) carried.set(tool.spec.name, runnable)
        }
      }
      // The base's `sessionClosed` too: what its tools own per session must still end with the session.
      const merged = Toolkit.of({ get: (name) => own.get(name) ?? carried.get(name), sessionClosed: own.sessionClosed })
      const absent = missing(merged, agents)
      if (absent.length > 0) return yield* Effect.fail(absent[0]!)
      return merged
    })
  ).pipe(Layer.provide(base))
