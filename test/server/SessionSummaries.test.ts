/**
 * The listing's summaries (`server/SessionSummaries`): each session's turns,
 * tokens and open callbacks as its log says; a count kept goes on from its
 * cursor (a session's log is never read twice), and at most `capacity`
 * sessions are kept, the least recently counted dropped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as SessionSummaries from "../../src/server/SessionSummaries.js"
import { Sessions } from "../../src/services/Sessions.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as Troupe from "../../src/Troupe.js"
import { agent, principal } from "../support/fixtures.js"

describe("SessionSummaries", () => {
  it.effect("counts each listed session from its log, goes on from where it stopped, and keeps at most its capacity", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const store = yield* SessionStore
      const reads: Array<[string, number]> = []
      const counted = SessionSummaries.make({
        ...store,
        readLog: (sessionId, options) => Effect.zipRight(Effect.sync(() => reads.push([sessionId, options?.after ?? 0])), store.readLog(sessionId, options))
      }, 2)
      const me = principal()
      const turn = (id: (typeof ids)[number], text: string) =>
        Effect.flatMap(sessions.send(me, id, { text }), (accepted) => sessions.awaitTurn(me, id, accepted.turnId!))
      const ids = [
        (yield* sessions.create(me, { agent: agent() })).id,
        (yield* sessions.create(me, { agent: agent() })).id,
        (yield* sessions.create(me, { agent: agent() })).id
      ]
      const used = (yield* turn(ids[0]!, "one")).usage.totalTokens
      const listed = () => Effect.map(sessions.list(me, { scope: "roots" }), (page) => page.items)

      const first = yield* counted.of(yield* listed())
      assert.deepStrictEqual(first[ids[0]!], { turns: 1, totalTokens: used, pendingCallbacks: 0 })
      assert.deepStrictEqual(first[ids[2]!], { turns: 0, totalTokens: 0, pendingCallbacks: 0 })
      assert.strictEqual(counted.size(), 2, "three counted, two kept")

      // A second turn of the first session: its log is read on from the cursor counted, not again.
      const head = (yield* sessions.get(me, ids[0]!)).headSeq
      const more = (yield* turn(ids[0]!, "two")).usage.totalTokens
      reads.length = 0
      const [session] = (yield* listed()).filter((s) => s.id === ids[0])
      const second = yield* counted.of([session!])
      assert.deepStrictEqual(second[ids[0]!], { turns: 2, totalTokens: used + more, pendingCallbacks: 0 })
      assert.deepStrictEqual(reads, [[ids[0]!, head]])
      // Counted up to its head: nothing more to read.
      reads.length = 0
      yield* counted.of([session!])
      assert.deepStrictEqual(reads, [])
    }).pipe(Effect.provide(Troupe.layerTest())))

  it("adds records: turns started, tokens of ended turns, callbacks opened and not yet resolved", () => {
    const usage = { totalTokens: 7 } as never
    let count = SessionSummaries.empty
    count = SessionSummaries.add(count, 1, { _tag: "turn_started" } as never)
    count = SessionSummaries.add(count, 2, { _tag: "callback_opened", callbackId: "cb_a" } as never)
    count = SessionSummaries.add(count, 3, { _tag: "callback_opened", callbackId: "cb_b" } as never)
    count = SessionSummaries.add(count, 4, { _tag: "callback_resolved", callbackId: "cb_a" } as never)
    count = SessionSummaries.add(count, 5, { _tag: "turn_ended", usage } as never)
    count = SessionSummaries.add(count, 6, { _tag: "renamed" } as never)
    assert.deepStrictEqual(SessionSummaries.summaryOf(count), { turns: 1, totalTokens: 7, pendingCallbacks: 1 })
    assert.strictEqual(count.cursor, 6)
    assert.strictEqual(SessionSummaries.empty.open.size, 0, "the empty count is never changed")
  })
})
