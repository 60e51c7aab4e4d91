/**
 * The `troupe` program: the root command, its subcommands, and how the
 * process ends. Run it with `node bin/troupe.mjs …` (or `npm run troupe -- …`).
 *
 * Every command ends with an exit code from `ExitCode`: a `CliFailure` prints
 * `troupe: <message>` on stderr (when it has one); a usage error has already
 * been printed by @effect/cli with the command's usage; anything else is a bug
 * (exit 70, with its cause). Logs go to stderr, at level `warning` unless
 * `--log-level` says otherwise.
 *
 * @since 0.1.0
 */
import { CliConfig, Command, HelpDoc, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as AgentsSchemaCommand from "./AgentsSchemaCommand.js"
import * as Argv from "./Argv.js"
import * as ExitCode from "./ExitCode.js"
import * as Help from "./Help.js"
import * as InspectCommand from "./InspectCommand.js"
import * as Output from "./Output.js"
import * as ProtocolCommand from "./ProtocolCommand.js"
import * as RunCommand from "./RunCommand.js"
import * as Serve from "./Serve.js"
import * as SessionsCommand from "./SessionsCommand.js"

/** The version `--version` prints. */
export const VERSION = "0.1.0"

/** The root command. */
export const root = Command.make("troupe").pipe(
  Command.withDescription(Help.describe("An actor-model runtime for AI-agent sessions.", [
    ["troupe run \"What is troupe?\"", "one turn, embedded in the program (no daemon)"],
    ["troupe serve", "the daemon; then, from another terminal:"],
    ["troupe sessions create && troupe sessions list", "a session on it, and the sessions it holds"],
    ["troupe inspect", "the web inspector over the sessions in $TROUPE_HOME (no daemon needed)"]
  ])),
  Command.withSubcommands([
    Serve.command,
    RunCommand.command,
    SessionsCommand.command,
    // `troupe agents` lists a daemon's agents; `troupe agents schema` prints the agents file's JSON Schema.
    Command.withSubcommands(SessionsCommand.agents, [AgentsSchemaCommand.command]),
    ProtocolCommand.command,
    InspectCommand.command
  ])
)

/** The commands and their options, for the check that runs before @effect/cli parses (`Argv`). */
const tree = Argv.group({
  serve: Argv.leaf(Serve.command),
  run: Argv.leaf(RunCommand.command),
  inspect: Argv.leaf(InspectCommand.command),
  agents: Argv.leaf(SessionsCommand.agents),
  sessions: SessionsCommand.tree,
  protocol: Argv.group({ schema: Argv.leaf(ProtocolCommand.subcommands.schema), types: Argv.leaf(ProtocolCommand.subcommands.types) })
})

const footer = HelpDoc.blocks([
  HelpDoc.h1("EXIT CODES"),
  HelpDoc.p("0 ok · 1 the turn failed or was interrupted · 2 usage or configuration error · 3 daemon unreachable · 4 the daemon refused the request · 5 the daemon could not start · 70 internal error · 130 stopped by Ctrl-C"),
  HelpDoc.h1("GLOBAL OPTIONS"),
  HelpDoc.p("-h, --help  this help · --version  the version · --log-level LEVEL  the least level of log lines on stderr: all, trace, debug, info, warning (the default), error, fatal or none · --completions SHELL  a completion script for sh, bash, fish or zsh"),
  HelpDoc.p("Documentation: docs/cli.md, docs/configuration.md")
])

const cli = Command.run(root, { name: "troupe", version: VERSION, footer })

/** Prints a usage problem found before parsing, and answers exit 2. */
const refuse = (problem: Argv.Problem) => Effect.as(Console.error(ExitCode.line(problem.message, problem.hint)), ExitCode.ExitCode.Usage)

/**
 * Runs `self` (@effect/cli's parser) with what it prints for a usage error
 * collected and printed again as one `troupe:` line with a hint.
 */
const withOneLineUsageErrors = (args: ReadonlyArray<string>) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.consoleWith((base) => {
    const printed: Array<string> = []
    const console: Console.Console = {
      ...base,
      error: (...parts) => Effect.sync(() => void printed.push(parts.map(String).join(" ")))
    }
    return Effect.withConsole(self, console).pipe(
      Effect.tapError((error) => {
        if (!ValidationError.isValidationError(error)) return Effect.void
        const message = Argv.nameBadValue(
          Output.stripAnsi(printed.join("\n")).split("\n").map((line) => line.trim()).filter((line) => line !== "").join(" "),
          args
        )
        const command = Argv.commandPath(tree, args).join(" ")
        return base.error(ExitCode.line(message === "" ? "the command line is not valid" : message, `\`${command} --help\` says how to use it`))
      })
    )
  })

/** Runs `self` with help texts tidied (`Help.tidy`) for the command `args` name. */
const withTidyHelp = (args: ReadonlyArray<string>) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.consoleWith((base) => {
    const path = Argv.commandPath(tree, args)
    const tidy = (parts: ReadonlyArray<unknown>) =>
      parts.map((part) => (typeof part === "string" && part.includes("USAGE") ? Help.tidy(part, path) : part))
    const console: Console.Console = { ...base, log: (...parts) => base.log(...tidy(parts)) }
    return Effect.withConsole(self, console)
  })

/** Runs the program on a command line (`process.argv`) and answers its exit code. */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode.ExitCode> =>
  // The version alone, as one line (@effect/cli's adds a blank line after it).
  argv.length === 3 && argv[2] === "--version"
    ? Effect.as(Console.log(VERSION), ExitCode.ExitCode.Ok)
    : Option.match(Argv.check(tree, argv.slice(2)), { onSome: refuse, onNone: () => run(argv) })

const run = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode.ExitCode> =>
  cli(argv).pipe(
    withOneLineUsageErrors(argv.slice(2)),
    Effect.as<ExitCode.ExitCode>(ExitCode.ExitCode.Ok),
    Effect.catchAll((error): Effect.Effect<ExitCode.ExitCode> => {
      if (ValidationError.isValidationError(error)) {
        // Printed by withOneLineUsageErrors.
        return Effect.succeed(ExitCode.ExitCode.Usage)
      }
      return Effect.as(
        error.message === "" ? Effect.void : Console.error(ExitCode.line(error.message, error.hint)),
        error.code
      )
    }),
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.succeed(ExitCode.ExitCode.Interrupted)
        : Effect.as(
          Effect.sync(() => void process.stderr.write(`troupe: internal error\n${Cause.pretty(cause)}\n`)),
          ExitCode.ExitCode.Internal
        )
    ),
    withTidyHelp(argv.slice(2)),
    Output.withPlainConsole,
    // The built-in options are listed once, in the footer, with what they do.
    Effect.provide(CliConfig.layer({ showBuiltIns: false })),
    Effect.provide(NodeContext.layer),
    Effect.provide(Output.stderrLogger),
    Logger.withMinimumLogLevel(LogLevel.Warning)
  )

