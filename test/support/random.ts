/**
 * A small seeded generator (mulberry32) for tests that generate input: a
 * failing case replays from its seed.
 */

/** A generator seeded with `seed`: floats in [0, 1), integers below `n`, a pick from a list, random bytes. */
export const random = (seed: number) => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[int(xs.length)]!
  const bytes = (n: number): Buffer => {
    const out = Buffer.allocUnsafe(n)
    for (let i = 0; i < n; i++) out[i] = int(256)
    return out
  }
  return { next, int, pick, bytes }
}

/** What `random` returns. */
export type Random = ReturnType<typeof random>
