/**
 * SIGINT and SIGTERM as an Effect: a command that has something to finish
 * (a daemon draining its turns, a run interrupting its turn) listens for them
 * itself while its scope is open. Without a listener Node's default applies
 * and the process ends at once, which is right for commands with nothing to
 * clean up.
 *
 * @since 0.1.0
 */
import { Deferred, Effect, type Scope } from "effect"

/** A signal that asks the program to stop. */
export type Signal = "SIGINT" | "SIGTERM"

/**
 * Listens for SIGINT and SIGTERM for as long as the scope is open; the
 * returned effect waits for the first one. A second signal while the scope
 * is still open (the program is stopping) exits at once with 128 + its number.
 */
export const listen: Effect.Effect<Effect.Effect<Signal>, never, Scope.Scope> = Effect.gen(function*() {
  const received = yield* Deferred.make<Signal>()
  let first = true
  const on = (signal: Signal) => () => {
    if (first) {
      first = false
      Deferred.unsafeDone(received, Effect.succeed(signal))
      return
    }
    // The user insists: stop now.
    process.exit(signal === "SIGINT" ? 130 : 143)
  }
  const onInt = on("SIGINT")
  const onTerm = on("SIGTERM")
  yield* Effect.acquireRelease(
    Effect.sync(() => {
      process.on("SIGINT", onInt)
      process.on("SIGTERM", onTerm)
    }),
    () =>
      Effect.sync(() => {
        process.removeListener("SIGINT", onInt)
        process.removeListener("SIGTERM", onTerm)
      })
  )
  return Deferred.await(received)
})
