/**
 * The `Workspace` port: the files and the processes a session's built-in
 * tools work on (DESIGN §10). Every file, search, shell and process tool goes
 * through it and never touches a file system itself, so a workspace is
 * swappable like storage: a local directory (`LocalWorkspace`), memory
 * (`MemoryWorkspace`), or a remote layer (S3, a sandbox) that provides the
 * same operations where its files are.
 *
 * The port, not each tool, refuses what is not the workspace's to give: a path
 * outside the root (`..`, absolute, a symlink leading out), a NUL byte, a
 * device or other special file, a sensitive file (`.env*`, private keys,
 * credential files) unless the run opted in (`PathRefused`).
 *
 * A workspace serves roots: `forRoot(rootSessionId)` is the tree of files
 * the sessions of one tree share (a child works in its root's workspace); a
 * layer may give every root the same directory or one each.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { PathRefused, WorkspaceFailure } from "../schema/Errors.js"

/** What a path names. */
export type Kind = "file" | "directory" | "symlink" | "other"

/** One entry of a directory listing. */
export interface Entry {
  readonly name: string
  /** What the entry itself is: a symlink is not followed (walks do not descend into one). */
  readonly kind: Kind
}

/** What `stat` tells of a path. */
export interface Stat {
  /** The path as given, normalized (relative to the root, `/`-separated; `.` for the root). */
  readonly path: string
  readonly kind: Kind
  readonly size: number
  readonly mtimeMs: number
  /** Changes whenever the content may have changed (size, mtime, inode): what a `read_file` cursor names. */
  readonly version: string
}

/** A byte range of a read: `[start, end)`, both optional. */
export interface Range {
  readonly start?: number | undefined
  readonly end?: number | undefined
}

/** A content search (`search_files`), run by the workspace where its files are. */
export interface SearchQuery {
  /** A regular expression, or literal text with `literal`. */
  readonly pattern: string
  readonly literal: boolean
  /** True / false; `undefined` is smart case: insensitive unless the pattern has an upper-case letter. */
  readonly caseSensitive?: boolean | undefined
  /** The directory (or file) searched, relative to the root. */
  readonly path: string
  /** Globs a file's path (relative to the root) must match, one of them; empty: every file. */
  readonly globs: ReadonlyArray<string>
  /** Search hidden files and directories (`.name`) too. */
  readonly includeHidden: boolean
  /** Search dependency and cache roots (`node_modules`, `.git`, `.venv`…) too. */
  readonly includeDependencies: boolean
  /** Stop after this many matching lines. */
  readonly maxMatches: number
}

/** One matching line. */
export interface SearchMatch {
  readonly path: string
  /** 1-based. */
  readonly line: number
  /** The line, cut to `SEARCH_LINE_LIMIT` characters. */
  readonly text: string
}

/** What a search found, in path order (directory by directory, names sorted), then line order. */
export interface SearchResult {
  readonly matches: ReadonlyArray<SearchMatch>
  /** More lines matched than `maxMatches`. */
  readonly truncated: boolean
  /** Which engine ran: `ripgrep` or the `builtin` walk. */
  readonly engine: string
}

/** One piece of a child's output. */
export interface Output {
  readonly stream: "stdout" | "stderr"
  readonly data: Uint8Array
}

/** How a child ended. */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
}

/** A command to run in the workspace: `sh -c command`, in `cwd` (relative to the root). */
export interface SpawnOptions {
  readonly command: string
  readonly cwd?: string | undefined
  /** The whole environment of the child: nothing of the host's is added. */
  readonly env: Readonly<Record<string, string>>
}

/**
 * A running child. Its whole process group is killed when the scope it was
 * spawned in closes (a timeout, an interrupt, a closed session), and when the
 * host itself dies: nothing a command starts outlives the host that started it.
 */
export interface Child {
  readonly pid: number
  /** Its stdout and stderr as they come; ends when both close. */
  readonly output: Stream.Stream<Output>
  /** Waits for it to exit. */
  readonly exit: Effect.Effect<ExitStatus>
  /** Writes to its stdin (`end` closes it). */
  readonly write: (data: string, end?: boolean) => Effect.Effect<void, WorkspaceFailure>
  /** Sends a signal to its whole process group. */
  readonly signal: (signal: string) => Effect.Effect<void, WorkspaceFailure>
}

/** What a workspace operation fails with: a refused path, or a failure on an accepted one. */
export type Failure = PathRefused | WorkspaceFailure

