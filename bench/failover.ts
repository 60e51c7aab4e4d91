/**
 * A pool of worker processes on one PostgreSQL database (issue 12, item 6;
 * src/actors/WorkerPool.ts). The workers are test/support/poolWorker.ts: the
 * runtime `troupe serve` builds on a shared store, a scripted model and a
 * `step` tool that report every call to a side file. The bench is the client:
 * it writes sessions and messages straight into the store, and the pool claims
 * them.
 *
 * - **Failover**: three workers; a session's turn starts, its owner is killed
 *   (SIGKILL) inside a model call, and the time until another worker makes
 *   that call again is measured; a fresh worker replaces the dead one; over
 *   `--kills` kills: median and max, against the aim TTL + 2 s.
 * - **Handover**: three workers; a session's turn is inside its second model
 *   call when its owner is sent SIGTERM: it drains, lets the call and its
 *   step finish, releases the lease and tells the pool; the time from that
 *   step to the next model call on another worker is measured; a fresh worker
 *   replaces the drained one; over `--drains` drains: median and max.
 * - **Throughput**: tool turns (model → tool → model) per second with 1, 2
 *   and 4 workers on zero-latency models: `--sessions` sessions with
 *   `--turns` messages each, all written at once; the turns/s between the
 *   first and the last model call, and how the turns spread over the workers.
 *
 * - **Spread**: three workers claiming every 300 ms; `--spreads` bursts of six
 *   one-step sessions, each written at a random phase of the claim ticks: how
 *   many of a burst the busiest worker drove (decision 0056).
 *
 *   npx tsx bench/failover.ts [--kills 20] [--bursts 1,5,15] [--drains 10] [--ttl 2000] [--sessions 48] [--turns 5] [--workers 1,2,4]
 *     [--spreads 25] [--pause MS] [--keep] [--only failover|handover|spread|throughput]
 */
import { Effect, ManagedRuntime } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as PgSessionStore from "../src/layers/PgSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { makeInputId, type SessionId } from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { readSide, type SideLine, startWorker, step, type WorkerProcess } from "../test/support/poolWorker.js"
import { arg, benchPrincipal as principal, loadAverage, median, percentile, withPgSchema } from "./support.js"

const kills = Number(arg("kills", "20"))
const drains = Number(arg("drains", "10"))
const ttl = Number(arg("ttl", "2000"))
const sessionCount = Number(arg("sessions", "48"))
const turnsEach = Number(arg("turns", "5"))
const poolSizes = arg("workers", "1,2,4").split(",").map(Number)
const bursts = arg("bursts", "1,5,15").split(",").map(Number)
const spreads = Number(arg("spreads", "25"))
const only = arg("only", "")
const keep = process.argv.includes("--keep")
// Throughput: after a tenth of the steps, SIGSTOP every worker for this long (ms; longer than the TTL makes every lease lapse mid-turn), then SIGCONT.
const pauseMs = Number(arg("pause", "0"))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const until = async <A>(what: string, find: () => A | undefined, timeoutMs = 60_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = find()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(10)
  }
}

