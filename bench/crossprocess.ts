/**
 * Cross-process figures (issue 12): two hosts on separate connections to one
 * store (a SQLite file, a PostgreSQL schema), host A driving a session and
 * holding its lease, host B commanding it.
 *
 * - wake-up: a message pushed through B's store (its commit done) → the turn
 *   started on A (A's model called);
 * - event latency: a record A commits (seen by a follower on A, i.e. at its
 *   commit) → the same event in B's `events` stream.
 *
 * Both hosts run in this one process (one clock; they share its event loop,
 * which the figures include). p50 / p99 over `--rounds` (default 200).
 *
 *   node bench/run.mjs crossprocess [--rounds 200] [--store sqlite|pg|both]
 */
import { Context, Effect, Layer, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type { StoreUnavailable, ToolNotProvided } from "../src/schema/Errors.js"
import { makeInputId } from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import { Sessions } from "../src/services/Sessions.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, loadAverage, percentile, withPgSchema } from "./support.js"

const rounds = Number(arg("rounds", "200"))
const which = arg("store", "both")

const agent = new Agent({ name: "bench", instructions: "benchmark", model: new ModelRef({ name: "scripted" }) })

/** When A's model was called for each message text: the turn it starts has started. */
const calledAt = new Map<string, number>()
const onCall = new Map<string, () => void>()
const scripts = {
  fallback: (request: { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: string }> }) => {
    const last = request.messages[request.messages.length - 1]!
    if (last.role === "user" && !calledAt.has(last.content)) {
      calledAt.set(last.content, performance.now())
      onCall.get(last.content)?.()
    }
    return "ok"
  }
}

/** Waits until A's model was called for `text` (no timer in between: a callback resumes it). */
const calledFor = (text: string) =>
  Effect.async<void>((resume) => {
    if (calledAt.has(text)) return resume(Effect.void)
    onCall.set(text, () => resume(Effect.void))
  })

type Runtime = (owner: string) => Layer.Layer<Troupe.Services, StoreUnavailable | ToolNotProvided>

const report = (label: string, xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  console.log(`  ${label.padEnd(40)} p50 ${percentile(sorted, 0.5).toFixed(2)} ms, p99 ${percentile(sorted, 0.99).toFixed(2)} ms, max ${sorted[sorted.length - 1]!.toFixed(2)} ms (n=${sorted.length})`)
}

const measure = (name: string, runtime: Runtime) =>
  Effect.scoped(Effect.gen(function*() {
    const contextA = yield* Layer.build(runtime("host-a"))
    const contextB = yield* Layer.build(runtime("host-b"))
    const a = Context.get(contextA, Sessions)
    const b = Context.get(contextB, Sessions)
    const storeB = Context.get(contextB, SessionStore)
    const session = yield* a.create(principal, { agent })
    const warm = yield* a.send(principal, session.id, { text: "warm up" })
    yield* a.awaitTurn(principal, session.id, warm.turnId!)

    // Wake-ups: B pushes, A's actor (holding the lease, idle) starts the turn.
    const wakes: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      const text = `wake ${name} ${i}`
      yield* storeB.push(session.id, new Message({ inputId: yield* makeInputId, text }, true))
      const pushed = performance.now()
      yield* calledFor(text)
      wakes.push(calledAt.get(text)! - pushed)
      // Let the turn end before the next push, at an uneven pace.
      yield* Effect.sleep(`${5 + (i % 7) * 3} millis`)
    }

    // Event latency: the same cursor on A's stream (at commit) and on B's.
    const seenA = new Map<number, number>()
    const seenB = new Map<number, number>()
    const head = (yield* a.snapshot(principal, session.id)).cursor
    const follow = (sessions: Sessions["Type"], seen: Map<number, number>) =>
      sessions.events(principal, session.id, { after: head }).pipe(
        Stream.runForEach((event) =>
          Effect.sync(() => {
            if (event._tag === "durable") seen.set(event.cursor, performance.now())
          })
        ),
        Effect.forkScoped
      )
    yield* follow(a, seenA)
    yield* follow(b, seenB)
    yield* Effect.sleep("50 millis")
    const turns = Math.max(1, Math.floor(rounds / 4))
    for (let i = 0; i < turns; i++) {
      const accepted = yield* a.send(principal, session.id, { text: `event ${name} ${i}` })
      yield* a.awaitTurn(principal, session.id, accepted.turnId!)
      yield* Effect.sleep(`${5 + (i % 7) * 3} millis`)
    }
    const last = (yield* a.snapshot(principal, session.id)).cursor
    while (!seenB.has(last)) yield* Effect.sleep("1 millis")
    const events: Array<number> = []
    for (const [cursor, at] of seenA) {
      const there = seenB.get(cursor)
      if (there !== undefined) events.push(there - at)
    }
    console.log(`\n${name}`)
    report("wake-up (push in B → turn started in A)", wakes)
    report("event (commit in A → event in B)", events)
  }))

const sqlite = Effect.suspend(() => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-cross-"))
  const filename = join(dir, "shared.db")
  return measure(
    "SQLite file, two connections",
    (owner) => Troupe.layerSqlite({ filename }, { scripts, host: { owner, idleTimeout: "5 minutes" } })
  ).pipe(Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))))
})

const postgres = Effect.promise(() =>
  withPgSchema("troupe_bench_cross", (url) =>
    Effect.runPromise(measure(
      "PostgreSQL, two pools",
      (owner) => Troupe.layerPg({ url }, { scripts, host: { owner, idleTimeout: "5 minutes" } })
    )))
)

console.log(`cross-process latency, ${rounds} rounds; load average ${loadAverage()}`)
await Effect.runPromise(Effect.gen(function*() {
  if (which !== "pg") yield* sqlite
  if (which !== "sqlite") yield* postgres
}))
console.log(`\nload average after: ${loadAverage()}`)
