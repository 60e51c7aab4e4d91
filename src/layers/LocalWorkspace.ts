/**
 * `LocalWorkspace`: the `Workspace` port on a local directory. Every path is
 * resolved inside the root: `..` leading out, absolute paths, symlinks whose
 * target leaves the root, NUL bytes, device files, sockets and pipes, and
 * sensitive files (unless `allowSensitive`) are refused with `PathRefused`.
 * Writes are atomic (a temporary file in the same directory renamed over the
 * target). Commands run under `sh -c` in their own process group, killed whole
 * when their scope closes. Content search runs ripgrep when it is on PATH.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { type ChildProcess, spawn as spawnChild } from "node:child_process"
import { randomBytes } from "node:crypto"
import { constants, existsSync, statSync } from "node:fs"
import * as fs from "node:fs/promises"
import { delimiter, dirname, join, relative, sep } from "node:path"
import { PathRefused, WorkspaceFailure } from "../schema/Errors.js"
import * as Workspace from "../services/Workspace.js"
import * as Ripgrep from "./Ripgrep.js"

/** Where the workspace is and what it lets through. */
export interface Options {
  /** The directory; created if missing. */
  readonly root: string
  /** One directory per session tree under `root` (named by the root session's id) instead of `root` itself. */
  readonly perRoot?: boolean | undefined
  /** Let sensitive files (`.env*`, private keys, credentials) through. Default false. */
  readonly allowSensitive?: boolean | undefined
  /** ripgrep's path, or false for the built-in search; default `rg` looked up on PATH. */
  readonly ripgrep?: string | false | undefined
  /** Where `bash` outputs are kept (default `<root>/.troupe/artifacts`). */
  readonly artifacts?: string | undefined
}

/** The path of `name` on PATH, if it is there. */
export const which = (name: string): string | undefined => {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue
    const candidate = join(dir, name)
    try {
      if (statSync(candidate).isFile()) return candidate
    } catch {
      // not in this directory
    }
  }
  return undefined
}

const kindOf = (s: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): Workspace.Kind =>
  s.isSymbolicLink() ? "symlink" : s.isFile() ? "file" : s.isDirectory() ? "directory" : "other"

const codeOf = (error: unknown): string => (typeof error === "object" && error !== null && "code" in error ? String(error.code) : "")

