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
import { Command, HelpDoc, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Cause, Effect, Exit, Logger, LogLevel } from "effect"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"
import * as RunCommand from "./RunCommand.js"
import * as Serve from "./Serve.js"
import * as SessionsCommand from "./SessionsCommand.js"

/** The version `--version` prints. */
export const VERSION = "0.1.0"

/** The root command. */
export const root = Command.make("troupe").pipe(
  Command.withDescription("An actor-model runtime for AI-agent sessions."),
  Command.withSubcommands([Serve.command, RunCommand.command, SessionsCommand.command, SessionsCommand.agents])
)

const footer = HelpDoc.blocks([
  HelpDoc.h1("EXIT CODES"),
  HelpDoc.p("0 ok · 1 the turn failed or was interrupted · 2 usage or configuration error · 3 daemon unreachable · 4 the daemon refused the request · 5 the daemon could not start · 70 internal error · 130 stopped by Ctrl-C"),
  HelpDoc.p("Documentation: docs/cli.md, docs/configuration.md")
])

const cli = Command.run(root, { name: "troupe", version: VERSION, footer })

/** Runs the program on a command line (`process.argv`) and answers its exit code. */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode.ExitCode> =>
  cli(argv).pipe(
    Effect.as<ExitCode.ExitCode>(ExitCode.ExitCode.Ok),
    Effect.catchAll((error): Effect.Effect<ExitCode.ExitCode> => {
      if (ValidationError.isValidationError(error)) {
        // @effect/cli printed it, with the usage.
        return Effect.succeed(ExitCode.ExitCode.Usage)
      }
      return Effect.as(
        error.message === "" ? Effect.void : Effect.sync(() => void process.stderr.write(`troupe: ${error.message}\n`)),
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
    Output.withPlainConsole,
    Effect.provide(NodeContext.layer),
    Effect.provide(Output.stderrLogger),
    Logger.withMinimumLogLevel(LogLevel.Warning)
  )

/** Runs `main` on this process and exits with its code. */
export const runMain = (argv: ReadonlyArray<string> = process.argv): void => {
  const fiber = Effect.runFork(main(argv))
  fiber.addObserver((exit) => {
    const code = Exit.isSuccess(exit) ? exit.value : ExitCode.ExitCode.Internal
    process.exitCode = code
    // Everything the program opened is closed by now; a handle someone else left must not keep it alive.
    setTimeout(() => process.exit(code), 2000).unref()
  })
}
