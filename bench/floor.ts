/**
 * The store's floor of a warm tool turn (issue 33, decision 3; docs/decisions/0046): what the
 * exact statements of troupe's warm tool turns cost when sent to the database directly, with no
 * troupe code, beside what troupe's own turn costs, in the same process run.
 *
 * SQLite: a capture run drives troupe's warm tool turn (bench/tools.ts's code path: one session,
 * `send` then `awaitTurn`, the scripted model and the `echo` tool) on a WAL file while every call
 * of a better-sqlite3 statement (`run`/`all`/`get`, which includes the `BEGIN IMMEDIATE` and
 * `COMMIT` of its transaction functions and the background `PRAGMA wal_checkpoint(PASSIVE)`) is
 * recorded with its parameters. The file is copied page for page (`backup`) once the warm-up
 * turns ended, so the replay starts from the same pages. Then, in rounds, alternating:
 * - the floor: the recorded statements of the measured turns replayed in order through
 *   better-sqlite3 alone on a copy of that file, prepared once, with the store's pragmas
 *   (WAL, `temp_store = MEMORY`, `wal_autocheckpoint = 10000`) and `synchronous` NORMAL or FULL;
 * - troupe: the same number of warm turns through the runtime on a fresh file, same `synchronous`.
 * Reported: CPU per turn of each, troupe's as a multiple of the floor (aim ≤ 1.6×), and the
 * statements and transactions a turn sends. With `memory` in `--only`, each round also runs the
 * memory-store turn: what the SQLite path adds over it (SQLite turn − memory turn), beside the floor.
 *
 * PostgreSQL: the same on `TROUPE_TEST_PG_URL`, recording every `pg.Client#query` of the process
 * (round trips per turn: aim ≤ 1 per commit); the floor replays every recorded query in order
 * through one `pg.Client` on a fresh schema (those before the measured turns untimed), so it sends
 * the same statements with the same values, save the log's announcements (`pg_notify` on the
 * signals connection after a commit, off its path: counted, not replayed). Wall and client CPU
 * per turn, troupe beside the floor.
 *
 * Memory store: troupe's own CPU per warm turn with no SQL at all (aim ≤ 0.35 ms).
 *
 *   node bench/run.mjs floor [--turns 1000] [--warmup 300] [--rounds 3] [--only sqlite,pg,memory]
 *     [--sync normal,full] [--pg-turns 300] [--pg-connections 10]
 */
