/**
 * The `Toolsets` port: the toolsets (MCP servers, DESIGN §10) this host
 * serves. A session's toolsets are opened for that session alone, in its
 * actor's scope: one protocol session per server per troupe session
 * (children included), closed when the actor ends. Their tools are offered to
 * the model as `<server>.<tool>` and run through the same permission layers,
 * approvals, budgets and receipts as any other tool.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { Agent, type ToolSpec } from "../schema/Agent.js"
import { InvalidInput } from "../schema/Errors.js"
import type { SessionId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import { inherit, type ToolsetRef } from "../schema/Toolset.js"
import type { Runnable } from "./Toolkit.js"

/** The toolsets of one session, opened. */
export interface SessionToolset {
  /**
   * The specs of the tools listed now, connecting servers that are not
   * connected yet (a server that cannot be reached offers no tools this time,
   * and is tried again on the next call of this).
   */
  readonly specs: Effect.Effect<ReadonlyArray<ToolSpec>>
  /** The tool of that model-facing name among those listed, ready to run. */
  readonly get: (name: string) => Runnable | undefined
}

/** The port. */
export class Toolsets extends Context.Tag("troupe/Toolsets")<
  Toolsets,
  {
    /**
     * A create request's bindings, checked against what the principal's
     * workspace sees: each as the ref frozen into the session (by id), or
     * `InvalidInput` naming the first one not served to it.
     */
    readonly bind: (principal: Principal, refs: ReadonlyArray<ToolsetRef>) => Effect.Effect<ReadonlyArray<ToolsetRef>, InvalidInput>
    /** Opens `refs` for one session, in the scope (lazily: nothing connects before `specs`). */
    readonly open: (
      session: { readonly sessionId: SessionId; readonly principal: Principal },
      refs: ReadonlyArray<ToolsetRef>
    ) => Effect.Effect<SessionToolset, never, Scope.Scope>
  }
>() {}

/** An opened toolset with no tools. */
export const empty: SessionToolset = { specs: Effect.succeed([]), get: () => undefined }

/** A host that serves no toolsets: binding one is `InvalidInput`, declared ones offer nothing. */
export const layerNoop: Layer.Layer<Toolsets> = Layer.succeed(
  Toolsets,
  Toolsets.of({
    bind: (_, refs) =>
      refs.length === 0
        ? Effect.succeed([])
        : Effect.fail(new InvalidInput({ what: "toolsets", reason: `no toolset ${refs[0]!.id ?? refs[0]!.name} is served here` })),
    open: () => Effect.succeed(empty)
  })
)

/** `agent` with `refs` bound beside the toolsets it declares (what a session's create binds). */
export const bindTo = (agent: Agent, refs: ReadonlyArray<ToolsetRef>): Agent =>
  refs.length === 0 ? agent : new Agent({ ...agent, toolsets: inherit(agent.toolsets, refs) }, true)
