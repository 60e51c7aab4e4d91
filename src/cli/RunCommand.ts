/**
 * `troupe run "PROMPT"`: the command line of a one-shot embedded run, over the
 * options in `RunOptions`. The run itself (`EmbeddedRun.run`) is loaded only
 * when the command runs.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Help from "./Help.js"
import * as RunOptions from "./RunOptions.js"

/** The `run` command. */
export const command = Command.make("run", RunOptions.options, (o) =>
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
