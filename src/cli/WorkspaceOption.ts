/**
 * `--workspace DIR` and `--workspace-per-session` (`troupe run`, `troupe
 * serve`): the directory the built-in tools of an agents file's `builtins`
 * work in (docs/workspace.md). Without `--workspace`, agents that name
 * built-ins work in the current directory; without built-ins, no workspace is
 * opened at all.
 *
 * @since 0.3.0
 */
import { Options } from "@effect/cli"
import { Layer, Option } from "effect"
import { resolve as resolvePath } from "node:path"
import * as LocalWorkspace from "../layers/LocalWorkspace.js"
import type { Agent } from "../schema/Agent.js"
import type * as Toolkit from "../services/Toolkit.js"
import * as Builtins from "../tools/Builtins.js"

/** `--workspace DIR`. */
export const option = Options.directory("workspace", { exists: "either" }).pipe(
  Options.withPseudoName("DIR"),
  Options.withDescription("The directory the agents' built-in tools (builtins) work in; default: the current directory."),
  Options.optional
)

/** `--workspace-per-session`. */
export const perSession = Options.boolean("workspace-per-session").pipe(
  Options.withDescription("One directory per session tree under --workspace (named by the root session's id); children share it.")
)

/** What the command line chose. */
export interface Choice {
  readonly workspace?: Option.Option<string> | undefined
  readonly workspacePerSession?: boolean | undefined
}

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
    : Builtins.layerWith({ tools }).pipe(
      Layer.provide(LocalWorkspace.layerWith({ root: rootOf(choice), perRoot: choice.workspacePerSession === true }))
    )
