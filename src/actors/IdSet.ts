/**
 * A compact set of ids of one kind (the turns of a session that ended, its
 * callbacks that were answered): an id as minted here (a prefix such as
 * `turn_` and a 26-character ULID) is packed into 16 bytes of one shared
 * buffer, so a session of 50,000 turns keeps 0.8 MB of turn ids rather than
 * 50,000 strings of ~56 bytes each for as long as its actor lives. Membership
 * is a scan, newest first: these sets are asked only off the hot path (an
 * interrupt naming a turn that is not running, an answer to a callback of a
 * turn that ended).
 *
 * Versions are immutable and appends O(1) amortized, as `AppendOnlyList`'s:
 * versions of one line of appends share the buffer and each reads only its
 * own prefix; appending to an older version (a branch) copies its prefix,
 * unless the id it appends is the one the newest version holds next. An id
 * that cannot be packed (a ULID beyond 128 bits, or not a ULID at all) is
 * kept as it is, in a list of its own.
 *
 * @since 0.1.0
 */
import * as AppendOnlyList from "./AppendOnlyList.js"

/** The buffer one line of appends shares: 4 words per id. */
interface Words {
  data: Int32Array
  /** Ids written by the newest version of this line. */
  used: number
}

/** A version of a set of ids of kind `A`. */
export interface IdSet<A extends string> {
  /** What every id that can be packed starts with (`turn_`, `cb_`). */
  readonly prefix: string
  /** The packed ids this version holds: `words.data[0, 4 × count)`. */
  readonly count: number
  readonly words: Words
  /** The ids that cannot be packed. */
  readonly others: AppendOnlyList.AppendOnlyList<A>
}

/** The empty set of the ids that start with `prefix` (the `_` included). */
export const empty = <A extends string>(prefix: string): IdSet<A> => ({
  prefix,
  count: 0,
  words: { data: new Int32Array(16), used: 0 },
  others: AppendOnlyList.empty()
})

// Crockford base32 digit values by char code; -1 for anything else.
const DIGITS = new Int8Array(128).fill(-1)
"0123456789ABCDEFGHJKMNPQRSTVWXYZ".split("").forEach((c, i) => (DIGITS[c.charCodeAt(0)] = i))

const digit = (id: string, i: number) => {
  // Past the end of `id`, charCodeAt is NaN: not a digit.
  const code = id.charCodeAt(i)
  return code < 128 ? DIGITS[code]! : -1
}

const scratch = new Int32Array(4)

/**
 * Packs `id` into `scratch`: the ULID's first two digits (at most 8 bits, as
 * in any ULID of 128 bits) spread over the top two bits of the four words,
 * and each following group of six digits (30 bits) in the rest of a word.
 * False when `id` is not `prefix` and such a ULID.
 */
const pack = (prefix: string, id: string): boolean => {
  const at = prefix.length
  if (id.length !== at + 26 || !id.startsWith(prefix)) return false
  const first = digit(id, at)
  const second = digit(id, at + 1)
  if (first < 0 || first > 7 || second < 0) return false
  const top = first * 32 + second
  for (let w = 0; w < 4; w++) {
    let bits = 0
    for (let i = 0; i < 6; i++) {
      const d = digit(id, at + 2 + w * 6 + i)
      if (d < 0) return false
      bits = bits * 32 + d
    }
    scratch[w] = bits | (((top >> (w * 2)) & 3) << 30)
  }
  return true
}

const sameAt = (data: Int32Array, at: number) =>
  data[at] === scratch[0] && data[at + 1] === scratch[1] && data[at + 2] === scratch[2] && data[at + 3] === scratch[3]

/** `set` with `id` added (ids are added once each: a set of ids that happened). */
export const add = <A extends string>(set: IdSet<A>, id: A): IdSet<A> => {
  const { count, prefix } = set
  if (!pack(prefix, id)) return { prefix, count, words: set.words, others: AppendOnlyList.append(set.others, id) }
  let words = set.words
  if (words.used !== count) {
    // An older version: share the next id when it is this one, else branch off with a copy.
    if (sameAt(words.data, count * 4)) return { prefix, count: count + 1, words, others: set.others }
    const data = new Int32Array(Math.max(16, count * 8))
    data.set(words.data.subarray(0, count * 4))
    words = { data, used: count }
  } else if (words.data.length < (count + 1) * 4) {
    // The older versions keep reading their prefix of the old buffer or of this copy: the same ids.
    const grown = new Int32Array(words.data.length * 2)
    grown.set(words.data)
    words.data = grown
  }
  words.data.set(scratch, count * 4)
  words.used = count + 1
  return { prefix, count: count + 1, words, others: set.others }
}

/** Whether `id` is in `set`. */
export const has = <A extends string>(set: IdSet<A>, id: A): boolean => {
  if (!pack(set.prefix, id)) return AppendOnlyList.includes(set.others, id)
  const { data } = set.words
  for (let i = set.count - 1; i >= 0; i--) if (sameAt(data, i * 4)) return true
  return false
}

/** How many ids `set` holds. */
export const size = <A extends string>(set: IdSet<A>): number => set.count + set.others.length

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/** The packed id at `index` of `data`, as a string again. */
const unpack = (prefix: string, data: Int32Array, index: number): string => {
  let top = 0
  let digits = ""
  for (let w = 0; w < 4; w++) {
    const word = data[index * 4 + w]!
    top |= ((word >>> 30) & 3) << (w * 2)
    let bits = word & 0x3fffffff
    let group = ""
    for (let i = 0; i < 6; i++, bits = Math.floor(bits / 32)) group = CROCKFORD[bits % 32]! + group
    digits += group
  }
  return prefix + CROCKFORD[top >> 5]! + CROCKFORD[top & 31]! + digits
}

/** The ids of `set`, as an array of their own: the packed ones in the order they were added, then the others. */
export const toArray = <A extends string>(set: IdSet<A>): Array<A> => {
  const out: Array<A> = []
  for (let i = 0; i < set.count; i++) out.push(unpack(set.prefix, set.words.data, i) as A)
  return out.concat(AppendOnlyList.toArray(set.others))
}
