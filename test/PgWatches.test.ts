/**
 * Who watches what on PostgreSQL's signals channel (src/layers/PgWatches.ts,
 * decision 0053): watch lines parse as what they say and never as signals, a
 * process's own are not read back, and what a process knows of the others
 * follows hellos, presents, byes and `pg_stat_activity`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as PgStoreSignals from "../src/layers/PgStoreSignals.js"
import * as PgWatches from "../src/layers/PgWatches.js"
import { makeSessionId, type SessionId } from "../src/schema/Ids.js"

describe("PgWatches watch lines", () => {
  it.effect("parse as what they say, never as signals, and a process's own are not read back", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      assert.deepStrictEqual(PgWatches.parseWatch(`w origin-a ${sessionId} d`, "me"), { _tag: "watch", origin: "origin-a", sessionId, deltas: true })
      assert.deepStrictEqual(PgWatches.parseWatch(PgWatches.watchLine("origin-a", sessionId, false), "me"), {
        _tag: "watch",
        origin: "origin-a",
        sessionId,
        deltas: false
      })
      assert.deepStrictEqual(PgWatches.parseWatch(`u origin-a ${sessionId}`, "me"), { _tag: "unwatch", origin: "origin-a", sessionId })
      assert.deepStrictEqual(PgWatches.parseWatch("h origin-a", "me"), { _tag: "hello", origin: "origin-a" })
      assert.deepStrictEqual(PgWatches.parseWatch("p origin-a", "me"), { _tag: "present", origin: "origin-a" })
      assert.deepStrictEqual(PgWatches.parseWatch("b origin-a", "me"), { _tag: "bye", origin: "origin-a" })
      assert.isUndefined(PgWatches.parseWatch(`w me ${sessionId}`, "me"))
      assert.isUndefined(PgWatches.parseWatch("w origin-a", "me"))
      assert.isUndefined(PgWatches.parseWatch(`l ${sessionId} 4`, "me"))
      assert.isUndefined(PgWatches.parseWatch("c", "me"))
      const lines = [`w origin-a ${sessionId} d`, `u origin-a ${sessionId}`, "h origin-a", "p origin-a", "b origin-a"]
      assert.deepStrictEqual(PgStoreSignals.parse(lines.join("\n"), "me"), [])
      assert.isFalse(PgStoreSignals.claimable(lines.join("\n")))
    }))

  it.effect("who watches what: a hello or a present replaces its sender's watches, a bye or a vanished connection drops them", () =>
    Effect.gen(function*() {
      const s1 = yield* makeSessionId
      const s2 = yield* makeSessionId
      const peers = PgWatches.noPeers()
      const hear = (line: string) => PgWatches.hear(peers, PgWatches.parseWatch(line, "me")!)
      const watchers = (id: SessionId) => [...(peers.watches.get(id) ?? new Map<string, boolean>())]
      assert.strictEqual(hear(`w a ${s1}`), s1)
      assert.strictEqual(hear(`w a ${s1} d`), s1)
      // Deltas once wanted stay wanted until the watch is withdrawn.
      hear(`w a ${s1}`)
      hear(`w b ${s1}`)
      hear(`w b ${s2}`)
      assert.deepStrictEqual(watchers(s1), [["a", true], ["b", false]])
      assert.isUndefined(hear(`u a ${s1}`))
      assert.deepStrictEqual(watchers(s1), [["b", false]])
      hear("h b")
      assert.isFalse(peers.watches.has(s1) || peers.watches.has(s2))
      assert.deepStrictEqual([...peers.present.keys()], ["a", "b"])
      hear(`w b ${s2}`)
      hear("b b")
      assert.deepStrictEqual([...peers.present.keys()], ["a"])
      assert.isFalse(peers.watches.has(s2))
      // `pg_stat_activity`: a process is gone once listed and then not; one never listed is kept.
      hear(`w a ${s1}`)
      hear("p c")
      PgWatches.listed(peers, ["troupe-signals a", "troupe-signals x"])
      assert.deepStrictEqual([...peers.present.keys()], ["a", "c"])
      PgWatches.listed(peers, ["troupe-signals x"])
      assert.deepStrictEqual([...peers.present.keys()], ["c"])
      assert.isFalse(peers.watches.has(s1))
    }))
})
