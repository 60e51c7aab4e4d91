/**
 * Running the real `troupe` program in tests: `node bin/troupe.mjs …` as a
 * child process, in a temporary `TROUPE_HOME`, with an environment cleaned of
 * the developer's own `TROUPE_*` and `OTEL_*` settings. Every process started
 * here belongs to the test's scope and is killed with it if still alive.
 */
import { Data, Deferred, Duration, Effect, type Scope } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const bin = fileURLToPath(new URL("../../bin/troupe.mjs", import.meta.url))

/** How a process ended, and what it wrote. */
export interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** A process did not do what the test waited for. */
export class ProcessError extends Data.TaggedError("ProcessError")<{ readonly message: string }> {}

/** A short temporary directory (unix socket paths must stay under ~107 bytes), removed with the scope. */
export const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "tc-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** The environment of a child: `TROUPE_HOME`, telemetry off, no colours, and `extra` (`undefined` removes a key). */
export const envFor = (
  home: string,
  extra: Readonly<Record<string, string | undefined>> = {}
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || key.startsWith("TROUPE_") || key.startsWith("OTEL_")) continue
    env[key] = value
  }
  Object.assign(env, { TROUPE_HOME: home, TROUPE_TELEMETRY_ENABLED: "false", NO_COLOR: "1" })
  for (const [key, value] of Object.entries(extra)) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }
  return env
}

/** A running child of the program. */
export interface Child {
  readonly proc: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Waits until stderr (or stdout) contains `text`. */
  readonly waitFor: (text: string | RegExp, stream?: "stderr" | "stdout", timeout?: Duration.DurationInput) => Effect.Effect<void, ProcessError>
  /** Waits for the process to end. */
  readonly exit: Effect.Effect<Result>
}

/**
 * Whether terminal tests run: they need util-linux's `script(1)` (Debian has
 * it; macOS's BSD `script` takes other flags). Outside CI they are skipped with
 * a printed reason when it is missing; in CI (`CI=true`) they run and fail.
 */
export const hasTerminal: boolean = (() => {
  if (process.env.CI === "true" || process.env.CI === "1") return true
  const found = spawnSync("script", ["--version"], { encoding: "utf8" })
  const ok = found.status === 0 && /util-linux/.test(found.stdout)
  if (!ok) console.warn("[troupe tests] skipping terminal tests: util-linux script(1) is not installed")
  return ok
})()

/** A word quoted for `sh`. */
const shellWord = (word: string) => `'${word.replace(/'/g, "'\\''")}'`

/**
 * Starts `troupe ARGS`; it is killed (SIGKILL) when the scope closes if it is
 * still running. With `terminal`, it runs under `script(1)` on a pseudo
 * terminal: stdin, stdout and stderr are that terminal, everything it writes
 * arrives on `stdout` (with the terminal's `\r\n`), and what the test writes
 * to `proc.stdin` is typed at it.
 */
export const start = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  options: { readonly stdin?: string; readonly terminal?: boolean } = {}
): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<Result>()
    const command = options.terminal
      ? ["script", ["-qfec", [process.execPath, bin, ...args].map(shellWord).join(" "), "/dev/null"]] as const
      : [process.execPath, [bin, ...args]] as const
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(command[0], command[1], { env, stdio: ["pipe", "pipe", "pipe"] })),
      (proc) => Effect.sync(() => (proc.exitCode === null && proc.signalCode === null ? void proc.kill("SIGKILL") : undefined))
    )
    let stdout = ""
    let stderr = ""
    const listeners = new Set<() => void>()
    const changed = () => listeners.forEach((listener) => listener())
    proc.stdout!.setEncoding("utf8").on("data", (data: string) => {
      stdout += data
      changed()
    })
    proc.stderr!.setEncoding("utf8").on("data", (data: string) => {
      stderr += data
      changed()
    })
    proc.on("close", (code, signal) => {
      Deferred.unsafeDone(exited, Effect.succeed({ code, signal, stdout, stderr }))
      changed()
    })
    if (options.stdin !== undefined) proc.stdin!.end(options.stdin)
    const waitFor = (text: string | RegExp, stream: "stderr" | "stdout" = "stderr", timeout: Duration.DurationInput = "20 seconds") =>
      Effect.async<void, ProcessError>((resume) => {
        const check = () => {
          const seen = stream === "stderr" ? stderr : stdout
          if (typeof text === "string" ? seen.includes(text) : text.test(seen)) {
            listeners.delete(check)
            resume(Effect.void)
          } else if (proc.exitCode !== null || proc.signalCode !== null) {
            listeners.delete(check)
            resume(Effect.fail(new ProcessError({
              message: `troupe ${args.join(" ")} exited (${proc.exitCode ?? proc.signalCode}) before writing ${text}\nstdout: ${stdout}\nstderr: ${stderr}`
            })))
          }
        }
        listeners.add(check)
        check()
        return Effect.sync(() => listeners.delete(check))
      }).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new ProcessError({ message: `troupe ${args.join(" ")} did not write ${text}\nstdout: ${stdout}\nstderr: ${stderr}` })
        })
      )
    return { proc, stdout: () => stdout, stderr: () => stderr, waitFor, exit: Deferred.await(exited) }
  })