/**
 * The command lines whose whole answer is help or the version: none, `--help`,
 * `-h`, `--version`, and `--help` or `-h` after each command. The build runs
 * each through `main` and writes what it printed beside the program
 * (`help.json`), which `Start` prints for the same command line without
 * loading @effect/cli (decision 0050).
 */
export const helpForms = (): ReadonlyArray<ReadonlyArray<string>> => {
  const paths: Array<ReadonlyArray<string>> = []
  const walk = (node: Argv.Tree, path: ReadonlyArray<string>): void => {
    if (path.length > 0) paths.push(path)
    if (node._tag === "Group") for (const [name, child] of node.children) walk(child, [...path, name])
  }
  walk(tree, [])
  return [[], ["--help"], ["-h"], ["--version"], ...paths.flatMap((path) => [[...path, "--help"], [...path, "-h"]])]
}

/** Runs `main` on a command line and resolves with its exit code (the build prints the help texts with it). */
export const runPromise = (argv: ReadonlyArray<string>): Promise<ExitCode.ExitCode> => Effect.runPromise(main(argv))

/** Runs `main` on this process and exits with its code. */
export const runMain = (argv: ReadonlyArray<string> = process.argv): void => {
  Output.endQuietlyOnClosedPipe()
  const fiber = Effect.runFork(main(argv))
  fiber.addObserver((exit) => {
    const code = Exit.isSuccess(exit) ? exit.value : ExitCode.ExitCode.Internal
    process.exitCode = code
    // Everything the program opened is closed by now; a handle someone else left must not keep it alive.
    setTimeout(() => process.exit(code), 2000).unref()
  })
}
