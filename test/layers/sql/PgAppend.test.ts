/**
 * PostgreSQL's one-statement append (src/layers/sql/pg/PgAppend.ts): the head patch it
 * derives from `project` agrees with `project` on any head; the statement
 * applies it like the memory store does, over random commits; a commit that
 * admits messages is still one statement, with the transaction's checks; and
 * a commit that waited for the row lock while another writer changed the
 * session runs again instead of trusting its stale snapshot.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Context, Effect, Either, Fiber, Layer, Option, Redacted, type Scope } from "effect"
import pg from "pg"
import * as MemorySessionStore from "../../../src/layers/MemorySessionStore.js"
import * as PgAppend from "../../../src/layers/sql/pg/PgAppend.js"
import * as PgNamed from "../../../src/layers/sql/pg/PgNamed.js"
import * as PgSessionStore from "../../../src/layers/PgSessionStore.js"
import * as SqlSessionStore from "../../../src/layers/sql/SqlSessionStore.js"
import {
  type CallbackId,
  type InputId,
  makeCallbackId,
  makeCommitId,
  makeOperationId,
  makeSessionId,
  makeTurnId,
  type OperationId,
  type SessionId,
  type TurnId
} from "../../../src/schema/Ids.js"
import { Conflict } from "../../../src/schema/Errors.js"
import type { Admission, Message } from "../../../src/schema/Inbox.js"
import { Commit, type Lease } from "../../../src/schema/Lease.js"
import {
  Archived,
  CallbackOpened,
  CallbackResolved,
  ChildResultRecorded,
  ChildSpawned,
  ChildrenAwaited,
  Closed,
  GuardrailChecked,
  HandoffRecorded,
  InputApplied,
  OperationCompleted,
  OperationStarted,
  OperationUnknown,
  OutputRejected,
  RecordBody,
  Renamed,
  SessionCreated,
  TurnEnded,
  TurnStarted
} from "../../../src/schema/Record.js"
import { Usage } from "../../../src/schema/Budget.js"
import { ContextCompacted } from "../../../src/schema/Compaction.js"
import { ApprovalRequest, ClientToolRequest } from "../../../src/schema/Callback.js"
import { type Head, project } from "../../../src/internal/LogProjection.js"
import { SessionStore } from "../../../src/services/SessionStore.js"
import { agent, commit, inputId, message, principal } from "../../support/fixtures.js"
import { availability, freshSchema } from "../../support/postgres.js"
import { random, type Random } from "../../support/random.js"


interface Pools {
  readonly turns: ReadonlyArray<TurnId>
  /** Started operations and their turns (an end names its start's turn: the stores disagree otherwise). */
  readonly operations: Array<{ readonly operationId: OperationId; readonly turnId: TurnId }>
  readonly callbacks: Array<CallbackId>
  readonly fresh: Effect.Effect<{ operation: OperationId; callback: CallbackId }>
}

const pools = Effect.gen(function*() {
  const turns = [yield* makeTurnId, yield* makeTurnId, yield* makeTurnId]
  return {
    turns,
    operations: [],
    callbacks: [],
    fresh: Effect.all({ operation: makeOperationId, callback: makeCallbackId })
  } satisfies Pools
})

/**
 * A batch of 0–7 records over a few turns, operations and callbacks. Callback
 * ids are opened at most once (a second open of an open id is a primary-key
 * error in the SQL stores), except the resolve-then-open of a fresh id.
 */