import Database from "better-sqlite3"
import { Effect, Layer, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"
import { copyFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import * as MemorySessionStore from "../src/layers/MemorySessionStore.js"
import type { ScriptedReply } from "../src/layers/ScriptedModel.js"
import type * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import type * as Model from "../src/services/Model.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Troupe from "../src/Troupe.js"
import { arg, benchPrincipal as principal, echo, loadAverage, mainThreadCpu, upperMedian, withPgSchema } from "./support.js"

const turns = Number(arg("turns", "1000"))
const pgTurns = Number(arg("pg-turns", "300"))
const warmup = Number(arg("warmup", "300"))
const rounds = Number(arg("rounds", "3"))
const only = new Set(arg("only", "steps,memory,sqlite,pg").split(","))
const pgConnections = Number(arg("pg-connections", "10"))
const syncs = arg("sync", "normal,full").split(",") as Array<SqliteSessionStore.Synchronous>

// ---- troupe's warm tool turn (bench/tools.ts's sequential turn) ---------------------------

const askForTool = (id: string): ScriptedReply => ({ toolCalls: [{ id, name: "echo", arguments: "{\"text\":\"hi\"}" }] })
const answer = "The tool said hi."
const decide = (request: Model.Request): ScriptedReply =>
  request.messages[request.messages.length - 1]?.role === "tool" ? answer : askForTool(`call_${request.turnId}`)
const agent = new Agent({ name: "floor", instructions: "benchmark", model: new ModelRef({ name: "scripted" }), tools: [echo.spec] })

// A long idle timeout: the actor must stay live (its lease held) while the file is copied between the warm-up and the turns.
const runtimeOptions = {
  host: { idleTimeout: "10 minutes" },
  scripts: { fallback: decide },
  tools: Toolkit.layer([echo])
} as const

/**
 * CPU (and its system part) and wall µs, per unit of work; `main` is the main thread's CPU alone,
 * without V8's other threads (the optimising compiler, the GC's helpers), read in 10 ms ticks.
 */
interface Cost {
  readonly cpu: number
  readonly system: number
  readonly wall: number
  readonly main: number
}

/** What the process spent since `c0`/`m0`/`t0`, divided by `count`. */
const costSince = (c0: NodeJS.CpuUsage, m0: number, t0: number, count: number): Cost => {
  const { system, user } = process.cpuUsage(c0)
  return {
    cpu: (user + system) / count,
    system: system / count,
    wall: ((performance.now() - t0) * 1000) / count,
    main: ((mainThreadCpu() - m0) * 1000) / count
  }
}

/** Marks the points of a run: after the warm-up (`between`), before and after each measured turn. */
interface Marks {
  readonly between?: () => Promise<void>
  readonly turnStarts?: () => void
}

/** One session: `warm` turns, then `count` measured turns; troupe's CPU per measured turn, in µs. */
const turnLoop = (warm: number, count: number, marks: Marks = {}) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const session = yield* sessions.create(principal, { agent })
    const turn = (i: number) =>
      Effect.gen(function*() {
        const accepted = yield* sessions.send(principal, session.id, { text: `message ${i}` })
        const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
        if (result.usage.modelCalls !== 2 || result.usage.toolCalls !== 1 || result.output !== answer) {
          return yield* Effect.dieMessage(`not a tool turn: ${JSON.stringify(result.usage)} ${result.output}`)
        }
      })
    for (let i = 0; i < warm; i++) yield* turn(i)
    if (marks.between !== undefined) yield* Effect.promise(marks.between)
    const c0 = process.cpuUsage()
    const m0 = mainThreadCpu()
    const t0 = performance.now()
    for (let i = 0; i < count; i++) {
      marks.turnStarts?.()
      yield* turn(warm + i)
    }
    return costSince(c0, m0, t0, count)
  })

const runTurns = (layer: Layer.Layer<Troupe.Services, unknown>, warm: number, count: number, marks?: Marks) =>
  Effect.runPromise(turnLoop(warm, count, marks).pipe(Effect.provide(layer)) as Effect.Effect<Cost>)

// ---- SQLite: recording better-sqlite3's statements ---------------------------------------

/** One call of a prepared statement, as troupe made it. */
interface SqlCall {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}

type StatementMethod = (this: Database.Statement, ...params: Array<unknown>) => unknown
const statementProto = Object.getPrototypeOf(new Database(":memory:").prepare("SELECT 1")) as Record<string, StatementMethod>
const recorded = ["run", "all", "get", "iterate"] as const

/** Records every statement call made during `use` (better-sqlite3's own BEGIN/COMMIT included). */
const recordingSqlite = async <A>(use: (calls: Array<SqlCall>) => Promise<A>): Promise<A> => {
  const calls: Array<SqlCall> = []
  const originals = recorded.map((name) => statementProto[name]!)
  recorded.forEach((name, i) => {
    const original = originals[i]!
    statementProto[name] = function(...params) {
      calls.push({ text: this.source, params })
      return original.apply(this, params)
    }
  })
  try {
    return await use(calls)
  } finally {
    recorded.forEach((name, i) => (statementProto[name] = originals[i]!))
  }
}

/** The store's pragmas (SqliteConnection.open, SqliteSessionStore's checkpoints) with `synchronous`. */
const openLikeTheStore = (filename: string, sync: SqliteSessionStore.Synchronous) => {
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.pragma("temp_store = MEMORY")
  db.pragma(`synchronous = ${sync.toUpperCase()}`)
  db.pragma("wal_autocheckpoint = 10000")
  return db
}

