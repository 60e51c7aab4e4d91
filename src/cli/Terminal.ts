/**
 * What the program asks of its terminal before it loads anything else:
 * whether a stream takes colours, and how a closed pipe ends it. Its own
 * module, importing nothing, so that the help the build printed ahead
 * (`Start`) is written by the same rules as `Output` writes the rest.
 *
 * @since 0.3.0
 */

/** Whether a stream is a terminal. */
export const isTty = (stream: NodeJS.WriteStream): boolean => stream.isTTY === true

/** Whether colours may be written to a stream. */
export const colours = (stream: NodeJS.WriteStream): boolean =>
  isTty(stream) && (process.env["NO_COLOR"] ?? "") === "" && process.env["TERM"] !== "dumb"

/**
 * Makes output into a closed pipe (`troupe … | head -1`) end the program
 * quietly: the reader has all it wanted, so stdout closing with EPIPE exits 0
 * at once (there is nothing left to say and nowhere to say it), and EPIPE on
 * stderr is ignored. Any other write error still surfaces.
 */
export const endQuietlyOnClosedPipe = (): void => {
  const onError = (stream: NodeJS.WriteStream) => (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error
    if (stream === process.stdout) process.exit(0)
  }
  process.stdout.on("error", onError(process.stdout))
  process.stderr.on("error", onError(process.stderr))
}
