/**
 * An immutable list that only grows, with O(1) appends: versions share one
 * backing array, and each version sees only its own prefix of it. Appending
 * to the newest version pushes in place; appending to an older version (a
 * branch) copies its prefix first, unless the item it appends is the one the
 * newest version holds next (`same`), which it then shares.
 *
 * @since 0.1.0
 */

/** A list version. */
export interface AppendOnlyList<A> {
  readonly length: number
  /** Shared by the versions of one line of appends; read only `[0, length)`. */
  readonly items: Array<A>
}

/** The empty list. */
export const empty = <A>(): AppendOnlyList<A> => ({ length: 0, items: [] })

/** `list` with `item` appended. */
export const append = <A>(list: AppendOnlyList<A>, item: A, same: (a: A, b: A) => boolean = Object.is): AppendOnlyList<A> => {
  const { items, length } = list
  if (items.length === length) {
    items.push(item)
    return { length: length + 1, items }
  }
  if (same(items[length]!, item)) return { length: length + 1, items }
  const copy = items.slice(0, length)
  copy.push(item)
  return { length: length + 1, items: copy }
}

/** The items of `list`, as an array of their own. */
export const toArray = <A>(list: AppendOnlyList<A>): Array<A> => list.items.slice(0, list.length)

/** Whether `list` holds `item` (a scan from the newest end). */
export const includes = <A>(list: AppendOnlyList<A>, item: A): boolean => {
  for (let i = list.length - 1; i >= 0; i--) if (list.items[i] === item) return true
  return false
}
