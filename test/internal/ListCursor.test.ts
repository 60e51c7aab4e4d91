/**
 * Listing cursors: a cursor round-trips within its listing, is refused
 * (`InvalidInput`) by another listing, another tenancy or when it is not a
 * cursor at all; page sizes are 1 to 500, default 50.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SessionId } from "../../src/schema/Ids.js"
import * as ListCursor from "../../src/internal/ListCursor.js"
import { principal } from "../support/fixtures.js"

const id = SessionId.make("ses_01J0000000000000000000000A")
const other = SessionId.make("ses_01J0000000000000000000000B")
const roots = { _tag: "list", scope: "roots", includeArchived: false } as const

describe("ListCursor", () => {
  it.effect("a cursor is read back in the listing it came from, and shows neither tenancy nor listing", () =>
    Effect.gen(function*() {
      const who = principal()
      const of = ListCursor.listing(who, roots)
      const cursor = ListCursor.encode(id, of)
      assert.strictEqual(yield* ListCursor.decode(cursor, of), id)
      assert.strictEqual(yield* ListCursor.positionOf(cursor, of), id)
      assert.isUndefined(yield* ListCursor.positionOf(undefined, of))
      assert.notInclude(Buffer.from(cursor, "base64url").toString("utf8"), who.workspaceId)
      assert.match(of, /^[0-9a-f]{16}$/)
    }))

  it.effect("every listing and every tenancy has its own binding", () =>
    Effect.gen(function*() {
      const who = principal()
      const bindings = [
        ListCursor.listing(who, roots),
        ListCursor.listing(who, { ...roots, includeArchived: true }),
        ListCursor.listing(who, { _tag: "list", scope: { children: id }, includeArchived: false }),
        ListCursor.listing(who, { _tag: "list", scope: { tree: id }, includeArchived: false }),
        ListCursor.listing(who, { _tag: "list", scope: { tree: other }, includeArchived: false }),
        ListCursor.listing(who, { _tag: "children", sessionId: id }),
        ListCursor.listing(principal(), roots)
      ]
      assert.strictEqual(new Set(bindings).size, bindings.length)
      assert.strictEqual(ListCursor.listing(who, roots), bindings[0])
    }))

  it.effect("a cursor of another listing, or no cursor at all, is InvalidInput", () =>
    Effect.gen(function*() {
      const who = principal()
      const mine = ListCursor.listing(who, roots)
      const theirs = ListCursor.listing(principal(), roots)
      const foreign = yield* Effect.flip(ListCursor.decode(ListCursor.encode(id, theirs), mine))
      assert.strictEqual(foreign._tag, "InvalidInput")
      assert.strictEqual(foreign.reason, "the cursor belongs to another listing")
      for (const junk of ["", "not a cursor", Buffer.from(JSON.stringify({ before: "x", of: mine })).toString("base64url")]) {
        const error = yield* Effect.flip(ListCursor.positionOf(junk, mine))
        assert.strictEqual(error.what, "cursor")
        assert.strictEqual(error.reason, "not a cursor issued by this store")
      }
    }))

  it.effect("page sizes are integers from 1 to 500, default 50", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* ListCursor.limitOf(undefined), 50)
      assert.strictEqual(yield* ListCursor.limitOf(1), 1)
      assert.strictEqual(yield* ListCursor.limitOf(500), 500)
      for (const bad of [0, 501, 1.5, -1, Number.NaN]) {
        const error = yield* Effect.flip(ListCursor.limitOf(bad))
        assert.strictEqual(error.what, "limit")
      }
    }))
})
