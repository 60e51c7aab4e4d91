/**
 * `MemoryWorkspace`: the `Workspace` port in memory, for tests and ephemeral
 * runs. Paths are checked as on disk (`..` leading out, absolute paths, NUL
 * bytes, sensitive files unless `allowSensitive`); there are no symlinks or
 * devices. Nothing can run in it: `spawn` fails `unsupported`, so `bash` and
 * `process.*` report that to the model. Search is the tools' built-in walk.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { PathRefused, WorkspaceFailure } from "../schema/Errors.js"
import * as Workspace from "../services/Workspace.js"

/** What the workspace starts with and lets through. */
export interface Options {
  /** Files by path (relative to the root), text or bytes. */
  readonly files?: Readonly<Record<string, string | Uint8Array>> | undefined
  /** One tree of files per session tree instead of one for all. */
  readonly perRoot?: boolean | undefined
  readonly allowSensitive?: boolean | undefined
}

interface File {
  readonly data: Uint8Array
  readonly mtimeMs: number
  readonly version: number
}

const encoder = new TextEncoder()
const parentOf = (path: string) => (path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".")

/** One tree's handle. */
export const makeHandle = (options: Omit<Options, "perRoot"> = {}): Workspace.Handle => {
  const files = new Map<string, File>()
  const dirs = new Set<string>(["."])
  const artifacts = new Map<string, string>()
  const allowSensitive = options.allowSensitive === true
  let clock = 0

  const resolve = (path: string) => {
    const normal = Workspace.normalize(path)
    if (!normal.ok) return Effect.fail(new PathRefused({ path, reason: normal.reason }))
    if (!allowSensitive && Workspace.isSensitivePath(normal.path)) return Effect.fail(new PathRefused({ path, reason: "sensitive" }))
    return Effect.succeed(normal.path)
  }
  const missing = (operation: string, path: string) => new WorkspaceFailure({ operation, path, code: "not_found" })
  const addDirs = (path: string) => {
    for (let dir = parentOf(path); !dirs.has(dir); dir = parentOf(dir)) dirs.add(dir)
  }
  const put = (path: string, data: Uint8Array) => {
    addDirs(path)
    files.set(path, { data, mtimeMs: Date.now(), version: ++clock })
  }
  for (const [path, data] of Object.entries(options.files ?? {})) {
    const normal = Workspace.normalize(path)
    if (normal.ok) put(normal.path, typeof data === "string" ? encoder.encode(data) : data)
  }

  const stat = (path: string) =>
    Effect.flatMap(resolve(path), (rel): Effect.Effect<Workspace.Stat, WorkspaceFailure> => {
      const file = files.get(rel)
      if (file !== undefined) {
        return Effect.succeed({ path: rel, kind: "file", size: file.data.length, mtimeMs: file.mtimeMs, version: `m${file.version}` })
      }
      return dirs.has(rel)
        ? Effect.succeed({ path: rel, kind: "directory", size: 0, mtimeMs: 0, version: "dir" })
        : Effect.fail(missing("stat", rel))
    })

  return {
    description: "memory",
    stat,
    list: (path) =>
      Effect.flatMap(resolve(path), (rel) => {
        if (files.has(rel)) return Effect.fail(new WorkspaceFailure({ operation: "list", path: rel, code: "not_a_directory" }))
        if (!dirs.has(rel)) return Effect.fail(missing("list", rel))
        const prefix = rel === "." ? "" : `${rel}/`
        const out: Array<Workspace.Entry> = []
        const child = (p: string) => p !== "." && p.startsWith(prefix) && !p.slice(prefix.length).includes("/")
        for (const dir of dirs) if (child(dir)) out.push({ name: dir.slice(prefix.length), kind: "directory" })
        for (const file of files.keys()) if (child(file)) out.push({ name: file.slice(prefix.length), kind: "file" })
        return Effect.succeed(
          out
            .filter((e) => allowSensitive || !Workspace.isSensitiveName(e.name))
            .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        )
      }),
    read: (path, range = {}) =>
      Effect.flatMap(resolve(path), (rel) => {
        const file = files.get(rel)
        if (file === undefined) {
          return Effect.fail(dirs.has(rel) ? new WorkspaceFailure({ operation: "read", path: rel, code: "not_a_file" }) : missing("read", rel))
        }
        const start = Math.max(0, Math.min(range.start ?? 0, file.data.length))
        return Effect.succeed(file.data.slice(start, Math.max(start, Math.min(range.end ?? file.data.length, file.data.length))))
      }),
    write: (path, data) =>
      Effect.flatMap(resolve(path), (rel) => {
        if (rel === "." || dirs.has(rel)) return Effect.fail(new WorkspaceFailure({ operation: "write", path: rel, code: "not_a_file" }))
        for (let dir = parentOf(rel); dir !== "."; dir = parentOf(dir)) {
          if (files.has(dir)) return Effect.fail(new WorkspaceFailure({ operation: "write", path: dir, code: "not_a_directory" }))
        }
        put(rel, typeof data === "string" ? encoder.encode(data) : data.slice())
        return stat(rel)
      }),
    mkdir: (path) =>
      Effect.flatMap(resolve(path), (rel) => {
        if (files.has(rel)) return Effect.fail(new WorkspaceFailure({ operation: "mkdir", path: rel, code: "exists" }))
        addDirs(`${rel}/x`)
        return Effect.void
      }),
    remove: (path) =>
      Effect.flatMap(resolve(path), (rel): Effect.Effect<void, Workspace.Failure> => {
        if (rel === ".") return Effect.fail(new PathRefused({ path, reason: "outside_root" }))
        if (files.delete(rel)) return Effect.void
        if (!dirs.has(rel)) return Effect.fail(missing("remove", rel))
        for (const p of [...files.keys()]) if (p.startsWith(`${rel}/`)) files.delete(p)
        for (const d of [...dirs]) if (d === rel || d.startsWith(`${rel}/`)) dirs.delete(d)
        return Effect.void
      }),
    search: undefined,
    spawn: () => Effect.fail(new WorkspaceFailure({ operation: "spawn", path: ".", code: "unsupported", detail: "a memory workspace runs no commands" })),
    putArtifact: (id, text) =>
      Effect.sync(() => {
        if (!artifacts.has(id)) artifacts.set(id, text)
      }),
    getArtifact: (id) => Effect.sync(() => artifacts.get(id))
  }
}

/** A memory workspace with `options.files`. */
export const layerWith = (options: Options = {}): Layer.Layer<Workspace.Workspace> =>
  Layer.sync(Workspace.Workspace, () => {
    const shared = options.perRoot === true ? undefined : makeHandle(options)
    const handles = new Map<string, Workspace.Handle>()
    return Workspace.Workspace.of({
      forRoot: (rootSessionId) =>
        Effect.sync(() => {
          if (shared !== undefined) return shared
          let handle = handles.get(rootSessionId)
          if (handle === undefined) handles.set(rootSessionId, handle = makeHandle(options))
          return handle
        })
    })
  })

/** An empty memory workspace. */
export const layer: Layer.Layer<Workspace.Workspace> = layerWith()
