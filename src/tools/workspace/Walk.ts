/**
 * Walking a workspace tree through the port (`list`): depth first, names
 * sorted, symlinks not followed, hidden entries and dependency roots skipped
 * unless asked, with a limit on the entries visited. Shared by `find_files`
 * and the built-in search, so both see the same files as ripgrep does.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Workspace from "../../services/Workspace.js"

/** What a walk visits. */
export interface Options {
  readonly includeHidden: boolean
  readonly includeDependencies: boolean
  /** Stop after visiting this many entries. */
  readonly scanLimit: number
}

/** A dependency or cache root the walk did not enter. */
export interface Skipped {
  readonly path: string
  /** Its direct entries. */
  readonly entries: number
}

/** What a walk saw, beside the entries it gave `visit`. */
export interface Summary {
  readonly scanned: number
  /** The scan limit stopped it: counts are estimates. */
  readonly stopped: boolean
  readonly skipped: ReadonlyArray<Skipped>
}

const join = (dir: string, name: string) => (dir === "." ? name : `${dir}/${name}`)

/** Walks under `start`, calling `visit` for each entry (false from it stops the walk). */
export const walk = (
  handle: Workspace.Handle,
  start: string,
  options: Options,
  visit: (path: string, entry: Workspace.Entry) => Effect.Effect<boolean, Workspace.Failure>
): Effect.Effect<Summary, Workspace.Failure> =>
  Effect.gen(function*() {
    const skipped: Array<Skipped> = []
    let scanned = 0
    let stopped = false
    let done = false
    const dependency = new Set(Workspace.DEPENDENCY_ROOTS)
    const go = (dir: string): Effect.Effect<void, Workspace.Failure> =>
      Effect.gen(function*() {
        const entries = yield* handle.list(dir)
        for (const entry of entries) {
          if (done) return
          if (scanned >= options.scanLimit) {
            stopped = done = true
            return
          }
          scanned++
          const path = join(dir, entry.name)
          if (!options.includeDependencies && dependency.has(entry.name)) {
            if (entry.kind === "directory") {
              const inside = yield* Effect.orElseSucceed(handle.list(path), () => [])
              skipped.push({ path, entries: inside.length })
            }
            continue
          }
          if (!options.includeHidden && entry.name.startsWith(".")) continue
          if (!(yield* visit(path, entry))) {
            done = true
            return
          }
          if (entry.kind === "directory") yield* go(path)
        }
      })
    yield* go(start)
    return { scanned, stopped, skipped }
  })
