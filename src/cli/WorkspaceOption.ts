/**
 * `--workspace DIR` and `--workspace-per-session` (`troupe run`, `troupe
 * serve`): the directory the built-in tools of an agents file's `builtins`
 * work in (docs/workspace.md). Without `--workspace`, agents that name
 * built-ins work in the current directory; without built-ins, no workspace is
 * opened at all. What the options build is `WorkspaceToolkit`'s, loaded with
 * the commands that run agents.
 *
 * @since 0.3.0
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"

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
  Options.mapEffect((pairs) =>
    pairs.length === 0 ? Effect.succeed(Option.none()) : Effect.flatMap(
      // Loaded only when --env is given: the shell's rules for a variable's name.
      Effect.promise(() => import("../tools/workspace/Shell.js")),
      (Shell) => {
        const out: Array<readonly [string, string]> = []
        for (const pair of pairs) {
          const at = pair.indexOf("=")
          const name = at < 0 ? "" : pair.slice(0, at)
          if (!Shell.isVariableName(name)) {
            return Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--env ${JSON.stringify(pair)}: expected NAME=VALUE, NAME of letters, digits and _`)))
          }
          out.push([name, pair.slice(at + 1)])
        }
        return Effect.succeed(Option.some(HashMap.fromIterable(out)))
      }
    )
  )
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
