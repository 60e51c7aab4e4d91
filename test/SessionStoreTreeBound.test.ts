/**
 * `SessionStore.tree` is bounded: at most `maxTreeNodes` (10,000) sessions
 * below the anchor, else a typed `InvalidInput` pointing at the paged catalog.
 * Memory builds the sessions through the store; SQLite copies a stored row
 * 10,000 times in one statement (the store's own creates would take seconds),
 * which is what the bound reads: rows of the tree.
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, type Layer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import type { SessionId } from "../src/schema/Ids.js"
import { maxTreeNodes } from "../src/schema/Session.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { agent, failure, principal } from "./support/fixtures.js"

const filename = join(mkdtempSync(join(tmpdir(), "troupe-tree-")), "store.db")

/** Adds `count` leaves below `parent`: through the store, or (SQLite) as copies of the stored leaf `template`. */
type Grow = (parent: SessionId, template: SessionId, count: number) => Effect.Effect<void, unknown, SessionStore>

const throughStore: Grow = (parent, _template, count) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const owner = (yield* store.get(parent)).principal
    for (let i = 0; i < count; i++) yield* store.create({ principal: owner, agent: agent("leaf"), parentId: parent })
  })

const copies: Grow = (parent, template, count) =>
  Effect.sync(() => {
    const db = new Database(filename)
    try {
      // Ids that sort after the template (created later) and are unique: the template's id plus a counter.
      db.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
        INSERT INTO troupe_sessions (id, workspace_id, tenant, principal, agent, parent_id, root_id, path, agent_path,
          alias, title, busy_policy, budgets, subagent_policy, metadata, fingerprint, head_seq, created_at, updated_at)
        SELECT t.id || printf('%06d', n.i), t.workspace_id, t.tenant, t.principal, t.agent, ?, t.root_id,
          substr(t.path, 1, length(t.path) - length(t.id) - 1) || t.id || printf('%06d', n.i) || '/',
          t.agent_path, NULL, t.title, t.busy_policy, t.budgets, t.subagent_policy, t.metadata, t.fingerprint,
          1, t.created_at, t.updated_at
        FROM troupe_sessions t, n WHERE t.id = ?`).run(count, parent, template)
    } finally {
      db.close()
    }
  })

const backends: ReadonlyArray<readonly [string, Layer.Layer<SessionStore, unknown>, Grow]> = [
  ["memory", MemorySessionStore.layer, throughStore],
  ["sqlite", SqliteSessionStore.layer({ filename }), copies]
]

describe("SessionStore.tree bound", () => {
  for (const [name, layer, grow] of backends) {
    it.effect(`${name}: ${maxTreeNodes} sessions below are answered; one more is InvalidInput`, () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const owner = principal()
        const root = yield* store.create({ principal: owner, agent: agent("lead") })
        const mid = yield* store.create({ principal: owner, agent: agent("mid"), parentId: root.id })
        const leaf = yield* store.create({ principal: owner, agent: agent("leaf"), parentId: mid.id })
        yield* grow(mid.id, leaf.id, maxTreeNodes - 2)
        const full = yield* store.tree(owner, root.id)
        assert.strictEqual(full.nodes.length, maxTreeNodes)
        assert.deepStrictEqual(full.nodes.slice(0, 2).map((n) => n.session.id), [mid.id, leaf.id])
        assert.isTrue(full.nodes.every((n) => n.session.rootId === root.id))
        yield* store.create({ principal: owner, agent: agent("leaf"), parentId: root.id })
        const refused = yield* failure(store.tree(owner, root.id), "InvalidInput")
        assert.include(refused.reason, "list({ scope: { tree } })")
        // The subtree below `mid` still fits.
        assert.strictEqual((yield* store.tree(owner, mid.id)).nodes.length, maxTreeNodes - 1)
      }).pipe(Effect.provide(layer)), 60_000)
  }
})