const batch = (rng: Random, p: Pools) =>
  Effect.gen(function*() {
    const records: Array<RecordBody> = []
    const length = rng.int(8)
    for (let i = 0; i < length; i++) {
      const turnId = rng.pick(p.turns)
      const { callback, operation } = yield* p.fresh
      switch (rng.int(12)) {
        case 0:
          records.push(new TurnStarted({ turnId, inputId: inputId(), text: "go" }))
          break
        case 1:
          records.push(new TurnEnded({ turnId, outcome: "completed", usage: Usage.zero }))
          break
        case 2:
          p.operations.push({ operationId: operation, turnId })
          records.push(new OperationStarted({ operationId: operation, turnId, kind: "tool", name: "t", input: { callId: `c${i}`, arguments: "{}", requestedBy: operation } }))
          break
        case 3: {
          const started = rng.next() < 0.8 && p.operations.length > 0 ? rng.pick(p.operations) : undefined
          records.push(
            new OperationCompleted({
              operationId: started?.operationId ?? operation,
              turnId: started?.turnId ?? turnId,
              output: { ok: i },
              isError: rng.next() < 0.3
            })
          )
          break
        }
        case 4: {
          const started = p.operations.length > 0 ? rng.pick(p.operations) : undefined
          records.push(
            new OperationUnknown({ operationId: started?.operationId ?? operation, turnId: started?.turnId ?? turnId })
          )
          break
        }
        case 5:
        case 6:
          p.callbacks.push(callback)
          records.push(
            new CallbackOpened({ callbackId: callback, turnId, operationId: operation, kind: "approval", request: new ApprovalRequest({ toolName: "t", callId: `c${i}`, arguments: "{}" }) })
          )
          break
        case 7: {
          const callbackId = rng.next() < 0.8 && p.callbacks.length > 0 ? rng.pick(p.callbacks) : callback
          records.push(new CallbackResolved({ callbackId, turnId, resolution: "answered" }))
          break
        }
        case 8:
          // Resolved before it was ever opened, then opened: the stores open first, then close.
          p.callbacks.push(callback)
          records.push(
            new CallbackResolved({ callbackId: callback, turnId, resolution: "cancelled" }),
            new CallbackOpened({ callbackId: callback, turnId, operationId: operation, kind: "client_tool", request: new ClientToolRequest({ toolName: "t", callId: "c", arguments: "{}" }) })
          )
          break
        case 9:
          records.push(rng.pick([
            new Renamed({ title: `title ${rng.int(3)}` }),
            new Archived({ archived: rng.next() < 0.5 }),
            new ChildrenAwaited({ turnId, parked: rng.next() < 0.5 })
          ]))
          break
        case 10: {
          // Records the projection passes over today: were `project` to start reading them, the tests here would see it.
          const child = yield* makeSessionId
          records.push(rng.pick([
            new InputApplied({ inputId: inputId(), kind: "steer", turnId }),
            new ChildSpawned({ childSessionId: child, agentName: "helper", alias: `helper-${i}`, turnId, operationId: operation }),
            new ChildResultRecorded({ childSessionId: child, turnId, outcome: "completed", output: "done" }),
            new SessionCreated({ agentName: "assistant", parentId: null, title: null }),
            new ContextCompacted({ turnId, mode: "summary", messagesBefore: 4, tokensBefore: 900, tokensAfter: 300, replaced: 3, summary: "earlier" }),
            new HandoffRecorded({ turnId, operationId: operation, from: "triage", to: "billing" }),
            new GuardrailChecked({ turnId, stage: "input", guardrail: "policy", allowed: rng.next() < 0.5 }),
            new OutputRejected({ turnId, operationId: operation, attempt: 1, problems: "$.total: missing" })
          ]))
          break
        }
        default:
          if (rng.next() < 0.2) records.push(new Closed({}))
      }
    }
    return records
  })