/** Runs `troupe ARGS` to its end (killed after `timeout`). */
export const troupe = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  options: { readonly stdin?: string; readonly timeout?: Duration.DurationInput } = {}
): Effect.Effect<Result> =>
  Effect.scoped(Effect.gen(function*() {
    const child = yield* start(args, env, options)
    return yield* child.exit.pipe(
      Effect.timeoutFail({
        duration: options.timeout ?? "30 seconds",
        onTimeout: () => new ProcessError({ message: `troupe ${args.join(" ")} did not end\nstdout: ${child.stdout()}\nstderr: ${child.stderr()}` })
      }),
      Effect.orDie
    )
  }))

/** Runs `troupe ARGS` and fails the test unless it exits 0. */
export const ok = (args: ReadonlyArray<string>, env: Record<string, string>, options: { readonly stdin?: string } = {}) =>
  Effect.flatMap(troupe(args, env, options), (result) =>
    result.code === 0
      ? Effect.succeed(result)
      : Effect.die(new Error(`troupe ${args.join(" ")} exited ${result.code ?? result.signal}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`)))

/** A `troupe serve` that has printed its addresses. */
export interface Daemon extends Child {
  /** Sends `signal` and waits for the process to end; `elapsed` is the time it took. */
  readonly stop: (signal?: NodeJS.Signals) => Effect.Effect<Result & { readonly elapsed: Duration.Duration }>
}

/** Starts `troupe serve ARGS` and waits until it listens. */
export const serve = (
  args: ReadonlyArray<string>,
  env: Record<string, string>
): Effect.Effect<Daemon, ProcessError, Scope.Scope> =>
  Effect.gen(function*() {
    const child = yield* start(["serve", ...args], env)
    // The store line follows the last listener line.
    yield* child.waitFor("troupe: store ")
    return {
      ...child,
      stop: (signal = "SIGTERM") =>
        Effect.gen(function*() {
          child.proc.kill(signal)
          const [elapsed, result] = yield* Effect.timed(child.exit.pipe(
            Effect.timeoutFail({
              duration: "30 seconds",
              onTimeout: () => new ProcessError({ message: `serve did not stop\nstderr: ${child.stderr()}` })
            }),
            Effect.orDie
          ))
          return { ...result, elapsed }
        })
    }
  })

/** The JSON values of a text of JSON lines. */
export const jsonLines = (text: string): ReadonlyArray<unknown> =>
  text.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line))

/**
 * The pid of the program itself under `script(1)` (a terminal child's
 * `proc` is `script`, whose shell starts node): a signal sent to it comes
 * from outside, as `kill -INT` would, not from the terminal's Ctrl-C key.
 */
export const programPid = (child: Child): number | undefined => {
  const rows = spawnSync("ps", ["-e", "-o", "pid=,ppid=,args="], { encoding: "utf8" }).stdout.split("\n").flatMap((line) => {
    const match = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line)
    return match === null ? [] : [{ pid: Number(match[1]), ppid: Number(match[2]), args: match[3]! }]
  })
  const below = new Set([child.proc.pid!])
  for (let grew = true; grew;) {
    grew = false
    for (const row of rows) if (below.has(row.ppid) && !below.has(row.pid)) grew = below.add(row.pid) !== undefined
  }
  return rows.find((row) => below.has(row.pid) && row.args.startsWith(process.execPath) && row.args.includes(bin))?.pid
}
