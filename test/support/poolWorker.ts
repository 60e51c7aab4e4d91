/**
 * One worker of a pool on PostgreSQL (or, given a file path instead of a URL, on a SQLite file), run as a child process by
 * test/WorkerPool.test.ts and bench/failover.ts: the runtime `troupe serve`
 * builds on a shared store (`Troupe.layerPg`, so `Troupe.sharedStoreHost`),
 * with a server tool and a slow scripted model that report to a side file,
 * and the daemon's way of stopping: on SIGTERM it drains
 * (`SessionHost.drain`, handing its sessions over), closes the runtime and
 * exits 0.
 *
 *   poolWorker.ts URL|FILE OWNER SIDE_FILE
 *
 * Environment (milliseconds): `POOL_TTL_MS` (lease TTL, default 2000),
 * `POOL_CLAIM_MS` (claim interval, default the shared-store default),
 * `POOL_MODEL_MS` (each model call's duration, default 600), `POOL_GRACE_MS`
 * (drain grace, default 0); `POOL_MAX_BUSY` (default 64); `POOL_CONNECTIONS` (the store's
 * pool size, default 4).
 *
 * A session's first message is `steps N`: its turn calls the `step` tool N
 * times, one model call before each and one after the last, then answers
 * `done@OWNER`. Every model call appends `model SESSION K OWNER MS` to the
 * side file as it starts (K counts from 1 within the turn) and every tool
 * run `tool SESSION N OWNER MS`, synchronously, before anything else happens,
 * so the file is what the processes did whatever kills them. The model marks
 * what it returns with `@OWNER` (the tool call ids, the final text), so the
 * log shows which worker wrote each model result.
 *
 * The process prints `READY OWNER` once its runtime is up, and `DRAINED
 * true|false` after a drain.
 */
import { Context, Duration, Effect, Layer, Schema, Stream } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { appendFileSync, existsSync, readFileSync, rmSync, writeSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as Signals from "../../src/cli/Signals.js"
import * as PgSessionStore from "../../src/layers/PgSessionStore.js"
import * as PgStoreSignals from "../../src/layers/PgStoreSignals.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import type { Commit } from "../../src/schema/Lease.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as Model from "../../src/services/Model.js"
import { SessionHost } from "../../src/services/SessionHost.js"
import * as Tool from "../../src/services/Tool.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"

/** The tool every turn calls. */
export const step = (owner: string, side: string) =>
  Tool.make({
    name: "step",
    description: "Does one step of the work, outside the runtime.",
    // The model names the session in the arguments: a handler is not told it.
    parameters: Schema.Struct({ n: Schema.Number, session: Schema.String }),
    success: Schema.Number,
    metadata: { sideEffect: "external", idempotency: "unsupported" },
    handler: ({ n, session }) =>
      Effect.sync(() => {
        appendFileSync(side, `tool ${session} ${n} ${owner} ${Date.now()}\n`)
        return n
      })
  })

/** The steps a turn asks for: `steps N` in its user message. */
export const stepsOf = (text: string): number => Number(/steps (\d+)/.exec(text)?.[1] ?? "0")

/** One line of the side file. */
export interface SideLine {
  readonly kind: "model" | "tool" | "pause"
  readonly sessionId: string
  /** The model call's number in its turn, or the tool's step. */
  readonly n: number
  readonly owner: string
  readonly at: number
}

/** Parses the side file. */
export const readSide = (text: string): ReadonlyArray<SideLine> =>
  text.split("\n").filter((line) => line.trim() !== "").map((line) => {
    const [kind, sessionId, n, owner, at] = line.split(" ")
    return { kind: kind as SideLine["kind"], sessionId: sessionId!, n: Number(n), owner: owner!, at: Number(at) }
  })

/**
 * The scripted model of a worker: each call reports itself to `side`, takes
 * `modelMs`, and asks for the next step of the turn's `steps N` (tool call id
 * `sK@OWNER`), then answers `done@OWNER`.
 */
export const stepModel = (owner: string, side: string, modelMs: number) => {
  const scripted = ScriptedModel.make({
    fallback: (request) => {
      const users = request.messages.flatMap((m, i) => (m.role === "user" ? [i] : []))
      const last = users[users.length - 1] ?? 0
      const done = request.messages.slice(last).filter((m) => m.role === "tool").length
      const wanted = stepsOf(request.messages[last]?.content ?? "")
      return done < wanted
        ? { text: "", toolCalls: [{ id: `s${done + 1}@${owner}`, name: "step", arguments: JSON.stringify({ n: done + 1, session: request.sessionId }) }] }
        : `done@${owner}`
    }
  })
  return Layer.effect(
    Model.Model,
    Effect.map(scripted, (inner) =>
      Model.Model.of({
        stream: (request) =>
          Stream.unwrap(Effect.sync(() => {
            const users = request.messages.flatMap((m, i) => (m.role === "user" ? [i] : []))
            const call = 1 + request.messages.slice(users[users.length - 1] ?? 0).filter((m) => m.role === "assistant").length
            appendFileSync(side, `model ${request.sessionId} ${call} ${owner} ${Date.now()}\n`)
            return Stream.concat(Stream.drain(Stream.fromEffect(Effect.sleep(Duration.millis(modelMs)))), inner.stream(request))
          }))
      }))
  )
}

/**
 * Pauses the process right after a commit that records a tool call as started, when the test
 * asked for it (a file `SIDE.pause.SESSION` holding `stop`, or `block MS`): once, after writing
 * `pause SESSION 0 OWNER MS` to the side file. `stop` is a SIGSTOP to itself (the test sends
 * SIGCONT); `block` holds the event loop for MS. The next thing the turn does is the tool's body.
 */
const pauseAfter = (side: string, owner: string, commit: Commit) => {
  if (!commit.records.some((r) => r._tag === "operation_started" && r.kind === "tool")) return
  const file = `${side}.pause.${commit.sessionId}`
  if (!existsSync(file)) return
  const how = readFileSync(file, "utf8").trim().split(" ")
  rmSync(file)
  appendFileSync(side, `pause ${commit.sessionId} 0 ${owner} ${Date.now()}\n`)
  if (how[0] === "stop") process.kill(process.pid, "SIGSTOP")
  else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(how[1]))
}