describe("PgAppend head patch", () => {
  it.effect("agrees with project over random heads and batches", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const rng = random(20261130)
      const p = yield* pools
      const outsider = yield* makeTurnId
      const tags = new Set<string>()
      for (let round = 0; round < 3000; round++) {
        const records = yield* batch(rng, p)
        for (const record of records) tags.add(record._tag)
        const headSeq = 1 + rng.int(50)
        const head: Head = {
          headSeq,
          activeTurnId: rng.pick([null, outsider, ...p.turns]),
          openCallbacks: rng.int(5),
          title: rng.pick([null, "title 0", "other"]),
          archived: rng.next() < 0.5,
          closed: rng.next() < 0.2
        }
        const expected = project(sessionId, head, records, 0)
        const { patch, projection } = PgAppend.headPatch(sessionId, headSeq, records)
        const context = `round ${round}: ${JSON.stringify({ head, records })}`
        if (patch === undefined) return assert.fail(`no patch for ${context}`)
        assert.deepStrictEqual(PgAppend.applyPatch(patch, head, records.length, 0), expected.head, context)
        assert.deepStrictEqual(projection.operations, expected.operations, context)
        assert.deepStrictEqual(projection.callbacksOpened, expected.callbacksOpened, context)
        assert.deepStrictEqual(projection.callbacksClosed, expected.callbacksClosed, context)
      }
      // Every kind of record went through both: a new kind must be added to the batches above.
      assert.deepStrictEqual([...tags].sort(), RecordBody.members.map((member) => member._tag).sort())
    }))

  // docs/store.md, "Three ways to run SQL": the PostgreSQL statement is derived from `project`; this holds the two together.
  it.effect("project's head fields and projection parts are exactly what the one statement writes", () =>
    Effect.gen(function*() {
      const sessionId = yield* makeSessionId
      const head: Head = { headSeq: 1, activeTurnId: null, openCallbacks: 0, title: null, archived: false, closed: false }
      const projection = project(sessionId, head, [new Renamed({ title: "x" })], 0)
      assert.deepStrictEqual(Object.keys(projection).sort(), Object.keys(PgAppend.projectionParts).sort(), "a part of the projection the statement does not write")
      assert.deepStrictEqual(Object.keys(projection.head).sort(), Object.keys(PgAppend.headColumns).sort(), "a head field the statement does not set")
      const text = PgAppend.statement("now()")
      const update = text.slice(text.indexOf("head AS ("), text.indexOf("receipt AS ("))
      for (const column of Object.values(PgAppend.headColumns)) {
        assert.match(update, new RegExp(`\\b${column} = `), `the statement's head update sets ${column}`)
      }
      for (const [part, numbers] of Object.entries(PgAppend.projectionParts)) {
        for (const n of numbers) assert.match(text, new RegExp(`\\$${n}(?!\\d)`), `the statement reads $${n} (${part})`)
      }
      // The parameters the statement reads are the ones `params` gives, no more, no fewer.
      const highest = Math.max(...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))
      const values = PgAppend.params(new Commit({
        commitId: yield* makeCommitId,
        sessionId,
        owner: "worker",
        epoch: 1,
        expectedHeadSeq: 1,
        records: [new Renamed({ title: "x" })],
        consumes: []
      }))
      assert.strictEqual(values?.length, highest)
  }))
})

const status = await availability()

