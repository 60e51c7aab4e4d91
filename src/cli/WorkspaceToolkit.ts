/**
 * The host's toolkit on a workspace (`troupe run`, `troupe serve`): the
 * built-in tools over a local workspace when an agent uses them or
 * `--workspace` was given (`WorkspaceOption` holds the options).
 *
 * @since 0.3.0
 */
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { resolve as resolvePath } from "node:path"
import * as LocalWorkspace from "../layers/LocalWorkspace.js"
import type { Agent } from "../schema/Agent.js"
import type * as Toolkit from "../services/Toolkit.js"
import * as Builtins from "../tools/Builtins.js"
import type { Choice } from "./WorkspaceOption.js"

/** `--env`'s variables as a record. */
const envOf = (choice: Choice): Record<string, string> | undefined =>
  Option.match(choice.env ?? Option.none(), { onNone: () => undefined, onSome: (map) => Object.fromEntries(HashMap.toEntries(map)) })

/** Whether any agent runs a built-in here (a server tool of a built-in's name). */
export const usesBuiltins = (agents: ReadonlyArray<Agent>): boolean =>
  agents.some((agent) => agent.tools.some((tool) => !tool.client && Builtins.NAMES.includes(tool.name)))

/** The root the built-ins work in: `--workspace`, or the current directory. */
export const rootOf = (choice: Choice): string =>
  resolvePath(Option.getOrElse(choice.workspace ?? Option.none(), () => "."))

/**
 * The host's toolkit: the built-ins over `tools` on a local workspace when an
 * agent uses them (or `--workspace` was given), else `tools` as they are.
 */
export const toolkit = (
  choice: Choice,
  agents: ReadonlyArray<Agent>,
  tools: Layer.Layer<Toolkit.Toolkit> | undefined
): Layer.Layer<Toolkit.Toolkit> | undefined =>
  !usesBuiltins(agents) && Option.isNone(choice.workspace ?? Option.none())
    ? tools
    : Builtins.layerWith({ tools, env: envOf(choice), agentEnv: choice.agentEnv }).pipe(
      Layer.provide(LocalWorkspace.layerWith({ root: rootOf(choice), perRoot: choice.workspacePerSession === true }))
    )
