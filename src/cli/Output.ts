/**
 * Where the program writes, and how. Results go to stdout; notes, progress
 * and logs go to stderr, so that `troupe run "…" > answer.txt` keeps only the
 * answer and `troupe serve --stdio` keeps stdout for the protocol.
 *
 * - A status line (a spinner and a label) is drawn only when stderr is a
 *   terminal, and never in JSON mode: on a pipe, progress prints nothing.
 * - Colours only on a terminal, and never with `NO_COLOR` set or `TERM=dumb`.
 * - JSON mode writes one JSON value per line on stdout and nothing else there.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Schedule from "effect/Schedule"
import type * as Console from "effect/Console"
import type * as Scope from "effect/Scope"
import { colours, isTty } from "./Terminal.js"

export { colours, endQuietlyOnClosedPipe } from "./Terminal.js"

/** Whether stdout is a terminal. */
export const stdoutIsTty = (): boolean => isTty(process.stdout)

/** Whether stderr is a terminal. */
export const stderrIsTty = (): boolean => isTty(process.stderr)

/** Whether stdin is a terminal (interactive questions need one). */
export const stdinIsTty = (): boolean => process.stdin.isTTY === true

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g

/** Text without ANSI escape sequences. */
export const stripAnsi = (text: string): string => text.replace(ANSI, "")

/**
 * Runs `self` with a `Console` that strips colours from what goes to a stream
 * that may not have them (`--help` and usage errors printed into a pipe).
 */
export const withPlainConsole = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.consoleWith((base) => {
    const plain = (stream: NodeJS.WriteStream) => (args: ReadonlyArray<unknown>) =>
      colours(stream) ? args : args.map((arg) => (typeof arg === "string" ? stripAnsi(arg) : arg))
    const forOut = plain(process.stdout)
    const forErr = plain(process.stderr)
    const console: Console.Console = {
      ...base,
      log: (...args) => base.log(...forOut(args)),
      info: (...args) => base.info(...forOut(args)),
      error: (...args) => base.error(...forErr(args)),
      warn: (...args) => base.warn(...forErr(args))
    }
    return Effect.withConsole(self, console)
  })

/**
 * Effect's logger, writing to stderr (stdout may carry results or the
 * protocol) in the program's own format, one line each: `troupe: warning:
 * <message>`.
 */
export const stderrLogger = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ cause, logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    const text = parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" ")
    const why = Cause.isEmpty(cause) ? "" : ` (${Cause.squash(cause) instanceof Error ? (Cause.squash(cause) as Error).message : String(Cause.squash(cause))})`
    const level = logLevel.label.toLowerCase() === "warn" ? "warning" : logLevel.label.toLowerCase()
    const line = `troupe: ${level}: ${text}${why}`.replace(/\s*\n\s*/g, " ")
    process.stderr.write(`${logLevel._tag === "Warning" ? yellow(line) : logLevel._tag === "Error" || logLevel._tag === "Fatal" ? red(line) : line}\n`)
  })
)

const paint = (code: string) => (text: string, stream: NodeJS.WriteStream = process.stderr) =>
  colours(stream) ? `\x1b[${code}m${text}\x1b[0m` : text

/** Dim text (on a terminal). */
export const dim = paint("2")
/** Bold text (on a terminal). */
export const bold = paint("1")
/** Green text (on a terminal). */
export const green = paint("32")
/** Red text (on a terminal). */
export const red = paint("31")
/** Yellow text (on a terminal). */
export const yellow = paint("33")