/** Replays `calls` on a copy of `snapshot` through better-sqlite3 alone; its cost per turn. */
const replaySqlite = (snapshot: string, filename: string, sync: SqliteSessionStore.Synchronous, calls: ReadonlyArray<SqlCall>) => {
  copyFileSync(snapshot, filename)
  const db = openLikeTheStore(filename, sync)
  try {
    const prepared = new Map<string, Database.Statement>()
    // Prepared once, as the store's handle keeps them: the floor is the stepping, not the parsing.
    for (const { text } of calls) if (!prepared.has(text)) prepared.set(text, db.prepare(text))
    const c0 = process.cpuUsage()
    const m0 = mainThreadCpu()
    const t0 = performance.now()
    for (const { params, text } of calls) {
      const statement = prepared.get(text)!
      if (statement.reader) statement.all(...params)
      else statement.run(...params)
    }
    return costSince(c0, m0, t0, turns)
  } finally {
    db.close()
  }
}

/** What one warm tool turn sends to SQLite, from the recording. */
const describeSqlite = (calls: ReadonlyArray<SqlCall>, count: number) => {
  const begins = calls.filter((c) => c.text.startsWith("BEGIN")).length
  const savepoints = calls.filter((c) => c.text.startsWith("SAVEPOINT")).length
  const other = calls.filter((c) => /^(BEGIN|COMMIT|SAVEPOINT|RELEASE|ROLLBACK)/.test(c.text) === false).length
  const per = (n: number) => (n / count).toFixed(2)
  return `${per(calls.length)} statement calls per turn: ${per(begins)} transactions, ${per(other)} statements in them or alone, ${
    per(savepoints)
  } savepoints`
}

const sqlite = async (dir: string, sync: SqliteSessionStore.Synchronous) => {
  const snapshot = join(dir, `snapshot-${sync}.db`)
  const calls = await recordingSqlite((all) => {
    let from = 0
    return runTurns(Troupe.layerSqlite({ filename: join(dir, `capture-${sync}.db`), synchronous: sync }, runtimeOptions), warmup, turns, {
      between: async () => {
        const reader = new Database(join(dir, `capture-${sync}.db`), { readonly: true })
        await reader.backup(snapshot)
        reader.close()
        from = all.length
      }
    }).then(() => all.slice(from))
  })
  console.log(`\nSQLite file, synchronous=${sync.toUpperCase()}: ${turns} warm tool turns after ${warmup}, ${rounds} rounds alternated`)
  console.log(`  ${describeSqlite(calls, turns)}`)
  const floor: Array<Cost> = []
  const troupe: Array<Cost> = []
  // With `memory` in --only, each round also runs the memory-store turn: what the SQLite path adds over it, beside the floor.
  const memoryTurn: Array<Cost> = []
  for (let r = 0; r < rounds; r++) {
    floor.push(replaySqlite(snapshot, join(dir, `floor-${sync}-${r}.db`), sync, calls))
    troupe.push(await runTurns(Troupe.layerSqlite({ filename: join(dir, `troupe-${sync}-${r}.db`), synchronous: sync }, runtimeOptions), warmup, turns))
    if (only.has("memory")) memoryTurn.push(await runTurns(Troupe.layer(MemorySessionStore.layer, runtimeOptions), warmup, turns))
    const added = memoryTurn[r] === undefined
      ? ""
      : `; memory-store turn ${memoryTurn[r]!.cpu.toFixed(0)} µs, SQLite path adds ${(troupe[r]!.cpu - memoryTurn[r]!.cpu).toFixed(0)} µs`
    console.log(
      `  round ${r + 1}: CPU per turn floor ${floor[r]!.cpu.toFixed(0)} µs, troupe ${troupe[r]!.cpu.toFixed(0)} µs (${
        (troupe[r]!.cpu / floor[r]!.cpu).toFixed(2)
      }×)${added}; wall floor ${floor[r]!.wall.toFixed(0)} µs, troupe ${troupe[r]!.wall.toFixed(0)} µs; load ${loadAverage()}`
    )
  }
  if (memoryTurn.length > 0) {
    console.log(
      `  median: the SQLite path adds ${upperMedian(troupe.map((t, r) => t.cpu - memoryTurn[r]!.cpu)).toFixed(0)} µs of CPU per turn over the memory-store turn (${
        upperMedian(troupe.map((t, r) => (t.cpu - memoryTurn[r]!.cpu) / floor[r]!.cpu)).toFixed(2)
      }× the floor)`
    )
  }
  const med = (xs: Array<Cost>, pick: keyof Cost) => upperMedian(xs.map((x) => x[pick]))
  const ratio = upperMedian(troupe.map((t, r) => t.cpu / floor[r]!.cpu))
  console.log(
    `  median: CPU per turn floor ${med(floor, "cpu").toFixed(0)} µs, troupe ${med(troupe, "cpu").toFixed(0)} µs, troupe ${
      ratio.toFixed(2)
    }× the floor (aim ≤ 1.6); wall per turn floor ${med(floor, "wall").toFixed(0)} µs, troupe ${med(troupe, "wall").toFixed(0)} µs (${
      upperMedian(troupe.map((t, r) => t.wall / floor[r]!.wall)).toFixed(2)
    }×)`
  )
  return { floor: med(floor, "cpu"), troupe: med(troupe, "cpu"), floorWall: med(floor, "wall"), troupeWall: med(troupe, "wall"), ratio }
}

