/**
 * Reading a log telemetry file in tests. A turn's `turn.ended` is written
 * after its record is persisted, so a caller that learned of the end from the
 * log (`awaitTurn`) may look before the line is there: `awaitEvents` waits
 * (on the real clock, under TestClock too) until the file holds the lines
 * expected, then returns what it holds.
 */
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"

/** The JSON lines written to `path` so far (none if the file does not exist yet; a line that is not JSON throws). */
export const readEvents = (path: string): Array<Record<string, any>> =>
  existsSync(path)
    ? readFileSync(path, "utf8").split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line))
    : []

/** The lines in `path` once there are at least `count` (or after `timeoutMs`, whatever is there). */
export const awaitEvents = (path: string, count: number, timeoutMs = 5_000): Effect.Effect<Array<Record<string, any>>> =>
  Effect.promise(async () => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const events = readEvents(path)
      if (events.length >= count || Date.now() > deadline) return events
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  })
