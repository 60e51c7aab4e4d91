/**
 * The one waiter primitive of the hosts: interest in a one-shot answer,
 * registered before the answer can come (`Registry.register`), awaited, and
 * withdrawn however the wait ends (`SessionHost.interested`). The host's
 * waiters for decisions on inputs and LiveEvents' waiters for turn ends are
 * registries of it. A cell is a `Deferred` in fewer Effect steps (awaiting an
 * answer that came is one step, not ~11; callers wait on one per send and per
 * awaited turn), kept because the send path is the hottest caller of it
 * (bench/waiters.ts measures the two side by side).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
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

/**
 * Waiters for one-shot answers, by key: `register` interest before the answer
 * can come, `settle` a key to answer all its waiters at once (and forget them),
 * `settleAll` to answer everyone. A key nobody waits on holds nothing: its last
 * withdrawal or its settling removes it, and `onEmpty` is told when the whole
 * registry empties (so an owner keeping registries by a further key can drop it).
 */
export interface Registry<K, A, E> {
  readonly register: (key: K) => Interest<A, E>
  readonly settle: (key: K, exit: Exit.Exit<A, E>) => void
  readonly settleAll: (exit: Exit.Exit<A, E>) => void
  /** How many keys have waiters. */
  readonly size: () => number
}

/** A waiter's interest in one key of a registry. */
class Registered<K, A, E> implements Interest<A, E> {
  constructor(
    private readonly owner: Cells<K, A, E>,
    private readonly key: K,
    private readonly cell: Cell<A, E>
  ) {}
  get await(): Effect.Effect<A, E> {
    return awaitCell(this.cell)
  }
  withdraw(): void {
    this.owner.withdraw(this.key, this.cell)
  }
}

/**
 * A registry as one object with its methods on the prototype: a host keeps
 * one per session that has waiters (`grouped`), so thousands of callers
 * waiting on as many sessions cost a map entry and an object each, not a
 * dozen closures.
 */
class Cells<K, A, E> implements Registry<K, A, E> {
  private readonly cells = new Map<K, Array<Cell<A, E>>>()
  constructor(private readonly onEmpty: () => void) {}
  register(key: K): Interest<A, E> {
    const cell = makeCell<A, E>()
    const list = this.cells.get(key)
    if (list === undefined) this.cells.set(key, [cell])
    else list.push(cell)
    return new Registered(this, key, cell)
  }
  withdraw(key: K, cell: Cell<A, E>): void {
    const list = this.cells.get(key)
    const i = list === undefined ? -1 : list.indexOf(cell)
    if (i < 0) return
    list!.splice(i, 1)
    if (list!.length > 0) return
    this.cells.delete(key)
    if (this.cells.size === 0) this.onEmpty()
  }
  settle(key: K, exit: Exit.Exit<A, E>): void {
    const list = this.cells.get(key)
    if (list === undefined) return
    this.cells.delete(key)
    for (const cell of list) complete(cell, exit)
    if (this.cells.size === 0) this.onEmpty()
  }
  settleAll(exit: Exit.Exit<A, E>): void {
    const all = [...this.cells.values()]
    this.cells.clear()
    for (const list of all) for (const cell of list) complete(cell, exit)
    if (all.length > 0) this.onEmpty()
  }
  size(): number {
    return this.cells.size
  }
}

const ignoreEmpty = () => {}

/** An empty registry. */
export const registry = <K, A, E>(onEmpty: () => void = ignoreEmpty): Registry<K, A, E> => new Cells(onEmpty)

/**
 * Registries by a further key (a session): waiters for answers by `group`,
 * then by `key`. A group's registry is made for its first waiter and dropped
 * once it empties (settled, or its last waiter withdrew), so a group nobody
 * waits on holds nothing; `settleAll` answers one group's waiters at once.
 */
export interface Grouped<G, K, A, E> {
  readonly register: (group: G, key: K) => Interest<A, E>
  readonly settle: (group: G, key: K, exit: Exit.Exit<A, E>) => void
  readonly settleAll: (group: G, exit: Exit.Exit<A, E>) => void
  /** How many groups have waiters. */
  readonly size: () => number
}

/** Empty registries by group. */
export const grouped = <G, K, A, E>(): Grouped<G, K, A, E> => {
  const groups = new Map<G, Registry<K, A, E>>()
  return {
    register: (group, key) => {
      let inGroup = groups.get(group)
      if (inGroup === undefined) {
        const created = registry<K, A, E>(() => {
          if (groups.get(group) === created) groups.delete(group)
        })
        groups.set(group, inGroup = created)
      }
      return inGroup.register(key)
    },
    settle: (group, key, exit) => groups.get(group)?.settle(key, exit),
    settleAll: (group, exit) => groups.get(group)?.settleAll(exit),
    size: () => groups.size
  }
}
