/**
 * `--workspace DIR` and `--workspace-per-session` (`troupe run`, `troupe
 * serve`): the directory the built-in tools of an agents file's `builtins`
 * work in (docs/workspace.md). Without `--workspace`, agents that name
 * built-ins work in the current directory; without built-ins, no workspace is
 * opened at all.
 *
 * @since 0.3.0
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { resolve as resolvePath } from "node:path"
import * as LocalWorkspace from "../layers/LocalWorkspace.js"
import type { Agent } from "../schema/Agent.js"
import type * as Toolkit from "../services/Toolkit.js"
import * as Builtins from "../tools/Builtins.js"
import * as Shell from "../tools/workspace/Shell.js"

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

/** `--env NAME=VALUE` (repeatable). */
export const env: Options.Options<Option.Option<HashMap.HashMap<string, string>>> = Options.text("env").pipe(
  Options.withPseudoName("NAME=VALUE"),
  Options.withDescription("A variable for the built-in bash and process.start (repeatable); the daemon's own environment is never passed."),
  Options.repeated,
  Options.mapEffect((pairs) => {
    const out: Array<readonly [string, string]> = []
    for (const pair of pairs) {
      const at = pair.indexOf("=")
      const name = at < 0 ? "" : pair.slice(0, at)
      if (!Shell.isVariableName(name)) {
        return Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--env ${JSON.stringify(pair)}: expected NAME=VALUE, NAME of letters, digits and _`)))
      }
      out.push([name, pair.slice(at + 1)])
    }
    return Effect.succeed(out.length === 0 ? Option.none() : Option.some(HashMap.fromIterable(out)))
  })
)

/** What the command line (and the agents file) chose. */
export interface Choice {
  readonly workspace?: Option.Option<string> | undefined
  readonly workspacePerSession?: boolean | undefined
  /** `--env`: variables for every built-in command. */
  readonly env?: Option.Option<HashMap.HashMap<string, string>> | undefined
  /** The agents file's `env`, by agent name: variables for that agent's built-in commands. */
  readonly agentEnv?: Readonly<Record<string, Readonly<Record<string, string>>>> | undefined
}

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
