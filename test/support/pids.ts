/**
 * Whether processes are still alive, by pid: for tests that prove nothing was
 * left running (a killed group, a closed session, a dead host). A zombie
 * (exited, not yet reaped by its parent) counts as gone.
 */
import { type Duration, Effect, Schedule } from "effect"
import { readFileSync } from "node:fs"

/** Whether `pid` runs (Linux: its /proc state is not Z; elsewhere: signal 0 reaches it). */
export const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // The state follows the command name in parentheses, which may itself hold spaces or parentheses.
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT" && process.platform === "linux") return false
  }
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Waits (up to `within`) until none of `pids` is alive; fails naming the survivors. */
export const allGone = (pids: ReadonlyArray<number>, within: Duration.DurationInput = "15 seconds") =>
  Effect.suspend(() => {
    const left = pids.filter(alive)
    return left.length === 0 ? Effect.void : Effect.fail(new Error(`still alive: ${left.join(", ")}`))
  }).pipe(Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo(within))))