/** The PostgreSQL store, pausing the process after a commit when the test asks (`pauseAfter`). */
const pausingStore = (options: PgSessionStore.Options, side: string, owner: string) =>
  Layer.effect(
    SessionStore,
    Effect.map(SessionStore, (store) =>
      SessionStore.of({
        ...store,
        append: (commit) => Effect.tap(store.append(commit), () => Effect.sync(() => pauseAfter(side, owner, commit)))
      }))
  ).pipe(Layer.provide(PgSessionStore.layer(options)))

/** A worker process, started by `startWorker`. */
export interface WorkerProcess {
  readonly owner: string
  readonly proc: ChildProcess
  /** Everything it printed, stdout and stderr. */
  readonly output: () => string
  /** Resolves once its output contains `text`; rejects when it exits first or after `timeoutMs`. */
  readonly waitFor: (text: string, timeoutMs?: number) => Promise<void>
  /** Resolves when it has exited, with its code or signal. */
  readonly exited: Promise<number | NodeJS.Signals | null>
}

const script = fileURLToPath(import.meta.url)

/** Starts `poolWorker.ts URL OWNER SIDE` with `env` added to this process's environment; its output also goes to `logFile`. */
export const startWorker = (
  url: string,
  owner: string,
  side: string,
  env: Readonly<Record<string, string>> = {},
  logFile?: string
): WorkerProcess => {
  const proc = spawn(process.execPath, ["--import", "tsx", script, url, owner, side], {
    env: { ...process.env, TROUPE_TELEMETRY_ENABLED: "false", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  const listeners = new Set<() => void>()
  const changed = () => listeners.forEach((listener) => listener())
  if (logFile !== undefined) {
    proc.stdout!.on("data", (data: Buffer | string) => appendFileSync(logFile, data))
    proc.stderr!.on("data", (data: Buffer | string) => appendFileSync(logFile, data))
  }
  proc.stdout!.setEncoding("utf8").on("data", (data: string) => ((output += data), changed()))
  proc.stderr!.setEncoding("utf8").on("data", (data: string) => ((output += data), changed()))
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
    proc.on("exit", (code, signal) => {
      resolve(code ?? signal)
      changed()
    })
  )
  const waitFor = (text: string, timeoutMs = 30_000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(check)
        reject(new Error(`${owner} did not print ${text} in ${timeoutMs} ms\n${output}`))
      }, timeoutMs)
      const check = () => {
        if (output.includes(text)) {
          listeners.delete(check)
          clearTimeout(timer)
          resolve()
        } else if (proc.exitCode !== null || proc.signalCode !== null) {
          listeners.delete(check)
          clearTimeout(timer)
          reject(new Error(`${owner} exited (${proc.exitCode ?? proc.signalCode}) before printing ${text}\n${output}`))
        }
      }
      listeners.add(check)
      check()
    })
  return { owner, proc, output: () => output, waitFor, exited }
}

const main = () => {
  const [url, owner, side] = process.argv.slice(2)
  if (!url || !owner || !side) {
    console.error("usage: poolWorker URL OWNER SIDE_FILE")
    process.exit(2)
  }
  const env = process.env
  const modelMs = Number(env["POOL_MODEL_MS"] ?? "600")
  const say = (line: string) => writeSync(1, `${line}\n`)

  const model = stepModel(owner, side, modelMs)

  const pg = { url, maxConnections: Number(env["POOL_CONNECTIONS"] ?? "4") }
  const host = {
    owner,
    leaseTtl: Duration.millis(Number(env["POOL_TTL_MS"] ?? "2000")),
    ...(env["POOL_CLAIM_MS"] === undefined ? {} : { pollInterval: Duration.millis(Number(env["POOL_CLAIM_MS"])) }),
    maxBusyActors: Number(env["POOL_MAX_BUSY"] ?? "64")
  }
  const tools = Toolkit.layer([step(owner, side)])
  // `Troupe.layerPg`, its store able to pause the process for the tests of decision 0031; or a SQLite file.
  const runtime = url.startsWith("postgres")
    ? Troupe.layer(pausingStore(pg, side, owner), {
      signals: PgStoreSignals.layer({ url }),
      host: Troupe.sharedStoreHost(host),
      tools,
      model
    })
    : Troupe.layerSqlite({ filename: url }, { host, tools, model })

  // The daemon's order (cli/Daemon.ts): listen for signals first, build the runtime, serve until a
  // signal, drain, then close the runtime (the remaining actors release their leases).
  const program = Effect.scoped(Effect.gen(function*() {
    const signal = yield* Signals.listen
    const context = yield* Layer.build(runtime)
    const host = Context.get(context, SessionHost)
    say(`READY ${owner}`)
    yield* signal
    const drained = yield* host.drain(Duration.millis(Number(env["POOL_GRACE_MS"] ?? "0")))
    say(`DRAINED ${drained}`)
  }))
  Effect.runPromise(program).then(
    () => process.exit(0),
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}

// Run only as a script: the test and the bench import its names.
if (process.argv[1] === fileURLToPath(import.meta.url)) main()
