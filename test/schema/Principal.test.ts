/**
 * `principalFields` is the encoded form the stores write for a principal (its session row, a
 * create's fingerprint): it must be what the schema's encoder gives, key for key and in order, so
 * the stored text does not change with the way it was made.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { Principal, principalFields } from "../../src/schema/Principal.js"

const encode = Schema.encodeSync(Principal)

const ids = {
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-0000000000AB"
}

describe("principalFields", () => {
  it("is the schema's encoding of a principal without a user", () => {
    const principal = new Principal(ids)
    assert.deepStrictEqual(principalFields(principal), encode(principal))
    assert.strictEqual(JSON.stringify(principalFields(principal)), JSON.stringify(encode(principal)))
  })

  it("is the schema's encoding of a principal with a user, the user last", () => {
    const principal = new Principal({ ...ids, userId: "ada" })
    assert.strictEqual(JSON.stringify(principalFields(principal)), JSON.stringify(encode(principal)))
    assert.deepStrictEqual(Object.keys(principalFields(principal)), ["customerId", "organizationId", "workspaceId", "userId"])
  })

  it("covers every field the schema has", () => {
    const principal = new Principal({ ...ids, userId: "ada" })
    assert.deepStrictEqual(Object.keys(principalFields(principal)).sort(), Object.keys(Principal.fields).sort())
  })
})