/** A node error as the port's failure. */
const failure = (operation: string, path: string) => (error: unknown): WorkspaceFailure => {
  const code = codeOf(error)
  return new WorkspaceFailure({
    operation,
    path,
    code: code === "ENOENT" ? "not_found" : code === "ENOTDIR" ? "not_a_directory" : code === "EISDIR" ? "not_a_file" : code === "EEXIST" ? "exists" : "io",
    ...(code === "" || code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST" ? {} : { detail: code })
  })
}

const attempt = <A>(operation: string, path: string, run: () => Promise<A>) =>
  Effect.tryPromise({ try: run, catch: failure(operation, path) })

const inside = (root: string, real: string) => real === root || real.startsWith(root + sep)

/** One root directory's handle. */
export const makeHandle = (root: string, options: Omit<Options, "root" | "perRoot"> = {}): Workspace.Handle => {
  const rg = options.ripgrep === false ? undefined : options.ripgrep ?? which("rg")
  const artifacts = options.artifacts ?? join(root, ".troupe", "artifacts")
  const allowSensitive = options.allowSensitive === true
  let realRoot: string | undefined

  const rootReal = Effect.suspend(() =>
    realRoot !== undefined
      ? Effect.succeed(realRoot)
      : attempt("open", ".", () => fs.realpath(root)).pipe(Effect.tap((real) => Effect.sync(() => (realRoot = real))))
  )

  /**
   * The absolute path of `path`, checked: normalized inside the root, its real
   * path (symlinks followed, or its nearest existing ancestor's) inside the real root.
   */
  const resolve = (path: string, operation: string) =>
    Effect.gen(function*() {
      const normal = Workspace.normalize(path)
      if (!normal.ok) return yield* new PathRefused({ path, reason: normal.reason })
      const rel = normal.path
      if (!allowSensitive && Workspace.isSensitivePath(rel)) return yield* new PathRefused({ path, reason: "sensitive" })
      const base = yield* rootReal
      const full = rel === "." ? base : join(base, rel)
      // The deepest part of the path that exists decides where it really is.
      let probe = full
      let rest = ""
      let real: string | undefined
      while (real === undefined) {
        real = yield* Effect.tryPromise({ try: () => fs.realpath(probe), catch: (error) => error }).pipe(
          Effect.catchAll((error) => {
            if (codeOf(error) !== "ENOENT" || probe === base) return Effect.fail(failure(operation, rel)(error))
            rest = rest === "" ? probe.slice(dirname(probe).length + 1) : join(probe.slice(dirname(probe).length + 1), rest)
            probe = dirname(probe)
            return Effect.succeed(undefined)
          })
        )
      }
      if (!inside(base, real)) return yield* new PathRefused({ path, reason: "symlink_escape" })
      const target = rest === "" ? real : join(real, rest)
      const relReal = relative(base, target).split(sep).join("/")
      if (!allowSensitive && relReal !== "" && Workspace.isSensitivePath(relReal)) {
        return yield* new PathRefused({ path, reason: "sensitive" })
      }
      return { rel, full: target, exists: rest === "" }
    })

  const statOf = (path: string, operation: string) =>
    Effect.gen(function*() {
      const at = yield* resolve(path, operation)
      if (!at.exists) return yield* new WorkspaceFailure({ operation, path: at.rel, code: "not_found" })
      const s = yield* attempt(operation, at.rel, () => fs.stat(at.full, { bigint: false }))
      const kind = kindOf(s)
      if (kind === "other") return yield* new PathRefused({ path, reason: "special_file" })
      const stat: Workspace.Stat = {
        path: at.rel,
        kind,
        size: kind === "file" ? s.size : 0,
        mtimeMs: s.mtimeMs,
        version: `${s.ino.toString(36)}-${s.size.toString(36)}-${Math.round(s.mtimeMs * 1000).toString(36)}`
      }
      return { at, stat }
    })

  const list = (path: string) =>
    Effect.gen(function*() {
      const { at, stat } = yield* statOf(path, "list")
      if (stat.kind !== "directory") return yield* new WorkspaceFailure({ operation: "list", path: at.rel, code: "not_a_directory" })
      const entries = yield* attempt("list", at.rel, () => fs.readdir(at.full, { withFileTypes: true }))
      const out: Array<Workspace.Entry> = []
      for (const entry of entries) {
        if (!allowSensitive && Workspace.isSensitiveName(entry.name)) continue
        out.push({ name: entry.name, kind: kindOf(entry) })
      }
      return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    })

  const read = (path: string, range: Workspace.Range = {}) =>
    Effect.gen(function*() {
      const { at, stat } = yield* statOf(path, "read")
      if (stat.kind !== "file") return yield* new WorkspaceFailure({ operation: "read", path: at.rel, code: "not_a_file" })
      const start = Math.max(0, Math.min(range.start ?? 0, stat.size))
      const end = Math.max(start, Math.min(range.end ?? stat.size, stat.size))
      return yield* Effect.acquireUseRelease(
        // The real target resolved above, so a link swapped in meanwhile is the only race left (docs/workspace.md).
        attempt("read", at.rel, () => fs.open(at.full, constants.O_RDONLY)),
        (file) =>
          attempt("read", at.rel, async () => {
            const buffer = Buffer.alloc(end - start)
            let done = 0
            while (done < buffer.length) {
              const { bytesRead } = await file.read(buffer, done, buffer.length - done, start + done)
              if (bytesRead === 0) break
              done += bytesRead
            }
            return new Uint8Array(buffer.buffer, buffer.byteOffset, done)
          }),
        (file) => Effect.promise(() => file.close())
      )
    })

  const write = (path: string, data: Uint8Array | string) =>
    Effect.gen(function*() {
      const at = yield* resolve(path, "write")
      if (at.rel === ".") return yield* new WorkspaceFailure({ operation: "write", path: ".", code: "not_a_file" })
      if (at.exists) {
        const s = yield* attempt("write", at.rel, () => fs.stat(at.full))
        if (!s.isFile()) {
          return s.isDirectory()
            ? yield* new WorkspaceFailure({ operation: "write", path: at.rel, code: "not_a_file" })
            : yield* new PathRefused({ path, reason: "special_file" })
        }
      }
      const dir = dirname(at.full)
      const temp = join(dir, `.${at.full.slice(dir.length + 1)}.${randomBytes(6).toString("hex")}.tmp`)
      yield* attempt("write", at.rel, async () => {
        await fs.mkdir(dir, { recursive: true })
        try {
          await fs.writeFile(temp, data, { flag: "wx" })
          await fs.rename(temp, at.full)
        } catch (error) {
          await fs.rm(temp, { force: true })
          throw error
        }
      })
      return (yield* statOf(at.rel, "write")).stat
    })

  const mkdir = (path: string) =>
    Effect.flatMap(resolve(path, "mkdir"), (at) => attempt("mkdir", at.rel, () => fs.mkdir(at.full, { recursive: true }).then(() => undefined)))

  const remove = (path: string) =>
    Effect.gen(function*() {
      const at = yield* resolve(path, "remove")
      if (at.rel === ".") return yield* new PathRefused({ path, reason: "outside_root" })
      if (!at.exists) return yield* new WorkspaceFailure({ operation: "remove", path: at.rel, code: "not_found" })
      // The link itself, not its target, when the path names a symlink.
      const direct = join(yield* rootReal, at.rel)
      yield* attempt("remove", at.rel, () => fs.rm(direct, { recursive: true }))
    })

  const spawn = (options: Workspace.SpawnOptions) =>
    Effect.gen(function*() {
      const cwd = yield* statOf(options.cwd ?? ".", "spawn").pipe(
        Effect.mapError((error) =>
          error._tag === "PathRefused" ? new WorkspaceFailure({ operation: "spawn", path: options.cwd ?? ".", code: "io", detail: error.message }) : error
        )
      )
      if (cwd.stat.kind !== "directory") {
        return yield* new WorkspaceFailure({ operation: "spawn", path: cwd.at.rel, code: "not_a_directory" })
      }
      return yield* spawnIn(cwd.at.full, options)
    })

  const artifactPath = (id: string) => join(artifacts, `${id.replace(/[^A-Za-z0-9_.-]/g, "_")}.txt`)

  return {
    description: root,
    stat: (path) => Effect.map(statOf(path, "stat"), ({ stat }) => stat),
    list,
    read,
    write,
    mkdir,
    remove,
    search: rg === undefined
      ? undefined
      : (query) =>
        Effect.flatMap(resolve(query.path, "search"), (at) => Effect.flatMap(rootReal, (base) => Ripgrep.search(rg, base, at.rel, query, allowSensitive))),
    spawn,
    putArtifact: (id, text) =>
      attempt("artifact", id, async () => {
        await fs.mkdir(artifacts, { recursive: true })
        // `wx`: an artifact is written once; a second write of the same id keeps the first.
        await fs.writeFile(artifactPath(id), text, { flag: "wx" }).catch((error) => {
          if (codeOf(error) !== "EEXIST") throw error
        })
      }),
    getArtifact: (id) =>
      attempt("artifact", id, () => fs.readFile(artifactPath(id), "utf8")).pipe(
        Effect.catchIf((error) => error.code === "not_found", () => Effect.succeed(undefined))
      )
  }
}

/**
 * The shell that runs a command. A watcher forked first, in the command's
 * process group, blocks on fd 3 (a socket only this host holds); when the host
 * dies, even by SIGKILL, the socket closes and the watcher kills the group, so
 * nothing a command started outlives its host. It ignores every signal but
 * SIGKILL, so the group lives on until it is killed whole (`signalGroup`).
 * Then fd 3 is closed and the shell runs the command itself (`eval`, with no
 * positional parameters, as `sh -c` would; one exec fewer than a second `sh`):
 * it stays the group's leader, its pid the child's and `$$`.
 */
const WRAPPER = `{ trap '' HUP INT QUIT TERM USR1 USR2 PIPE; while read -r _; do :; done; kill -9 0; } <&3 >/dev/null 2>&1 &
exec 3<&-
__troupe_command=$1
shift
eval "unset __troupe_command; $__troupe_command"`

/** Spawns `sh -c command` in its own process group; the group is killed when the scope closes. */
const spawnIn = (cwd: string, options: Workspace.SpawnOptions) => {
  // Once the group has been killed whole it is never signalled again: its id may belong to another group by then.
  // Until then the watcher keeps the group alive, so its id is still this command's.
  let dead = false
  const signalGroup = (pid: number, signal: string) => {
    if (dead) throw Object.assign(new Error("the process group has ended"), { code: "ESRCH" })
    if (signal === "SIGKILL") dead = true
    process.kill(-pid, signal as NodeJS.Signals)
  }
  return Effect.acquireRelease(
    Effect.try({
      try: () =>
        spawnChild("/bin/sh", ["-c", WRAPPER, "/bin/sh", options.command], {
          cwd,
          env: { ...options.env },
          detached: true,
          stdio: ["pipe", "pipe", "pipe", "pipe"]
        }),
      catch: (error) => new WorkspaceFailure({ operation: "spawn", path: ".", code: "io", detail: error instanceof Error ? error.message : "spawn failed" })
    }),
    (child) =>
      Effect.sync(() => {
        // The whole group, every time: a command's own background jobs outlive it otherwise.
        try {
          if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL")
        } catch {
          // already gone
        }
        for (const stream of child.stdio) stream?.destroy()
      })
  ).pipe(Effect.flatMap((child) => attach(child, (signal) => signalGroup(child.pid!, signal))))
}

/** The port's view of a spawned child, once it has started. */
const attach = (child: ChildProcess, signalGroup: (signal: string) => void) =>
  Effect.async<Workspace.Child, WorkspaceFailure>((resume) => {
    let exited: Workspace.ExitStatus | undefined
    const waiters: Array<(status: Workspace.ExitStatus) => void> = []
    child.on("exit", (code, signal) => {
      exited = { code, signal }
      for (const waiter of waiters.splice(0)) waiter(exited)
    })
    child.on("error", (error) => {
      if (child.pid === undefined) {
        resume(Effect.fail(new WorkspaceFailure({ operation: "spawn", path: ".", code: "io", detail: error.message })))
      }
    })
    child.stdin!.on("error", () => {
      // a child that closed its stdin: writes are dropped
    })
    // The watcher's socket carries nothing; an error on it (its group killed) must not reach the process.
    const watcher = child.stdio[3] as NodeJS.EventEmitter | null
    watcher?.on("error", () => {})
    child.on("spawn", () => {
      const pid = child.pid!
      resume(Effect.succeed({
        pid,
        output: Stream.async<Workspace.Output>((emit) => {
          let open = 2
          const done = () => {
            if (--open === 0) void emit.end()
          }
          child.stdout!.on("data", (data: Buffer) => void emit.single({ stream: "stdout", data }))
          child.stderr!.on("data", (data: Buffer) => void emit.single({ stream: "stderr", data }))
          child.stdout!.on("close", done)
          child.stderr!.on("close", done)
        }),
        exit: Effect.async<Workspace.ExitStatus>((resume) => {
          if (exited !== undefined) resume(Effect.succeed(exited))
          else waiters.push((status) => resume(Effect.succeed(status)))
        }),
        write: (data, end) =>
          Effect.async<void, WorkspaceFailure>((resume) => {
            const stdin = child.stdin!
            if (stdin.destroyed || stdin.writableEnded) {
              return resume(Effect.fail(new WorkspaceFailure({ operation: "write", path: "stdin", code: "io", detail: "stdin is closed" })))
            }
            stdin.write(data, (error) => {
              if (error) return resume(Effect.fail(new WorkspaceFailure({ operation: "write", path: "stdin", code: "io", detail: codeOf(error) || error.message })))
              if (end === true) stdin.end()
              resume(Effect.void)
            })
          }),
        signal: (signal) =>
          Effect.try({
            try: () => signalGroup(signal),
            catch: (error) => new WorkspaceFailure({ operation: "signal", path: String(pid), code: "io", detail: codeOf(error) || String(error) })
          })
      }))
    })
  })

/** The workspace on `options.root` (one directory per session tree with `perRoot`). */
export const layerWith = (options: Options): Layer.Layer<Workspace.Workspace> =>
  Layer.sync(Workspace.Workspace, () => {
    const handles = new Map<string, Workspace.Handle>()
    const shared = options.perRoot === true ? undefined : makeHandle(options.root, options)
    return Workspace.Workspace.of({
      forRoot: (rootSessionId) =>
        Effect.gen(function*() {
          if (shared !== undefined) {
            if (!existsSync(options.root)) yield* attempt("open", options.root, () => fs.mkdir(options.root, { recursive: true }))
            return shared
          }
          if (!/^[A-Za-z0-9_-]{1,128}$/.test(rootSessionId)) {
            return yield* new WorkspaceFailure({ operation: "open", path: rootSessionId, code: "io", detail: "not a session id" })
          }
          const known = handles.get(rootSessionId)
          if (known !== undefined) return known
          const dir = join(options.root, rootSessionId)
          yield* attempt("open", dir, () => fs.mkdir(dir, { recursive: true }))
          const handle = makeHandle(dir, { ...options, artifacts: options.artifacts === undefined ? undefined : join(options.artifacts, rootSessionId) })
          handles.set(rootSessionId, handle)
          return handle
        })
    })
  })
