/**
 * SQLite's store signals: the change check reads `PRAGMA data_version`, which
 * does not move for the commits of the connection that reads it. On the
 * store's own connection (`SqliteSessionStore.layerWithSignals`) a push
 * through that store is not signalled (the process announces its own commits
 * in-process), and a push through another connection is; on a connection of
 * its own (`SqliteStoreSignals.layer`) both are. The pool's hint is a commit
 * elsewhere (after a while) or, at once, a release announced through the hint
 * file (decision 0047).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, type Duration, Effect, Layer, Option, Queue } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import * as SqliteStoreSignals from "../src/layers/SqliteStoreSignals.js"
import { makeSessionId, type SessionId } from "../src/schema/Ids.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { type Signal, StoreSignals } from "../src/services/StoreSignals.js"
import { agent, message, principal } from "./support/fixtures.js"

const fileIn = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "troupe-sqlite-signals-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  return join(dir, "store.db")
})

/** The next inbox signal for `sessionId` within `millis`, if any. */
const nextInbox = (queue: Queue.Dequeue<Signal>, sessionId: SessionId, millis: number) =>
  Effect.gen(function*() {
    for (;;) {
      const signal = yield* Queue.take(queue)
      if (signal._tag === "Inbox" && signal.sessionId === sessionId) return signal
    }
  }).pipe(Effect.timeoutOption(millis))

/**
 * A store with signals on its own connection (`here`, checked every `interval`) and a second store
 * on the same file (`other`), as another process would have.
 */
const twoConnections = (interval: Duration.DurationInput) =>
  Effect.gen(function*() {
    const filename = yield* fileIn
    const here = yield* Layer.build(SqliteSessionStore.layerWithSignals({ filename, interval }))
    const other = Context.get(yield* Layer.build(SqliteSessionStore.layer({ filename })), SessionStore)
    return { store: Context.get(here, SessionStore), signals: Context.get(here, StoreSignals), other }
  })

describe("SqliteStoreSignals", () => {
  it.scopedLive("on the store's own connection, only other connections' commits are signalled", () =>
    Effect.gen(function*() {
      const { other, signals, store } = yield* twoConnections("2 millis")
      assert.isTrue(signals.shared)
      const session = yield* store.create({ principal: principal(), agent: agent() })
      const watched = yield* signals.watch(session.id)
      // The same signals through a function instead of a queue (what an actor uses).
      const called: Array<Signal["_tag"]> = []
      yield* signals.onSignal(session.id, (signal) => void called.push(signal._tag))
      // Its heads were read as it was watched: nothing changed since, nothing is signalled.
      assert.isTrue(Option.isNone(yield* nextInbox(watched, session.id, 150)), "an unchanged session is not signalled")
      assert.deepStrictEqual(called, [])

      yield* store.push(session.id, message("through this connection"))
      assert.isTrue(Option.isNone(yield* nextInbox(watched, session.id, 150)), "an own commit is not signalled")
      assert.deepStrictEqual(called, [])
      yield* other.push(session.id, message("through another connection"))
      assert.isTrue(Option.isSome(yield* nextInbox(watched, session.id, 2_000)), "another connection's commit is")
      assert.deepStrictEqual(called, ["Inbox"])
    }))

  it.scopedLive("on a connection of their own, every commit to the file is signalled, the store's too", () =>
    Effect.gen(function*() {
      const filename = yield* fileIn
      const store = Context.get(yield* Layer.build(SqliteSessionStore.layer({ filename })), SessionStore)
      const signals = Context.get(
        yield* Layer.build(SqliteStoreSignals.layer({ filename, interval: "2 millis" })),
        StoreSignals
      )
      const session = yield* store.create({ principal: principal(), agent: agent() })
      const watched = yield* signals.watch(session.id)
      assert.isTrue(Option.isNone(yield* nextInbox(watched, session.id, 150)), "an unchanged session is not signalled")
      yield* store.push(session.id, message("through the store"))
      assert.isTrue(Option.isSome(yield* nextInbox(watched, session.id, 2_000)))
    }))

  it.scopedLive("a commit between the watch and the next check is signalled against the heads read at the watch", () =>
    Effect.gen(function*() {
      // A check a second apart: the push lands well before the first one after the watch.
      const { other, signals } = yield* twoConnections("1 second")
      const session = yield* other.create({ principal: principal(), agent: agent() })
      const called: Array<Signal["_tag"]> = []
      yield* signals.onSignal(session.id, (signal) => void called.push(signal._tag))
      yield* other.push(session.id, message("right after the watch"))
      yield* Effect.sleep("1500 millis")
      assert.deepStrictEqual(called, ["Inbox"])
    }))

  it.scopedLive("a session watched before it exists is signalled once, when a check first sees it", () =>
    Effect.gen(function*() {
      const { other, signals } = yield* twoConnections("2 millis")
      const id = yield* makeSessionId
      const called: Array<Signal["_tag"]> = []
      yield* signals.onSignal(id, (signal) => void called.push(signal._tag))
      yield* Effect.sleep("100 millis")
      assert.deepStrictEqual(called, [], "nothing to see yet")
      yield* other.create({ principal: principal(), agent: agent(), sessionId: id })
      yield* Effect.sleep("300 millis")
      assert.deepStrictEqual(called, ["Log", "Inbox"])
    }))

  it.scopedLive("the pool's hint follows another connection's commit, but not before that process could start what it pushed", () =>
    Effect.gen(function*() {
      const { other, signals } = yield* twoConnections("2 millis")
      const hints = yield* signals.watchClaimable
      const session = yield* other.create({ principal: principal(), agent: agent() })
      const pushedAt = Date.now()
      yield* other.push(session.id, message("its own process starts this"))
      yield* Queue.take(hints).pipe(Effect.timeout("3 seconds"))
      assert.isAtLeast(Date.now() - pushedAt, 90, "the hint waited for the pushing process")
    }))

  it.scopedLive("a release announced through one connection is the pool's hint on every connection at once, with no commit", () =>
    Effect.gen(function*() {
      const filename = yield* fileIn
      const here = Context.get(yield* Layer.build(SqliteSessionStore.layerWithSignals({ filename })), StoreSignals)
      const there = Context.get(yield* Layer.build(SqliteSessionStore.layerWithSignals({ filename })), StoreSignals)
      const hintsHere = yield* here.watchClaimable
      const hintsThere = yield* there.watchClaimable
      // Whatever the opening commits hinted has come and gone; both checks have looked at the hint file.
      yield* Effect.sleep("500 millis")
      yield* Queue.takeAll(hintsHere)
      yield* Queue.takeAll(hintsThere)
      yield* here.announceClaimable
      // Not the commit hint: nothing was committed, and that one waits 100 ms after a commit anyway.
      assert.isTrue(Option.isSome(yield* Queue.take(hintsThere).pipe(Effect.timeoutOption("3 seconds"))), "the other process hears it")
      assert.isTrue(Option.isSome(yield* Queue.take(hintsHere).pipe(Effect.timeoutOption("3 seconds"))), "the sender's too")
    }))

  it.scopedLive("a private :memory: database has no other process: its signals are the no-op ones", () =>
    Effect.gen(function*() {
      const signals = Context.get(yield* Layer.build(SqliteSessionStore.layerWithSignals({ filename: ":memory:" })), StoreSignals)
      assert.isFalse(signals.shared)
    }))
})