// ---- PostgreSQL: recording pg's queries ----------------------------------------------------

/** One `pg.Client#query`, as troupe made it (a text with values, or a query config). */
interface PgCall {
  readonly query: string | { readonly text: string; readonly name?: string; readonly values?: ReadonlyArray<unknown> }
  readonly values: ReadonlyArray<unknown> | undefined
}

const clientProto = pg.Client.prototype as unknown as { query: (...args: Array<unknown>) => unknown }

/** Records every query of every `pg.Client` of this process during `use`. */
const recordingPg = async <A>(use: (calls: Array<PgCall>) => Promise<A>): Promise<A> => {
  const calls: Array<PgCall> = []
  const original = clientProto.query
  clientProto.query = function(this: unknown, ...args: Array<unknown>) {
    const [query, values] = args
    if (typeof query === "string" || (typeof query === "object" && query !== null && "text" in query)) {
      calls.push({ query: query as PgCall["query"], values: Array.isArray(values) ? values : undefined })
    }
    return original.apply(this, args)
  }
  try {
    return await use(calls)
  } finally {
    clientProto.query = original
  }
}

const textOf = (call: PgCall) => (typeof call.query === "string" ? call.query : call.query.text)

/** Sends `calls` in order through one client; a statement the one connection cannot repeat (a second PREPARE of a name) is skipped. */
const sendAll = async (client: pg.Client, calls: ReadonlyArray<PgCall>) => {
  let failed = 0
  for (const call of calls) {
    try {
      await (call.values === undefined ? client.query(call.query as string) : client.query(call.query as string, call.values as Array<unknown>))
    } catch {
      failed++
    }
  }
  return failed
}

/** The floor on PostgreSQL: on a fresh schema, the queries before the turns untimed, then the turns' queries timed. */
const replayPg = (before: ReadonlyArray<PgCall>, measured: ReadonlyArray<PgCall>) =>
  withPgSchema("troupe_floor", async (url) => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      const setupFailed = await sendAll(client, before)
      const c0 = process.cpuUsage()
      const m0 = mainThreadCpu()
      const t0 = performance.now()
      const failed = await sendAll(client, measured)
      return { cost: costSince(c0, m0, t0, pgTurns), failed, setupFailed }
    } finally {
      await client.end()
    }
  })

