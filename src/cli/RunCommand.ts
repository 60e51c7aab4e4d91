/**
 * `troupe run "PROMPT"`: the command line of a one-shot embedded run. The
 * run itself (`EmbeddedRun.run`) is loaded only when the command runs.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import { Effect } from "effect"
import * as Help from "./Help.js"
import * as ModelOption from "./ModelOption.js"
import * as StoreOption from "./StoreOption.js"
import * as Words from "./Words.js"

const options = {
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

/** The `run` command. */
export const command = Command.make("run", options, (o) =>
  Effect.flatMap(Effect.promise(() => import("./EmbeddedRun.js")), (EmbeddedRun) => EmbeddedRun.run(o))).pipe(
  Command.withDescription(Help.describe(
    "Run one turn on an embedded runtime (no daemon): stream the answer, show tool calls, ask approvals, print the outcome and usage.",
    [
      ["troupe run \"What is troupe?\"", "one turn of the built-in demo agent, kept in $TROUPE_HOME/troupe.db"],
      ["troupe run --agents agents.json --agent helper --approve all summarise the README", "an agent of your own; every approval granted"],
      ["troupe run --json --store memory hello | head -1", "the session's events as JSON lines, nothing kept"]
    ]
  ))
)
