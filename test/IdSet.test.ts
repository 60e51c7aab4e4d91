/**
 * The packed id set a session's state keeps its ended turns and past
 * callbacks in: ids round-trip through their 16 bytes, ids that cannot be
 * packed are kept as they are, and versions behave as immutable values
 * (branches do not see each other's ids) against a plain Set as the model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as IdSet from "../src/actors/IdSet.js"
import { makeTurnId, type TurnId } from "../src/schema/Ids.js"

const mint = () => Effect.runSync(makeTurnId)
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

describe("IdSet", () => {
  it("minted ids round-trip and are found; others are not", () => {
    const ids = Array.from({ length: 1000 }, mint)
    let set = IdSet.empty<TurnId>("turn_")
    for (const id of ids) set = IdSet.add(set, id)
    assert.deepStrictEqual(IdSet.toArray(set), ids)
    assert.strictEqual(IdSet.size(set), 1000)
    assert.isTrue(ids.every((id) => IdSet.has(set, id)))
    assert.isFalse(IdSet.has(set, mint()))
    // One digit off anywhere is another id (ids minted in one millisecond differ in their last digits: those are in).
    const id = ids[500]!
    const known = new Set<string>(ids)
    for (let i = "turn_".length; i < id.length; i++) {
      const other = id.slice(0, i) + (id[i] === "0" ? "1" : "0") + id.slice(i + 1)
      assert.strictEqual(IdSet.has(set, other as TurnId), known.has(other), other)
    }
    // Every digit value at every place survives the packing (the first at most 7 in a 128-bit ULID).
    const extremes = ["turn_7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "turn_00000000000000000000000000", `turn_0${crockford.slice(7)}`, `turn_7${crockford.slice(0, 25)}`] as Array<TurnId>
    const packed = extremes.reduce(IdSet.add, IdSet.empty<TurnId>("turn_"))
    assert.deepStrictEqual(IdSet.toArray(packed), extremes)
    assert.strictEqual(packed.count, 4)
  })

  it("ids that cannot be packed are kept as they are", () => {
    const odd = ["turn_1", "turn_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "cb_01JABCDEFGHJKMNPQRSTVWXYZ0", "turn_01JABCDEFGHJKMNPQRSTVWXYz", "turn_01JABCDEFGHJKMNPQRSTVWXYZ0Z"] as Array<TurnId>
    const set = odd.reduce(IdSet.add, IdSet.empty<TurnId>("turn_"))
    assert.strictEqual(set.count, 0)
    assert.deepStrictEqual(IdSet.toArray(set), odd)
    assert.isTrue(odd.every((id) => IdSet.has(set, id)))
    assert.isFalse(IdSet.has(set, "turn_2" as TurnId))
  })

  it("versions are immutable values: appends to any version, grown or branched, match a Set", () => {
    const pool = Array.from({ length: 40 }, mint)
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.nat(pool.length - 1)), { maxLength: 120 }), (steps) => {
        const versions: Array<{ readonly set: IdSet.IdSet<TurnId>; readonly model: ReadonlySet<TurnId> }> = [
          { set: IdSet.empty("turn_"), model: new Set() }
        ]
        for (const [from, pick] of steps) {
          const base = versions[from % versions.length]!
          const id = pool[pick]!
          versions.push({ set: IdSet.add(base.set, id), model: new Set([...base.model, id]) })
        }
        for (const { model, set } of versions) {
          for (const id of pool) assert.strictEqual(IdSet.has(set, id), model.has(id))
          assert.deepStrictEqual(new Set(IdSet.toArray(set)), model)
        }
      }),
      { numRuns: 200 }
    )
  })

  it("a branch that adds what the newest version holds next shares its buffer", () => {
    const [a, b, c] = [mint(), mint(), mint()]
    const base = IdSet.add(IdSet.empty<TurnId>("turn_"), a)
    const ahead = IdSet.add(base, b)
    assert.strictEqual(IdSet.add(base, b).words, ahead.words)
    const other = IdSet.add(base, c)
    assert.notStrictEqual(other.words, ahead.words)
    assert.deepStrictEqual(IdSet.toArray(ahead), [a, b])
    assert.deepStrictEqual(IdSet.toArray(other), [a, c])
  })
})
