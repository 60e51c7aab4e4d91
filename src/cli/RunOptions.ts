/**
 * The options of `troupe run`, apart from the command: `RunCommand` parses
 * them, and `EmbeddedRun` (loaded only when the command runs) takes what they
 * parse to, so `EmbeddedRun` needs nothing of `RunCommand`: no import circle.
 *
 * @since 0.1.0
 */
import { type Command, Options } from "@effect/cli"
import * as ModelOption from "./ModelOption.js"
import * as StoreOption from "./StoreOption.js"
import * as WorkspaceOption from "./WorkspaceOption.js"
import * as Words from "./Words.js"

/** The options of `troupe run`. */
export const options = {
  prompt: Words.args("PROMPT", "What to ask the agent: one quoted argument, or several words joined with spaces."),
  agent: Options.text("agent").pipe(
    Options.withPseudoName("NAME"),
    Options.withDescription("The agent to run (default: the first of --agents, or the built-in agent)."),
    Options.optional
  ),
  agents: Options.file("agents", { exists: "yes" }).pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription("Agent definitions (JSON, see docs/configuration.md)."),
    Options.optional
  ),
  store: StoreOption.option,
  sqliteSync: StoreOption.sqliteSync,
  workspace: WorkspaceOption.option,
  workspacePerSession: WorkspaceOption.perSession,
  env: WorkspaceOption.env,
  model: ModelOption.option,
  approve: Options.choice("approve", ["all", "none"]).pipe(
    Options.withDescription("Answer every approval: all (approve) or none (deny); default: ask on the terminal."),
    Options.optional
  ),
  title: Options.text("title").pipe(
    Options.withPseudoName("TEXT"),
    Options.withDescription("The session's title (default: the start of the prompt)."),
    Options.optional
  ),
  json: Options.boolean("json").pipe(Options.withDescription("Print the session's events as JSON lines on stdout."))
}

/** What `troupe run` was given. */
export type RunOptions = Command.Command.ParseConfig<typeof options>