/** How one command writes. */
export interface Output {
  /** JSON mode: only `json` writes to stdout. */
  readonly json: boolean
  /** Writes text to stdout as it comes (no newline added); ignored in JSON mode. */
  readonly text: (text: string) => Effect.Effect<void>
  /** Writes one line to stdout; ignored in JSON mode. */
  readonly line: (text: string) => Effect.Effect<void>
  /** Writes one line to stderr, first ending a line of stdout text left open on the same terminal. */
  readonly note: (text: string) => Effect.Effect<void>
  /** Writes one value as a JSON line to stdout (JSON mode and plain mode alike). */
  readonly jsonLine: (value: unknown) => Effect.Effect<void>
  /**
   * Shows a status line with a spinner on a terminal (`undefined` hides it),
   * with the time since this label was set; nothing on a pipe or in JSON mode.
   * A new label clears the retry note.
   */
  readonly status: (label: string | undefined) => Effect.Effect<void>
  /** Adds a note to the status line until the next label ("retrying after HTTP 500, attempt 2 of 4"). */
  readonly retrying: (note: string) => Effect.Effect<void>
  /** Ends a line of stdout text left open, so what follows starts on a new line. */
  readonly endLine: Effect.Effect<void>
  /**
   * Runs a question on the terminal (`self` writes the prompt and reads the
   * answer): the status line is hidden and not drawn, and text and notes that
   * come meanwhile are held and written after it, so nothing erases the
   * prompt or lands on its line.
   */
  readonly asking: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** A status line's text: the label, the seconds since it was set (from 1 s on), and a retry note. */
export const statusText = (label: string, elapsedMs: number, retry?: string): string =>
  `${label}${elapsedMs >= 1000 ? ` · ${Math.floor(elapsedMs / 1000)}s` : ""}${retry === undefined ? "" : ` · ${retry}`}`

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/** Builds the writer of one command; the spinner's fiber lives as long as the scope. */
export const make = (options: { readonly json: boolean }): Effect.Effect<Output, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { json } = options
    const spinning = !json && stderrIsTty()
    // Do stdout and stderr land on the same screen? Then a note must not cut a line of stdout text.
    const shared = stdoutIsTty() && stderrIsTty()
    let openLine = false
    let label: string | undefined
    let since = 0
    let retry: string | undefined
    let drawn = false
    let frame = 0
    // Questions on the terminal under way, and the writes held until they are answered.
    let asking = 0
    const held: Array<() => void> = []
    const whenFree = (write: () => void) => {
      if (asking > 0) held.push(write)
      else write()
    }

    const erase = () => {
      if (drawn) process.stderr.write("\r\x1b[2K")
      drawn = false
    }
    const draw = () => {
      // A status line drawn after open stdout text would overwrite it.
      if (!spinning || label === undefined || asking > 0 || (shared && openLine)) return
      process.stderr.write(`\r\x1b[2K${dim(`${FRAMES[frame++ % FRAMES.length]} ${statusText(label, Date.now() - since, retry)}`)}`)
      drawn = true
    }
    const endLine = Effect.sync(() => {
      if (openLine) process.stdout.write("\n")
      openLine = false
    })

    if (spinning) {
      yield* Effect.sync(draw).pipe(
        Effect.repeat(Schedule.spaced(Duration.millis(80))),
        Effect.forkScoped
      )
      yield* Effect.addFinalizer(() => Effect.sync(erase))
    }

    return {
      json,
      text: (text) =>
        json || text.length === 0 ? Effect.void : Effect.sync(() =>
          whenFree(() => {
            erase()
            process.stdout.write(text)
            openLine = !text.endsWith("\n")
          })
        ),
      line: (text) =>
        json ? Effect.void : Effect.sync(() =>
          whenFree(() => {
            erase()
            if (openLine) process.stdout.write("\n")
            process.stdout.write(`${text}\n`)
            openLine = false
          })
        ),
      note: (text) =>
        Effect.sync(() =>
          whenFree(() => {
            erase()
            if (shared && openLine) {
              process.stdout.write("\n")
              openLine = false
            }
            process.stderr.write(`${text}\n`)
          })
        ),
      jsonLine: (value) => Effect.sync(() => void process.stdout.write(`${JSON.stringify(value)}\n`)),
      status: (next) =>
        Effect.sync(() => {
          if (next !== label) {
            since = Date.now()
            retry = undefined
          }
          label = next
          if (next === undefined) erase()
          else draw()
        }),
      retrying: (note) =>
        Effect.sync(() => {
          retry = note
          draw()
        }),
      endLine,
      asking: (self) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            erase()
            if (openLine) process.stdout.write("\n")
            openLine = false
            asking++
          }),
          () => self,
          () =>
            Effect.sync(() => {
              asking--
              if (asking > 0) return
              for (const write of held.splice(0)) write()
              draw()
            })
        )
    } satisfies Output
  })