const postgres = async () => {
  const { before, measured: sent } = await recordingPg((all) =>
    withPgSchema("troupe_floor", async (url) => {
      let from = 0
      await runTurns(Troupe.layerPg({ url, maxConnections: pgConnections }, runtimeOptions), warmup, pgTurns, { between: async () => void (from = all.length) })
      return { before: all.slice(0, from), measured: all.slice(from) }
    })
  )
  // The log's announcements leave after each commit on the signals connection, batched, off the commit path
  // (decision 0012): counted as round trips, but not part of the store's floor.
  const isAnnouncement = (call: PgCall) => textOf(call).startsWith("SELECT pg_notify")
  const measured = sent.filter((call) => !isAnnouncement(call))
  const byText = new Map<string, number>()
  for (const call of sent) {
    const label = textOf(call).replace(/\s+/g, " ").trim().slice(0, 60)
    byText.set(label, (byText.get(label) ?? 0) + 1)
  }
  console.log(`\nPostgreSQL: ${pgTurns} warm tool turns after ${warmup}, ${rounds} rounds alternated`)
  console.log(
    `  round trips per turn ${(sent.length / pgTurns).toFixed(2)}: ${(measured.length / pgTurns).toFixed(2)} on the pool (4 commits: aim ≤ 4), ${
      ((sent.length - measured.length) / pgTurns).toFixed(2)
    } announcements (NOTIFY, signals connection); by statement:`
  )
  for (const [label, n] of [...byText.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8)) {
    console.log(`    ${(n / pgTurns).toFixed(2).padStart(6)}  ${label}`)
  }
  const floor: Array<Cost> = []
  const troupe: Array<Cost> = []
  for (let r = 0; r < rounds; r++) {
    const replay = await replayPg(before.filter((call) => !isAnnouncement(call)), measured)
    if (replay.failed > 0) console.log(`  (the replay's ${replay.failed} measured statements failed: read the floor with care)`)
    floor.push(replay.cost)
    troupe.push(await withPgSchema("troupe_floor", (url) => runTurns(Troupe.layerPg({ url, maxConnections: pgConnections }, runtimeOptions), warmup, pgTurns)))
    console.log(
      `  round ${r + 1}: wall per turn floor ${floor[r]!.wall.toFixed(0)} µs, troupe ${troupe[r]!.wall.toFixed(0)} µs (${
        (troupe[r]!.wall / floor[r]!.wall).toFixed(2)
      }×); client CPU floor ${floor[r]!.cpu.toFixed(0)} µs (system ${floor[r]!.system.toFixed(0)}), troupe ${troupe[r]!.cpu.toFixed(0)} µs (system ${
        troupe[r]!.system.toFixed(0)
      }); load ${loadAverage()}`
    )
  }
  const med = (xs: Array<Cost>, pick: keyof Cost) => upperMedian(xs.map((x) => x[pick]))
  console.log(
    `  median: wall per turn floor ${med(floor, "wall").toFixed(0)} µs, troupe ${med(troupe, "wall").toFixed(0)} µs (${
      upperMedian(troupe.map((t, r) => t.wall / floor[r]!.wall)).toFixed(2)
    }×); client CPU floor ${med(floor, "cpu").toFixed(0)} µs (system ${med(floor, "system").toFixed(0)}), troupe ${
      med(troupe, "cpu").toFixed(0)
    } µs (system ${med(troupe, "system").toFixed(0)})`
  )
  return med(troupe, "cpu")
}

// ---- the memory store ---------------------------------------------------------------------

const memory = async () => {
  const costs: Array<Cost> = []
  for (let r = 0; r < rounds; r++) costs.push(await runTurns(Troupe.layer(MemorySessionStore.layer, runtimeOptions), warmup, turns))
  const cpu = costs.map((c) => c.cpu)
  const main = costs.map((c) => c.main)
  console.log(
    `\nmemory store: troupe's own CPU per warm tool turn ${upperMedian(cpu).toFixed(0)} µs (aim ≤ 350) [${cpu.map((c) => c.toFixed(0)).join(" ")}], ` +
      `of it on the main thread ${upperMedian(main).toFixed(0)} µs [${main.map((c) => c.toFixed(0)).join(" ")}] ` +
      `(the rest is V8's other threads: the optimising compiler still at work after ${warmup} warm-up turns, and the GC's helpers), load ${loadAverage()}`
  )
  return upperMedian(cpu)
}

// ---- Effect steps ---------------------------------------------------------------------------

/** Counts every Effect step (op) run by a fiber that carries it, once op supervision is on, and every fiber started. */
class StepCounter extends Supervisor.AbstractSupervisor<number> {
  steps = 0
  fibers = 0
  get value() {
    return Effect.sync(() => this.steps)
  }
  override onStart() {
    this.fibers++
  }
  override onEffect() {
    this.steps++
  }
}

/**
 * Effect steps (and fibers started) per warm tool turn and per short session (create + one tool
 * turn), on the memory store and on a SQLite file, counted by a `Supervisor` with op supervision
 * over the runtime and everything it forks (caller, host, actor and turn fibers). A run of its own:
 * counting slows every step.
 */
