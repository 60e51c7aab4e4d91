/**
 * `troupe run "PROMPT"`: the command line of a one-shot embedded run. The
 * run itself (`EmbeddedRun.run`) is loaded only when the command runs.
 *
 * @since 0.1.0
 */
import { Args, Command, Options } from "@effect/cli"
import { Effect } from "effect"
import * as ModelOption from "./ModelOption.js"
import * as StoreOption from "./StoreOption.js"

const options = {
  prompt: Args.text({ name: "PROMPT" }).pipe(Args.withDescription("What to ask the agent.")),
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
  Command.withDescription(
    "Run one turn on an embedded runtime (no daemon): stream the answer, show tool calls, ask approvals, print the outcome and usage."
  )
)
