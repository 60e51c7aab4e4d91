/**
 * What several benches share: command-line options, medians and percentiles,
 * the process's CPU time and the machine's load, the canonical four-record
 * turn, and a session whose log is filled with such turns straight through
 * the store.
 */
import { Effect, Layer, Option, Schema } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { loadavg } from "node:os"
import pg from "pg"
import type { Agent } from "../src/schema/Agent.js"
import { Usage } from "../src/schema/Budget.js"
import { type InputId, makeCommitId, makeOperationId, makeTurnId } from "../src/schema/Ids.js"
import { Commit } from "../src/schema/Lease.js"
import { Principal } from "../src/schema/Principal.js"
import { OperationCompleted, OperationStarted, TurnEnded, TurnStarted } from "../src/schema/Record.js"
import { SessionStore } from "../src/services/SessionStore.js"
import * as Tool from "../src/services/Tool.js"

/** The principal the turn benches run as. */
export const benchPrincipal = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

/** The server tool of a bench's tool turn: returns its text. */
export const echo = Tool.make({
  name: "echo",
  description: "Returns its text.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.String,
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ text }) => Effect.succeed(text)
})

/** The value after `--name` on the command line, or `fallback`. */
export const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1]! : fallback
}

/** The median: the middle value, or the mean of the two middle ones. */
export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

/** The value at fraction `p` of values sorted in ascending order (0.5: the upper of the two middle ones). */
export const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

/** The median as the turn benches take it: `percentile(…, 0.5)`, a value from the sample even for an even count. */
export const upperMedian = (xs: ReadonlyArray<number>): number => percentile([...xs].sort((a, b) => a - b), 0.5)

/** CPU time this process has used so far (user + system), in µs. */
export const cpuMicros = (): number => {
  const u = process.cpuUsage()
  return u.user + u.system
}

/** The machine's load averages over 1, 5 and 15 minutes, as the benches print them. */
/** CPU ms of each thread of this process (utime + stime, in clock ticks of 10 ms), by thread id. */
export const threadCpu = (): Map<string, number> => {
  const out = new Map<string, number>()
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      out.set(tid, cpuOfStat(readFileSync(`/proc/self/task/${tid}/stat`, "utf8")))
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out
}

/** CPU ms of the calling thread (the main one, where JavaScript runs) since it started. */
export const mainThreadCpu = (): number => cpuOfStat(readFileSync("/proc/thread-self/stat", "utf8"))

const cpuOfStat = (stat: string) => {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10
}

export const loadAverage = (): string => loadavg().map((x) => x.toFixed(2)).join(" ")

/** One completed turn: `turn_started`, a model call's start and receipt, `turn_ended`. */
export const turnRecords = (inputId: InputId) =>
  Effect.gen(function*() {
    const turnId = yield* makeTurnId
    const operationId = yield* makeOperationId
    return [
      new TurnStarted({ turnId, inputId, text: "hello" }),
      new OperationStarted({ operationId, turnId, kind: "model", name: "scripted", input: { messages: 1, tools: 0 } }),
      new OperationCompleted({ operationId, turnId, output: { text: "hi there" }, isError: false }),
      new TurnEnded({ turnId, outcome: "completed", output: "hi there", usage: Usage.zero })
    ]
  })

/**
 * Creates a session and commits turns to it (25 a commit) until its log holds
 * about `records` records (the last turn may pass it by up to three); returns
 * the session and its head.
 */
export const fillLog = (principal: Principal, agent: Agent, records: number, inputId: InputId) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const session = yield* store.create({ principal, agent })
    const lease = Option.getOrThrow(yield* store.acquire(session.id, "bench", 3_600_000))
    // The session is created with one record (session_created).
    let head = 1
    while (head < records) {
      const batch = []
      for (let i = 0; i < 25 && head + batch.length < records; i++) batch.push(...(yield* turnRecords(inputId)))
      const receipt = yield* store.append(
        new Commit({
          commitId: yield* makeCommitId,
          sessionId: session.id,
          owner: "bench",
          epoch: lease.epoch,
          expectedHeadSeq: head,
          records: batch,
          consumes: []
        })
      )
      head = receipt.headSeq
    }
    yield* store.release(lease)
    return { sessionId: session.id, head }
  })

/**
 * Runs `use` with the URL of a fresh PostgreSQL schema (`<prefix>_<time>`, on
 * TROUPE_TEST_PG_URL or the local server), dropped afterwards however `use` ends.
 */
export const withPgSchema = async <A>(prefix: string, use: (url: string) => Promise<A>): Promise<A> => {
  const base = process.env.TROUPE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
  const schema = `${prefix}_${Date.now().toString(36)}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE SCHEMA ${schema}`)
  const url = new URL(base)
  url.searchParams.set("options", `-c search_path=${schema}`)
  try {
    return await use(url.toString())
  } finally {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.end()
  }
}

/** Store calls by method, counted by a wrapper of the port. */
export type StoreCounts = Record<string, number>

/** The store methods that write (each one write transaction, or one statement on PostgreSQL). */
export const storeWrites = new Set([
  "create",
  "push",
  "admitAnswer",
  "acquire",
  "renew",
  "release",
  "releaseIdle",
  "append",
  "spawn",
  "admitChildTurn",
  "updateMetadata"
])

/** `store` with every call of the port counted by method into `counts`. */
export const countingStore = <E, R>(store: Layer.Layer<SessionStore, E, R>, counts: StoreCounts) =>
  Layer.effect(
    SessionStore,
    Effect.map(SessionStore, (inner) => {
      const wrapped: Record<string, unknown> = {}
      for (const [name, value] of Object.entries(inner)) {
        wrapped[name] = typeof value === "function"
          ? (...args: Array<unknown>) => {
            counts[name] = (counts[name] ?? 0) + 1
            return (value as (...a: Array<unknown>) => unknown)(...args)
          }
          : value
      }
      return wrapped as unknown as SessionStore["Type"]
    })
  ).pipe(Layer.provide(store))
