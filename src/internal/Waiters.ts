/**
 * Interest in a one-shot answer, registered before the answer can come and
 * withdrawn however the wait ends: the host's waiters for decisions on inputs
 * and for turn ends. A cell is a `Deferred` in fewer Effect steps (awaiting an
 * answer that came is one step, not ~11; callers wait on one per send and per
 * awaited turn), kept because the send path is the hottest caller of it.
 *
 * @since 0.1.0
 */
import { Effect, type Exit } from "effect"
import type { Interest } from "../services/SessionHost.js"

/** A one-shot answer, awaited before or after it comes. */
export interface Cell<A, E> {
  exit: Exit.Exit<A, E> | undefined
  readonly resumes: Array<(exit: Exit.Exit<A, E>) => void>
}

/** An empty cell. */
export const makeCell = <A, E>(): Cell<A, E> => ({ exit: undefined, resumes: [] })

/** Completes a cell once; later completions are ignored. */
export const complete = <A, E>(cell: Cell<A, E>, exit: Exit.Exit<A, E>) => {
  if (cell.exit !== undefined) return
  cell.exit = exit
  for (const resume of cell.resumes.splice(0)) resume(exit)
}

/** Waits for the cell's answer (at once if it came). */
export const awaitCell = <A, E>(cell: Cell<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() =>
    cell.exit ?? Effect.async<A, E>((resume) => {
      cell.resumes.push(resume)
      return Effect.sync(() => {
        const i = cell.resumes.indexOf(resume)
        if (i >= 0) cell.resumes.splice(i, 1)
      })
    })
  )

/** Registers `cell` under `key` in `map`; the interest withdraws it again. */
export const register = <K, A, E>(map: Map<K, Array<Cell<A, E>>>, key: K, cell: Cell<A, E>, emptied?: () => void): Interest<A, E> => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [cell])
  else list.push(cell)
  return {
    await: awaitCell(cell),
    withdraw: () => {
      const list = map.get(key)
      const i = list === undefined ? -1 : list.indexOf(cell)
      if (i < 0) return
      list!.splice(i, 1)
      if (list!.length > 0) return
      map.delete(key)
      emptied?.()
    }
  }
}