if (status.run) {
  const { drop, url } = await freshSchema()
  afterAll(drop)
  const clock = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

  const storeOf = (layer: Layer.Layer<SessionStore, unknown>): Effect.Effect<SessionStore["Type"], unknown, Scope.Scope> =>
    Effect.map(Layer.build(layer), Context.get(SessionStore))

  /** The store with the transaction of several statements only (what SQLite runs). */
  const transactional = Layer.effect(
    SessionStore,
    Effect.zipRight(
      SqlSessionStore.migrate,
      Effect.flatMap(PgSessionStore.dialect, (dialect) => SqlSessionStore.make({ ...dialect, append: undefined, push: undefined }))
    )
  ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))

  /** The one-statement store that hands over to the transaction at the first stale snapshot. */
  const impatient = Layer.effect(
    SessionStore,
    Effect.zipRight(
      SqlSessionStore.migrate,
      Effect.flatMap(PgSessionStore.dialect, (dialect) =>
        SqlSessionStore.make({ ...dialect, append: PgAppend.strategy(clock, { attempts: 1 }) }))
    )
  ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))

  /**
   * The default store whose one-statement append counts its statements and
   * its hand-overs to the transaction of several statements.
   */
  const counted = Effect.gen(function*() {
    const count = { statements: 0, transactions: 0 }
    const layer = Layer.effect(
      SessionStore,
      Effect.zipRight(
        SqlSessionStore.migrate,
        Effect.gen(function*() {
          const dialect = yield* PgSessionStore.dialect
          const named = PgNamed.named(yield* SqlClient.SqlClient)
          const execute: PgNamed.Named = (name, text, params) =>
            Effect.zipRight(Effect.sync(() => count.statements++), named(name, text, params))
          return yield* SqlSessionStore.make({
            ...dialect,
            append: (runner) =>
              PgAppend.strategy(clock, { execute })({
                ...runner,
                inTransaction: (c) => Effect.zipRight(Effect.sync(() => count.transactions++), runner.inTransaction(c))
              })
          })
        })
      )
    ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))
    return { store: yield* storeOf(layer), count }
  })

  /** A commit fenced by `lease` at `expectedHeadSeq` that admits `admits`. */
  const admitting = (
    lease: Lease,
    expectedHeadSeq: number,
    records: ReadonlyArray<RecordBody>,
    admits: ReadonlyArray<Message>,
    consumes: ReadonlyArray<InputId> = []
  ) => Effect.map(commit(lease, expectedHeadSeq, records, consumes), (c) => new Commit({ ...c, admits }))

  /** A raw look at a session's inbox rows and its row's inbox counters. */
  const inbox = (sessionId: SessionId) =>
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        const items = await client.query(
          `SELECT position::int, input_id, command, received_at::bigint::text AS received_at, consumed
          FROM troupe_inbox WHERE session_id = $1 ORDER BY position`,
          [sessionId]
        )
        const row = await client.query(
          `SELECT inbox_head::int, ready_count::int, head_seq::int FROM troupe_sessions WHERE id = $1`,
          [sessionId]
        )
        return {
          items: items.rows as Array<
            { position: number; input_id: string; command: string; received_at: string; consumed: number }
          >,
          session: row.rows[0] as { inbox_head: number; ready_count: number; head_seq: number }
        }
      } finally {
        await client.end()
      }
    })

  const leased = (store: SessionStore["Type"]) =>
    Effect.gen(function*() {
      const session = yield* store.create({ principal: principal(), agent: agent() })
      const lease = Option.getOrThrow(yield* store.acquire(session.id, "worker-a", 60_000))
      return { session, lease }
    })

  /** What both stores must agree on: everything but times. */
  const observe = (store: SessionStore["Type"], sessionId: SessionId) =>
    Effect.gen(function*() {
      const session = yield* store.get(sessionId)
      const log = yield* store.readLog(sessionId, { limit: 1000 })
      // Through JSON: a field left undefined and a field left out are the same here.
      return JSON.parse(JSON.stringify({
        headSeq: session.headSeq,
        status: session.status,
        activeTurnId: session.activeTurnId,
        title: session.title,
        archived: session.archived,
        log: log.records.slice(1).map((r) => [r.seq, r.body]),
        inbox: (yield* store.readInbox(sessionId)).map((item) => item.command.inputId),
        callbacks: (yield* store.openCallbacks(sessionId)).map(({ openedAt: _, sessionId: __, ...rest }) => rest),
        operations: (yield* store.operations(sessionId)).map(({ sessionId: _, ...rest }) => rest)
      })) as unknown
    })

  const outcome = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
    Effect.map(Effect.either(effect), (result) =>
      Either.isRight(result)
        ? "ok"
        : `${result.left._tag}${"key" in result.left ? ` ${String(result.left.key)}` : ""}`)

  /** A push's outcome with its position, and whether it was new or a duplicate. */
  const admission = <E extends { readonly _tag: string }>(effect: Effect.Effect<Admission, E>) =>
    Effect.map(Effect.either(effect), (result) =>
      Either.isRight(result)
        ? `ok ${result.right.position} ${result.right.duplicate ? "duplicate" : "new"}`
        : `${result.left._tag}${"key" in result.left ? ` ${String(result.left.key)}` : ""}`)

  /** The session row's counters against the rows they count (a raw look at the tables). */
  const counters = (sessionId: SessionId) =>
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        const { rows } = await client.query(
          `SELECT open_callbacks, (SELECT count(*) FROM troupe_callbacks WHERE session_id = $1)::int AS callbacks,
            ready_count, (SELECT count(*) FROM troupe_inbox WHERE session_id = $1 AND consumed = 0)::int AS ready
          FROM troupe_sessions WHERE id = $1`,
          [sessionId]
        )
        return rows[0] as { open_callbacks: number; callbacks: number; ready_count: number; ready: number }
      } finally {
        await client.end()
      }
    })

  describe("PgAppend on PostgreSQL", () => {
    it.scoped("random commits leave the same state as the memory store, and counters match their rows", () =>
      Effect.gen(function*() {
        const postgres = yield* storeOf(PgSessionStore.layer({ url, maxConnections: 2 }))
        const memory = yield* MemorySessionStore.make
        const admitting = new Set<string>()
        for (let seed = 1; seed <= 12; seed++) {
          const rng = random(seed)
          const p = yield* pools
          const a = yield* leased(postgres)
          const b = yield* leased(memory)
          let pushed: Array<InputId> = []
          const handed: Array<Message> = []
          let head = 1
          // Parks in agents.wait (children_awaited) count with the open callbacks.
          let parks = 0
          for (let step = 0; step < 14; step++) {
            if (rng.next() < 0.4) {
              // Mostly new; sometimes a message a commit admitted: its duplicate, at its position.
              const m = handed.length > 0 && rng.next() < 0.2 ? rng.pick(handed) : message(`m${step}`)
              const admitted = yield* admission(postgres.push(a.session.id, m))
              assert.strictEqual(admitted, yield* admission(memory.push(b.session.id, m)))
              if (admitted.endsWith("new")) pushed.push(m.inputId)
            }
            const records = yield* batch(rng, p)
            // Mostly ready inputs; sometimes an unknown one, a consumed one or a duplicate.
            const consumes: Array<InputId> = []
            if (pushed.length > 0 && rng.next() < 0.5) consumes.push(rng.pick(pushed))
            const r = rng.next()
            if (r < 0.1) consumes.push(inputId())
            else if (r < 0.2 && consumes.length > 0) consumes.push(consumes[0]!)
            const expected = rng.next() < 0.1 ? head + 1 : head
            // Sometimes messages admitted at once: a new one (refused while an item stays ready), a known one, one twice.
            const admits: Array<Message> = []
            const k = rng.next()
            const known = [...pushed, ...handed.map((m) => m.inputId)]
            if (k < 0.3) admits.push(message(`a${step}`))
            else if (k < 0.35 && known.length > 0) admits.push(message(`a${step}`), message("known", rng.pick(known)))
            else if (k < 0.4) admits.push(...Array.from({ length: 2 }, () => message(`a${step}`, `twice-${seed}-${step}`)))
            const commitId = yield* makeCommitId
            const make = (lease: Lease) =>
              new Commit({
                commitId,
                sessionId: lease.sessionId,
                owner: lease.owner,
                epoch: lease.epoch,
                expectedHeadSeq: expected,
                records,
                consumes,
                admits
              })
            const got = yield* outcome(postgres.append(make(a.lease)))
            const want = yield* outcome(memory.append(make(b.lease)))
            const context = `seed ${seed} step ${step}`
            assert.strictEqual(got, want, context)
            if (got === "ok") {
              head += records.length
              for (const record of records) if (record._tag === "children_awaited") parks += record.parked ? 1 : -1
              pushed = pushed.filter((id) => !consumes.includes(id))
              handed.push(...admits)
            }
            if (admits.length > 0) admitting.add(got.split(" ")[0]!)
            assert.deepStrictEqual(yield* observe(postgres, a.session.id), yield* observe(memory, b.session.id), context)
            const c = yield* counters(a.session.id)
            assert.strictEqual(c.open_callbacks, c.callbacks + parks, `${context}: open_callbacks`)
            assert.strictEqual(c.ready_count, c.ready, `${context}: ready_count`)
          }
        }
        // Commits that admit messages went through and were refused.
        assert.includeMembers([...admitting], ["ok", "Conflict"])
      }), 120_000)

    const pause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 150)))

    /**
     * Holds the session row from outside, queues `effects` behind it in order
     * (each waits for the lock, its statement's snapshot taken before the ones
     * ahead of it commit), lets go, and returns their outcomes.
     */
    const queuedBehindLock = <A, E>(sessionId: SessionId, effects: ReadonlyArray<Effect.Effect<A, E>>) =>
      Effect.gen(function*() {
        const holder = new pg.Client({ connectionString: url })
        yield* Effect.promise(() => holder.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => holder.end()))
        yield* Effect.promise(() => holder.query("BEGIN"))
        yield* Effect.promise(() => holder.query("SELECT 1 FROM troupe_sessions WHERE id = $1 FOR UPDATE", [sessionId]))
        const fibers = []
        for (const effect of effects) {
          fibers.push(yield* Effect.fork(Effect.either(effect)))
          yield* pause
        }
        yield* Effect.promise(() => holder.query("COMMIT"))
        return yield* Effect.forEach(fibers, Fiber.join)
      })

    /** A push, then a commit consuming what it pushed, both queued behind the lock. */
    const consumeAfterQueuedPush = (store: SessionStore["Type"]) =>
      Effect.gen(function*() {
        const { lease, session } = yield* leased(store)
        const pending = message("pushed while the commit waits")
        const consume = yield* commit(lease, 1, [new Renamed({ title: "consumed" })], [pending.inputId])
        const outcomes = yield* queuedBehindLock(session.id, [
          outcome(store.push(session.id, pending)),
          outcome(store.append(consume))
        ])
        assert.deepStrictEqual(outcomes.map(Either.getOrThrow), ["ok", "ok"])
        assert.deepStrictEqual(yield* store.readInbox(session.id), [])
        assert.strictEqual((yield* store.get(session.id)).title, "consumed")
        assert.strictEqual((yield* counters(session.id)).ready_count, 0)
      })

    it.scoped("a commit whose snapshot predates a push it consumes runs again and succeeds", () =>
      Effect.flatMap(storeOf(PgSessionStore.layer({ url, maxConnections: 4 })), consumeAfterQueuedPush), 30_000)

    it.scoped("after its attempts the one statement hands over to the transaction", () =>
      Effect.flatMap(storeOf(impatient), consumeAfterQueuedPush), 30_000)

    it.scoped("the transactional append handles the same race (reference)", () =>
      Effect.flatMap(storeOf(transactional), consumeAfterQueuedPush), 30_000)

    it.scoped("an input consumed by the commit ahead is a Conflict for the one queued behind, which writes nothing", () =>
      Effect.gen(function*() {
        const store = yield* storeOf(PgSessionStore.layer({ url, maxConnections: 4 }))
        const { lease, session } = yield* leased(store)
        const pending = message("consumed once")
        yield* store.push(session.id, pending)
        // The second was built knowing the first's head: only the inbox can stop it.
        const first = yield* commit(lease, 1, [new Renamed({ title: "first" })], [pending.inputId])
        const second = yield* commit(lease, 2, [new Renamed({ title: "second" })], [pending.inputId])
        const outcomes = yield* queuedBehindLock(session.id, [outcome(store.append(first)), outcome(store.append(second))])
        assert.deepStrictEqual(outcomes.map(Either.getOrThrow), ["ok", `Conflict ${pending.inputId}`])
        const current = yield* store.get(session.id)
        assert.strictEqual(current.headSeq, 2)
        assert.strictEqual(current.title, "first")
      }), 30_000)

    it.scoped("a push queued behind another push of the same input runs again and is its duplicate (or a Conflict)", () =>
      Effect.gen(function*() {
        const store = yield* storeOf(PgSessionStore.layer({ url, maxConnections: 4 }))
        const { session } = yield* leased(store)
        const once = message("pushed twice")
        // The second's snapshot predates the first's row: only the run again can see it.
        const twice = yield* queuedBehindLock(session.id, [store.push(session.id, once), store.push(session.id, once)])
        assert.isTrue(twice.every(Either.isRight), String(twice))
        const [first, second] = twice.map(Either.getOrThrow)
        assert.deepStrictEqual([first!.position, first!.duplicate, second!.position, second!.duplicate], [1, false, 1, true])
        const other = message("pushed once")
        const changed = message("another command", other.inputId)
        const outcomes = yield* queuedBehindLock(session.id, [outcome(store.push(session.id, other)), outcome(store.push(session.id, changed))])
        assert.deepStrictEqual(outcomes.map(Either.getOrThrow), ["ok", `Conflict ${other.inputId}`])
        assert.deepStrictEqual((yield* store.readInbox(session.id)).map((item) => item.position), [1, 2])
        assert.strictEqual((yield* counters(session.id)).ready_count, 2)
      }), 30_000)

    it.scoped("a commit admitting a message writes it consumed after the inbox head, in one statement; a later push of it is its duplicate", () =>
      Effect.gen(function*() {
        const { count, store } = yield* counted
        const { lease, session } = yield* leased(store)
        // A consumed item first, so the admitted one goes after an inbox head that is not 0.
        const first = message("pushed")
        yield* store.push(session.id, first)
        yield* store.append(yield* commit(lease, 1, [new Renamed({ title: "first" })], [first.inputId]))
        const handed = message("handed over in memory")
        const records = [new TurnStarted({ turnId: yield* makeTurnId, inputId: handed.inputId, text: handed.text })]
        const before = { ...count }
        const receipt = yield* store.append(yield* admitting(lease, 2, records, [handed]))
        assert.deepStrictEqual(
          [count.statements - before.statements, count.transactions - before.transactions],
          [1, 0],
          "one statement, no transaction"
        )
        assert.deepStrictEqual([receipt.firstSeq, receipt.headSeq], [3, 3])
        assert.deepStrictEqual((yield* store.readLog(session.id, { after: 2 })).records.map((r) => r.body), records)
        const { items, session: row } = yield* inbox(session.id)
        assert.deepStrictEqual(items.map((i) => [i.position, i.input_id, i.consumed, i.received_at]), [
          [1, first.inputId, 1, items[0]!.received_at],
          [2, handed.inputId, 1, String(receipt.at)]
        ])
        assert.deepStrictEqual(row, { inbox_head: 2, ready_count: 0, head_seq: 3 })
        assert.deepStrictEqual(yield* store.readInbox(session.id), [])
        // The command text is exactly what a push of the same message stores.
        const other = yield* leased(store)
        yield* store.push(other.session.id, handed)
        assert.strictEqual(items[1]!.command, (yield* inbox(other.session.id)).items[0]!.command)
        const again = yield* store.push(session.id, handed)
        assert.deepStrictEqual([again.position, again.duplicate], [2, true])
        const changed = yield* Effect.flip(store.push(session.id, message("something else", handed.inputId)))
        assert.deepStrictEqual([changed._tag, "key" in changed ? changed.key : undefined], ["Conflict", handed.inputId])
        assert.deepStrictEqual(yield* store.readInbox(session.id), [])
      }), 30_000)

    it.scoped("a commit admitting behind a ready item is a Conflict and writes nothing; consuming that item admits it after", () =>
      Effect.gen(function*() {
        const { count, store } = yield* counted
        const { lease, session } = yield* leased(store)
        const ready = message("pushed, not yet decided")
        yield* store.push(session.id, ready)
        const handed = message("handed over in memory")
        const before = { ...count }
        const refused = yield* Effect.flip(store.append(yield* admitting(lease, 1, [new Renamed({ title: "no" })], [handed])))
        assert.deepStrictEqual(
          refused,
          new Conflict({ entity: "input", key: handed.inputId, reason: "a ready inbox item is ahead of it" })
        )
        assert.deepStrictEqual([count.statements - before.statements, count.transactions - before.transactions], [1, 0])
        const { items, session: row } = yield* inbox(session.id)
        assert.deepStrictEqual(items.map((i) => [i.position, i.input_id, i.consumed]), [[1, ready.inputId, 0]])
        assert.deepStrictEqual(row, { inbox_head: 1, ready_count: 1, head_seq: 1 })
        assert.strictEqual((yield* store.get(session.id)).title, null)
        // Consumed by the same commit, the ready item is no longer ahead.
        yield* store.append(yield* admitting(lease, 1, [new Renamed({ title: "yes" })], [handed], [ready.inputId]))
        const after = yield* inbox(session.id)
        assert.deepStrictEqual(after.items.map((i) => [i.position, i.input_id, i.consumed]), [
          [1, ready.inputId, 1],
          [2, handed.inputId, 1]
        ])
        assert.deepStrictEqual(after.session, { inbox_head: 2, ready_count: 0, head_seq: 2 })
      }), 30_000)

    it.scoped("a commit admitting a known input id, or one twice, is a Conflict and writes nothing, after the fence and head checks", () =>
      Effect.gen(function*() {
        const { count, store } = yield* counted
        const { lease, session } = yield* leased(store)
        const pushed = message("pushed")
        yield* store.push(session.id, pushed)
        yield* store.append(yield* commit(lease, 1, [new Renamed({ title: "consumed" })], [pushed.inputId]))
        const fresh = message("fresh")
        const already = (key: InputId) => new Conflict({ entity: "input", key, reason: "inputId already admitted" })
        const before = { ...count }
        for (
          const [admits, key] of [
            [[fresh, pushed], pushed.inputId],
            [[fresh, message("again", fresh.inputId)], fresh.inputId]
          ] as const
        ) {
          const refused = yield* Effect.flip(store.append(yield* admitting(lease, 2, [new Renamed({ title: "no" })], admits)))
          assert.deepStrictEqual(refused, already(key))
        }
        // A stale head is reported before the admits.
        const stale = yield* Effect.flip(store.append(yield* admitting(lease, 1, [], [fresh, fresh])))
        assert.strictEqual(stale._tag, "SequenceConflict")
        assert.deepStrictEqual([count.statements - before.statements, count.transactions - before.transactions], [3, 0])
        const { items, session: row } = yield* inbox(session.id)
        assert.deepStrictEqual(items.map((i) => [i.position, i.input_id, i.consumed]), [[1, pushed.inputId, 1]])
        assert.deepStrictEqual(row, { inbox_head: 1, ready_count: 0, head_seq: 2 })
        assert.strictEqual((yield* store.get(session.id)).title, "consumed")
      }), 30_000)

    it.scoped("a commit admitting an input pushed while it waited for the lock runs again and is refused, writing nothing", () =>
      Effect.gen(function*() {
        const store = yield* storeOf(PgSessionStore.layer({ url, maxConnections: 4 }))
        const { lease, session } = yield* leased(store)
        const pending = message("pushed while the commit waits")
        // Consuming it leaves no ready item ahead: only the inbox the snapshot predates knows the id.
        const both = yield* admitting(lease, 1, [new Renamed({ title: "no" })], [pending], [pending.inputId])
        const outcomes = yield* queuedBehindLock<void, unknown>(session.id, [
          Effect.asVoid(store.push(session.id, pending)),
          Effect.asVoid(store.append(both))
        ])
        assert.deepStrictEqual(outcomes, [
          Either.right(undefined),
          Either.left(new Conflict({ entity: "input", key: pending.inputId, reason: "inputId already admitted" }))
        ])
        const { items, session: row } = yield* inbox(session.id)
        assert.deepStrictEqual(items.map((i) => [i.position, i.input_id, i.consumed]), [[1, pending.inputId, 0]])
        assert.deepStrictEqual(row, { inbox_head: 1, ready_count: 1, head_seq: 1 })
      }), 30_000)

    it.scoped("a copy of a commit queued behind the first returns the first's receipt, even an empty commit", () =>
      Effect.gen(function*() {
        const store = yield* storeOf(PgSessionStore.layer({ url, maxConnections: 4 }))
        const { lease, session } = yield* leased(store)
        for (const records of [[new Renamed({ title: "once" })], []]) {
          const head = (yield* store.get(session.id)).headSeq
          const once = yield* commit(lease, head, records)
          const receipts = yield* queuedBehindLock(session.id, [store.append(once), store.append(once)])
          assert.isTrue(receipts.every(Either.isRight), String(receipts))
          assert.deepStrictEqual(receipts[0], receipts[1])
        }
        assert.strictEqual((yield* store.readLog(session.id)).records.length, 2)
      }), 30_000)
  })
} else {
  describe.skip(`PgAppend on PostgreSQL (${status.reason})`, () => {
    it("needs a PostgreSQL server", () => {})
  })
}
