/**
 * The exit codes of the `troupe` program, and the one error type its commands
 * fail with: a `CliFailure` carries the code and a one-line message, which
 * `Main` prints to stderr as `troupe: <message>` before exiting with the code.
 *
 * | code | meaning |
 * | --- | --- |
 * | 0 | success (and `troupe serve` stopped by SIGINT/SIGTERM) |
 * | 1 | the turn failed or was interrupted (`run`, `sessions send --wait`) |
 * | 2 | usage or configuration error: a bad option or argument, an invalid agents/tokens file or environment value |
 * | 3 | the daemon is unreachable: no socket, connection refused, handshake failed, connection lost |
 * | 4 | the daemon refused the request (`not_found`, `conflict`, `stale_callback`, `unauthenticated`, …) |
 * | 5 | `troupe serve` could not start: the address is in use, a listener or the store could not be opened |
 * | 70 | internal error (a bug: please report it) |
 * | 130 | stopped by Ctrl-C (SIGINT) before the work was done (`run`, `sessions send --wait`) |
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** The documented exit codes. */
export const ExitCode = {
  Ok: 0,
  TurnFailed: 1,
  Usage: 2,
  Unreachable: 3,
  Refused: 4,
  StartFailed: 5,
  Internal: 70,
  Interrupted: 130
} as const

/** One of the documented exit codes. */
export type ExitCode = typeof ExitCode[keyof typeof ExitCode]

/** Why a command stops, with the exit code that says so and a one-line message for stderr. */
export class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", {
  code: Schema.Literal(0, 1, 2, 3, 4, 5, 70, 130),
  message: Schema.String,
  /** What to do about it, printed after the message on the same line. */
  hint: Schema.optional(Schema.String)
}) {}

/** The one line an error prints on stderr: `troupe: <what went wrong> — <what to do>`. */
export const line = (message: string, hint?: string): string =>
  `troupe: ${oneLine(message)}${hint === undefined || hint === "" ? "" : ` — ${hint}`}`

/**
 * A message on one line. A schema's parse error tree (`└─ ["customerId"]` …
 * `└─ expected a UUID`) becomes its first line's own words, the path of keys
 * and the innermost reason: `…: customerId: expected a UUID`.
 */
export const oneLine = (message: string): string => {
  const lines = message.split("\n").map((text) => text.trim()).filter((text) => text !== "")
  if (lines.length <= 1) return lines[0] ?? ""
  const first = lines[0]!
  // Where the first line's own words end and the schema's description begins.
  const cut = first.search(/: (\(|\{|Expected |readonly )/)
  const head = cut > 0 ? first.slice(0, cut) : first
  const path = lines.flatMap((text) => {
    const key = /^└─ \[(.+)\]$/.exec(text)
    return key === null ? [] : [key[1]!.replace(/^"(.*)"$/, "$1")]
  })
  const leaf = lines[lines.length - 1]!.replace(/^└─ /, "")
  return `${head}: ${path.length === 0 ? "" : `${path.join(".")}: `}${leaf}`
}

/** A usage or configuration error (exit 2). */
export const usage = (message: string, hint?: string) =>
  new CliFailure({ code: ExitCode.Usage, message, ...(hint === undefined ? {} : { hint }) })

/** The daemon could not be reached (exit 3). */
export const unreachable = (message: string) => new CliFailure({ code: ExitCode.Unreachable, message })

/** The daemon refused the request (exit 4). */
export const refused = (message: string) => new CliFailure({ code: ExitCode.Refused, message })

/** The daemon could not start (exit 5). */
export const startFailed = (message: string) => new CliFailure({ code: ExitCode.StartFailed, message })

/** A failed or interrupted turn (exit 1). */
export const turnFailed = (message: string) => new CliFailure({ code: ExitCode.TurnFailed, message })