/** A pool on `url`, its side file, and a client writing into the store. */
const pool = async (url: string, label: string) => {
  const dir = mkdtempSync(join(tmpdir(), `troupe-bench-pool-${label}-`))
  const side = join(dir, "side")
  const store = ManagedRuntime.make(PgSessionStore.layer({ url, maxConnections: 4 }))
  await store.runPromise(Effect.flatMap(SessionStore, (s) => s.now))
  const workers: Array<WorkerProcess> = []
  const agent = new Agent({
    name: "stepper",
    instructions: "Do the steps.",
    model: new ModelRef({ name: "scripted" }),
    tools: [step("spec", side).spec]
  })
  let serial = 0
  return {
    side: (): ReadonlyArray<SideLine> => (existsSync(side) ? readSide(readFileSync(side, "utf8")) : []),
    start: async (env: Record<string, string>) => {
      const owner = `${label}${++serial}`
      const worker = startWorker(url, owner, side, env, join(dir, `${owner}.log`))
      workers.push(worker)
      await worker.waitFor(`READY ${worker.owner}`, 120_000)
      return worker
    },
    worker: (owner: string) => workers.find((w) => w.owner === owner)!,
    workers: (): ReadonlyArray<WorkerProcess> => workers,
    log: (sessionId: SessionId) =>
      store.runPromise(Effect.map(
        Effect.flatMap(SessionStore, (s) => s.readLog(sessionId, { limit: 10_000 })),
        (page) => page.records.map((record) => record.body._tag)
      )),
    outputs: () => workers.map((w) => `--- ${w.owner}\n${w.output()}`).join("\n"),
    /** A session with `messages` messages of `steps N` in its inbox. */
    submit: (steps: number, messages = 1) =>
      store.runPromise(Effect.gen(function*() {
        const sessions = yield* SessionStore
        const session = yield* sessions.create({ principal, agent })
        for (let i = 0; i < messages; i++) {
          yield* sessions.push(session.id, new Message({ inputId: yield* makeInputId, text: `steps ${steps}` }))
        }
        return session.id
      })),
    close: async () => {
      for (const worker of workers) {
        if (worker.proc.exitCode === null && worker.proc.signalCode === null) worker.proc.kill("SIGKILL")
      }
      await Promise.all(workers.map((w) => w.exited))
      await store.dispose()
      if (keep) console.log(`  (worker logs kept in ${dir})`)
      else rmSync(dir, { recursive: true, force: true })
    }
  }
}

const failover = (url: string) =>
  Effect.promise(async () => {
    const p = await pool(url, "f")
    const env = { POOL_TTL_MS: String(ttl), POOL_MODEL_MS: "400" }
    const alive = () => p.workers().filter((w) => w.proc.exitCode === null && w.proc.signalCode === null)
    try {
      await Promise.all([p.start(env), p.start(env), p.start(env)])
      for (const burst of bursts) {
        // Per kill, the slowest of its burst; and every session's own time.
        const slowest: Array<number> = []
        const each: Array<number> = []
        for (let k = 0; k < kills; k++) {
          // The burst lands on one worker: the other two are stopped while it claims them.
          const [owner, ...others] = alive()
          for (const w of others) w.proc.kill("SIGSTOP")
          const ids = await Promise.all(Array.from({ length: burst }, () => p.submit(4)))
          const of = (id: SessionId) => p.side().filter((line) => line.sessionId === id && line.kind === "model")
          await Promise.all(ids.map((id) => until(`${id} on ${owner!.owner}`, () => of(id).find((line) => line.owner === owner!.owner))))
          for (const w of others) w.proc.kill("SIGCONT")
          await sleep(200)
          owner!.proc.kill("SIGKILL")
          const killedAt = Date.now()
          // The replacement starts meanwhile: the pool stays three strong.
          const replacement = p.start(env)
          const times = await Promise.all(ids.map(async (id) =>
            (await until("another worker's model call", () => of(id).find((line) => line.owner !== owner!.owner))).at - killedAt
          ))
          each.push(...times)
          slowest.push(Math.max(...times))
          await replacement
          // The burst's turns go on elsewhere; the next kill's burst must not queue behind them.
          await until("the burst's turns to end", () => (ids.every((id) => of(id).length >= 5) ? true : undefined), 120_000)
        }
        const sorted = [...slowest].sort((a, b) => a - b)
        const all = [...each].sort((a, b) => a - b)
        console.log(`\nfailover after SIGKILL of the owner of ${burst} busy session(s), ${kills} kills, 3 workers, lease TTL ${ttl} ms`)
        console.log(`  kill → the call made again on another worker, ms, per session: median ${median(each).toFixed(0)}, max ${all.at(-1)!.toFixed(0)}`)
        console.log(`  per kill, the burst's last: median ${median(slowest).toFixed(0)}, p90 ${percentile(sorted, 0.9).toFixed(0)}, max ${sorted.at(-1)!.toFixed(0)} (aim: max ≤ ${ttl + 2000})`)
      }
    } finally {
      await p.close()
    }
  })