/** One root's files and processes. */
export interface Handle {
  /** Describes the root for people (`/home/me/project`, `memory`). */
  readonly description: string
  readonly stat: (path: string) => Effect.Effect<Stat, Failure>
  /** A directory's entries, sorted by name (sensitive ones left out unless the run opted in). */
  readonly list: (path: string) => Effect.Effect<ReadonlyArray<Entry>, Failure>
  /** A file's bytes, or a range of them. */
  readonly read: (path: string, range?: Range) => Effect.Effect<Uint8Array, Failure>
  /** Replaces a file atomically (a temporary file renamed over it), creating its directories; its new stat. */
  readonly write: (path: string, data: Uint8Array | string) => Effect.Effect<Stat, Failure>
  readonly mkdir: (path: string) => Effect.Effect<void, Failure>
  /** Removes a file, or a directory with everything under it. */
  readonly remove: (path: string) => Effect.Effect<void, Failure>
  /** A search run where the files are (ripgrep); `undefined`: the tools walk the tree through `list` and `read`. */
  readonly search: ((query: SearchQuery) => Effect.Effect<SearchResult, Failure>) | undefined
  /** Starts a command in the workspace (a `WorkspaceFailure` `unsupported` where nothing can run). */
  readonly spawn: (options: SpawnOptions) => Effect.Effect<Child, WorkspaceFailure, Scope.Scope>
  /** Keeps `text` under `id`, immutably (a `bash` call's whole output). */
  readonly putArtifact: (id: string, text: string) => Effect.Effect<void, WorkspaceFailure>
  /** The text kept under `id`, if any. */
  readonly getArtifact: (id: string) => Effect.Effect<string | undefined, WorkspaceFailure>
}

/** The port: the workspace of each session tree, by its root session's id. */
export class Workspace extends Context.Tag("troupe/Workspace")<
  Workspace,
  {
    readonly forRoot: (rootSessionId: string) => Effect.Effect<Handle, WorkspaceFailure>
  }
>() {}

/** How many characters of a matching line a search keeps. */
export const SEARCH_LINE_LIMIT = 300

/** Files larger than this are not searched (by either engine). */
export const SEARCH_MAX_FILE_BYTES = 10 * 1024 * 1024

/** The longest path a workspace accepts, in characters. */
export const MAX_PATH_LENGTH = 4096

/** Directory names of dependency and cache roots: summarized by `find_files`, skipped by `search_files`. */
export const DEPENDENCY_ROOTS: ReadonlyArray<string> = [
  "node_modules",
  ".git",
  ".hg",
  ".svn",
  ".venv",
  "venv",
  "__pycache__",
  ".mypy_cache",
  ".pytest_cache",
  ".tox",
  ".cache",
  ".next",
  ".turbo",
  "bower_components",
  "target"
]

const sensitiveNames = [
  /^\.env(\..*)?$/,
  /^id_(rsa|dsa|ecdsa|ed25519)(\.pub)?$/,
  /\.(pem|key|p12|pfx|jks|keystore)$/,
  /^\.(netrc|pgpass|npmrc|pypirc)$/,
  /^credentials(\.json)?$/,
  /^\.htpasswd$/,
  /^secrets?\.(json|ya?ml|toml)$/
]

/** Whether a file name (the last segment of a path) names a sensitive file: `.env*`, private keys, credential files. */
export const isSensitiveName = (name: string): boolean => sensitiveNames.some((pattern) => pattern.test(name))

/** Whether any segment of a `/`-separated path is sensitive (a `.env` directory hides what is in it too). */
export const isSensitivePath = (path: string): boolean => path.split("/").some(isSensitiveName)

/** Globs ripgrep is given to leave sensitive files out, the same names as `isSensitiveName`. */
export const SENSITIVE_GLOBS: ReadonlyArray<string> = [
  ".env",
  ".env.*",
  "id_rsa",
  "id_rsa.pub",
  "id_dsa",
  "id_dsa.pub",
  "id_ecdsa",
  "id_ecdsa.pub",
  "id_ed25519",
  "id_ed25519.pub",
  "*.pem",
  "*.key",
  "*.p12",
  "*.pfx",
  "*.jks",
  "*.keystore",
  ".netrc",
  ".pgpass",
  ".npmrc",
  ".pypirc",
  "credentials",
  "credentials.json",
  ".htpasswd",
  "secret.json",
  "secrets.json",
  "secret.yaml",
  "secrets.yaml",
  "secret.yml",
  "secrets.yml",
  "secret.toml",
  "secrets.toml"
]

/**
 * A path given to the port, checked and normalized: relative, `/`-separated,
 * no NUL, no `..` leading out, not too long. `.` for the root. Pure; the
 * layers check symlinks and file kinds on top.
 */
export const normalize = (path: string): { readonly ok: true; readonly path: string } | { readonly ok: false; readonly reason: PathRefused["reason"] } => {
  if (path.includes("\0")) return { ok: false, reason: "nul_byte" }
  if (path.length > MAX_PATH_LENGTH) return { ok: false, reason: "too_long" }
  if (path.startsWith("/") || path.startsWith("\\") || /^[A-Za-z]:[\\/]/.test(path) || path.startsWith("~")) {
    return { ok: false, reason: "absolute" }
  }
  const segments: Array<string> = []
  for (const segment of path.replace(/\\/g, "/").split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      if (segments.length === 0) return { ok: false, reason: "outside_root" }
      segments.pop()
    } else segments.push(segment)
  }
  return { ok: true, path: segments.length === 0 ? "." : segments.join("/") }
}

/** Compares two `/`-separated paths segment by segment: the order of a walk that sorts each directory's names. */
export const comparePaths = (a: string, b: string): number => {
  const x = a.split("/")
  const y = b.split("/")
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1
  }
  return x.length - y.length
}