const steps = async (label: string, layer: Layer.Layer<Troupe.Services, unknown>) => {
  const counter = new StepCounter()
  const sessionsCount = 50
  const counted = Effect.gen(function*() {
    const sessions = yield* Sessions
    const short = Effect.gen(function*() {
      const session = yield* sessions.create(principal, { agent })
      const accepted = yield* sessions.send(principal, session.id, { text: "hello" })
      yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
    })
    for (let i = 0; i < 50; i++) yield* short
    const s0 = counter.steps
    const f0 = counter.fibers
    for (let i = 0; i < sessionsCount; i++) yield* short
    const perSession = (counter.steps - s0) / sessionsCount
    const fibersPerSession = (counter.fibers - f0) / sessionsCount
    // The fan-out's shape: 500 short sessions at once (slots to wait for, SQLite's group commit).
    const c0 = counter.steps
    yield* Effect.all(Array.from({ length: 500 }, () => short), { concurrency: "unbounded" })
    const perConcurrent = (counter.steps - c0) / 500
    let w0 = 0
    let v0 = 0
    yield* turnLoop(50, 200, { between: async () => void (w0 = counter.steps, v0 = counter.fibers) })
    return { perSession, perConcurrent, fibersPerSession, perTurn: (counter.steps - w0) / 200, fibersPerTurn: (counter.fibers - v0) / 200 }
  }).pipe(Effect.provide(layer))
  const { fibersPerSession, fibersPerTurn, perConcurrent, perSession, perTurn } = await Effect.runPromise(
    Effect.supervised(Effect.withRuntimeFlagsPatch(counted, RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)), counter)
  )
  console.log(
    `\nEffect steps (${label}): ${perTurn.toFixed(0)} per warm tool turn, ${perSession.toFixed(0)} per short session (create + 1 tool turn), ` +
      `${perConcurrent.toFixed(0)} per short session of 500 at once; ` +
      `fibers started: ${fibersPerTurn.toFixed(1)} per warm tool turn, ${fibersPerSession.toFixed(1)} per short session`
  )
}

const main = async () => {
  console.log(`node ${process.version}, load average ${loadAverage()}`)
  const dir = mkdtempSync(join(tmpdir(), "troupe-floor-"))
  try {
    // A throw-away warm-up of the JIT on both paths before anything is measured.
    await runTurns(Troupe.layerSqlite({ filename: join(dir, "jit.db") }, runtimeOptions), 0, warmup)
    if (only.has("steps")) {
      await steps("memory store", Troupe.layer(MemorySessionStore.layer, runtimeOptions))
      await steps("SQLite file", Troupe.layerSqlite({ filename: join(dir, "steps.db") }, runtimeOptions))
    }
    const memoryCpu = only.has("memory") ? await memory() : undefined
    const bySync: Array<[string, Awaited<ReturnType<typeof sqlite>>]> = []
    if (only.has("sqlite")) for (const sync of syncs) bySync.push([sync, await sqlite(dir, sync)])
    if (bySync.length === 2) {
      const [[a, x], [b, y]] = bySync as [[string, Awaited<ReturnType<typeof sqlite>>], [string, Awaited<ReturnType<typeof sqlite>>]]
      console.log(
        `\nsynchronous ${b} / ${a}: floor ${(y.floor / x.floor).toFixed(2)}× CPU, ${(y.floorWall / x.floorWall).toFixed(2)}× wall; ` +
          `troupe's turn ${(y.troupe / x.troupe).toFixed(2)}× CPU, ${(y.troupeWall / x.troupeWall).toFixed(2)}× wall`
      )
    }
    const pgCpu = only.has("pg") ? await postgres() : undefined
    if (memoryCpu !== undefined && pgCpu !== undefined) {
      console.log(`PostgreSQL client CPU per turn − memory store's: ${((pgCpu - memoryCpu) / 1000).toFixed(3)} ms (aim ≤ 0.3)`)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// Exit once reported: a pool's idle connections may keep the event loop alive a while.
main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
