/**
 * SIGINT and SIGTERM as an Effect: a command that has something to finish
 * (a daemon draining its turns, a run interrupting its turn) listens for them
 * itself while its scope is open. Without a listener Node's default applies
 * and the process ends at once, which is right for commands with nothing to
 * clean up.
 *
 * Started through npm (`npx troupe …`, `npm run troupe -- …`), the program is
 * the child of a shell that npm starts: npm passes a SIGTERM on to that shell,
 * which dies of it without passing it on. So there the shell going away (the
 * parent process changing) counts as a SIGTERM; nowhere else, so that a daemon
 * started with `nohup troupe serve &` outlives the shell that started it.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"

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
  if (startedByNpm()) {
    const parent = process.ppid
    yield* Effect.sync(() => {
      if (process.ppid !== parent) onTerm()
    }).pipe(
      Effect.repeat({ schedule: Schedule.spaced(Duration.millis(250)), until: () => !first }),
      Effect.forkScoped
    )
  }
  return Deferred.await(received)
})

/** Whether this process was started by npm or npx (which set `npm_command` for what they run). */
const startedByNpm = (): boolean => (process.env["npm_command"] ?? "") !== ""