const handover = (url: string) =>
  Effect.promise(async () => {
    const p = await pool(url, "h")
    const env = { POOL_TTL_MS: String(ttl), POOL_MODEL_MS: "400", POOL_GRACE_MS: "10000" }
    try {
      await Promise.all([p.start(env), p.start(env), p.start(env)])
      const times: Array<number> = []
      for (let k = 0; k < drains; k++) {
        const sessionId = await p.submit(3)
        const of = () => p.side().filter((line) => line.sessionId === sessionId)
        const second = await until("the turn's second model call", () => of().find((line) => line.kind === "model" && line.n === 2))
        const leaving = p.worker(second.owner)
        leaving.proc.kill("SIGTERM")
        const heir = await until("another worker's model call", () => of().find((line) => line.kind === "model" && line.owner !== second.owner))
        const lastStep = of().filter((line) => line.kind === "tool" && line.owner === second.owner).at(-1)!
        times.push(heir.at - lastStep.at)
        if ((await leaving.exited) !== 0) throw new Error(`${leaving.owner} did not exit 0 after draining`)
        await p.start(env)
      }
      const sorted = [...times].sort((a, b) => a - b)
      console.log(`\nhandover on SIGTERM of the owner, ${drains} drains, 3 workers, lease TTL ${ttl} ms (default claim interval)`)
      console.log(`  the drained owner's last step → the next model call on another worker, ms: median ${median(times).toFixed(0)}, max ${sorted.at(-1)!.toFixed(0)}`)
      console.log(`  min ${sorted[0]!.toFixed(0)}; all: ${times.map((t) => t.toFixed(0)).join(" ")}`)
    } finally {
      await p.close()
    }
  })

const throughput = (url: string, workers: number) =>
  Effect.promise(async () => {
    const p = await pool(url, `t${workers}x`)
    const env = { POOL_TTL_MS: "5000", POOL_MODEL_MS: "0" }
    try {
      await Promise.all(Array.from({ length: workers }, () => p.start(env)))
      const t0 = Date.now()
      const ids: Array<SessionId> = await Promise.all(Array.from({ length: sessionCount }, () => p.submit(1, turnsEach)))
      const total = sessionCount * turnsEach
      if (pauseMs > 0) {
        await until("a tenth of the steps", () => (p.side().filter((line) => line.kind === "tool").length >= total / 10 ? true : undefined))
        for (const worker of p.workers()) worker.proc.kill("SIGSTOP")
        await sleep(pauseMs)
        for (const worker of p.workers()) worker.proc.kill("SIGCONT")
        console.log(`  paused every worker for ${pauseMs} ms after ${total / 10} steps`)
      }
      // A turn is two model calls and one step: done when every step ran and every turn ended.
      await until("every step", () => (p.side().filter((line) => line.kind === "tool").length >= total ? true : undefined), 120_000).catch((error) => {
        const side = p.side()
        console.log(`model calls ${side.filter((line) => line.kind === "model").length} of ${2 * total}, steps ${side.filter((line) => line.kind === "tool").length}`)
        console.log(p.outputs())
        throw error
      })
      for (const id of ids) {
        for (;;) {
          const log = await p.log(id)
          if (log.filter((tag) => tag === "turn_ended").length >= turnsEach) break
          await sleep(50)
        }
      }
      const lines = p.side()
      const models = lines.filter((line) => line.kind === "model")
      const steps = lines.filter((line) => line.kind === "tool")
      const first = Math.min(...models.map((line) => line.at))
      const last = Math.max(...models.map((line) => line.at))
      const perWorker = new Map<string, number>()
      for (const line of steps) perWorker.set(line.owner, (perWorker.get(line.owner) ?? 0) + 1)
      const sessionsPer = new Map<string, Set<string>>()
      for (const line of steps) {
        const set = sessionsPer.get(line.owner) ?? new Set()
        set.add(line.sessionId)
        sessionsPer.set(line.owner, set)
      }
      const shares = [...perWorker.values()].map((n) => n / steps.length)
      console.log(`\n${workers} worker(s): ${sessionCount} sessions × ${turnsEach} tool turns, written at once`)
      console.log(`  tool turns/s (first to last model call)   ${((total / (last - first)) * 1000).toFixed(1)}`)
      console.log(`  tool turns/s (written to last model call) ${((total / (last - t0)) * 1000).toFixed(1)}`)
      const moved = [...new Set(steps.map((line) => line.sessionId))].filter((id) =>
        new Set(lines.filter((line) => line.sessionId === id).map((line) => line.owner)).size > 1
      )
      const lost = p.outputs().split("LeaseLost").length - 1
      console.log(`  steps run ${steps.length} of ${total}; model calls ${models.length} (${models.length - 2 * total} made again); sessions ${ids.length}, ${moved.length} moved between workers mid-run; LeaseLost in the workers' logs ${lost}×`)
      console.log(`  turns per worker ${JSON.stringify(Object.fromEntries(perWorker))}; largest share ${(Math.max(...shares) * 100).toFixed(0)} % (even: ${(100 / workers).toFixed(0)} %)`)
      console.log(`  sessions per worker ${JSON.stringify(Object.fromEntries([...sessionsPer].map(([w, s]) => [w, s.size])))}`)
    } finally {
      await p.close()
    }
  })

/**
 * Spread: three workers claiming every 300 ms; `--spreads` bursts of six one-step sessions, each
 * written at a random phase of their ticks once the last has ended; how many of each burst the
 * busiest worker drove (at its first model call), as a histogram of that largest share.
 */
const spread = (url: string) =>
  Effect.promise(async () => {
    const p = await pool(url, "s")
    const env = { POOL_TTL_MS: "3000", POOL_CLAIM_MS: "300", POOL_MODEL_MS: "300" }
    try {
      await Promise.all(Array.from({ length: 3 }, () => p.start(env)))
      const largest: Array<number> = []
      for (let b = 0; b < spreads; b++) {
        await sleep(Math.random() * 300)
        const ids = await Promise.all(Array.from({ length: 6 }, () => p.submit(1)))
        // The second model call ends the turn: by then the first one's owner is known.
        const owners = await until("every turn's last model call", () => {
          const lines = p.side()
          const found = ids.map((id) => lines.find((line) => line.sessionId === id && line.kind === "model" && line.n === 1)?.owner)
          const done = ids.every((id) => lines.some((line) => line.sessionId === id && line.kind === "model" && line.n === 2))
          return done && found.every((owner) => owner !== undefined) ? found : undefined
        })
        const counts = new Map<string, number>()
        for (const owner of owners) counts.set(owner!, (counts.get(owner!) ?? 0) + 1)
        largest.push(Math.max(...counts.values()))
      }
      console.log(`\nspread: ${spreads} bursts of 6 sessions over 3 workers (claim interval 300 ms)`)
      console.log(`  bursts whose busiest worker drove 1…6 of them: ${[1, 2, 3, 4, 5, 6].map((k) => largest.filter((n) => n === k).length).join(" / ")}`)
    } finally {
      await p.close()
    }
  })

console.log(`load average at start: ${loadAverage()}`)
await withPgSchema("troupe_bench_pool", async (url) => {
  if (only === "" || only === "failover") await Effect.runPromise(failover(url))
  if (only === "" || only === "handover") await Effect.runPromise(handover(url))
  if (only === "" || only === "spread") await Effect.runPromise(spread(url))
  if (only === "" || only === "throughput") {
    for (const size of poolSizes) await Effect.runPromise(throughput(url, size))
  }
})
console.log(`load average at end: ${loadAverage()}`)
