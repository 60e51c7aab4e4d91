/**
 * `find_files` and `search_files`. Search runs the workspace's own engine
 * (`Workspace.Handle.search`: ripgrep locally) when it has one, else the
 * built-in walk here, which gives the same matches: same files (hidden,
 * dependency roots, sensitive files, symlinks, binary and files over
 * `SEARCH_MAX_FILE_BYTES` left out), same smart case, same order.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Glob from "../../internal/Glob.js"
import * as Tool from "../../services/Tool.js"
import * as Workspace from "../../services/Workspace.js"
import { handleOf } from "./Files.js"
import * as Walk from "./Walk.js"

/** `find_files` returns at most this many paths, whatever is asked. */
export const FIND_HARD_CAP = 1000
/** Entries a `find_files` walk visits before it stops and estimates. */
export const SCAN_LIMIT = 200_000

const FindParameters = Schema.Struct({
  pattern: Schema.optionalWith(Schema.String, { default: () => "**" }).annotations({ description: "A glob such as **/*.ts or src/*.json (default: everything)." }),
  path: Schema.optionalWith(Schema.String, { default: () => "." }).annotations({ description: "The directory to look under (default: the root)." }),
  limit: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.between(1, FIND_HARD_CAP)), { default: () => 100 }),
  includeHidden: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  includeDependencies: Schema.optionalWith(Schema.Boolean, { default: () => false }).annotations({ description: "Expand node_modules, .git, .venv… instead of summarizing them." })
})

const FindResult = Schema.Struct({
  paths: Schema.Array(Schema.String),
  matched: Schema.Number,
  truncated: Schema.Boolean,
  estimated: Schema.Boolean,
  scanned: Schema.Number,
  skipped: Schema.Array(Schema.Struct({ path: Schema.String, entries: Schema.Number }))
})

/** `find_files`: paths matching a glob, at most `limit` (100 by default), dependency roots summarized. */
export const findFiles = Tool.make({
  name: "find_files",
  description: "Finds files by glob under the workspace root. Returns at most `limit` paths (default 100) and how many matched; " +
    "dependency and cache directories (node_modules, .git, .venv…) are summarized, not expanded, unless includeDependencies.",
  parameters: FindParameters,
  success: FindResult,
  metadata: { sideEffect: "none", idempotency: "supported", capabilities: ["filesystem.read"], parallel: true },
  handler: (args, context) =>
    Effect.gen(function*() {
      const handle = yield* handleOf(context)
      const glob = Glob.compile(args.pattern)
      const paths: Array<string> = []
      let matched = 0
      const summary = yield* Walk.walk(handle, args.path, { ...args, scanLimit: SCAN_LIMIT }, (path, entry) => {
        if (entry.kind !== "directory" && glob.test(path)) {
          matched++
          if (paths.length < args.limit) paths.push(path)
        }
        return Effect.succeed(true)
      })
      return { paths, matched, truncated: matched > paths.length, estimated: summary.stopped, scanned: summary.scanned, skipped: summary.skipped }
    })
})

/** Whether smart case makes `pattern` case sensitive: an upper-case letter outside escapes. */
export const smartSensitive = (pattern: string): boolean => {
  const plain = pattern.replace(/\\./g, "")
  return plain !== plain.toLowerCase()
}

/** The built-in search: walks the tree through the port, the same files and order as ripgrep. */
export const builtinSearch = (handle: Workspace.Handle, query: Workspace.SearchQuery) =>
  Effect.gen(function*() {
    const sensitive = query.caseSensitive ?? smartSensitive(query.pattern)
    const source = query.literal ? query.pattern.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : query.pattern
    const regex = yield* Effect.try({
      try: () => new RegExp(source, sensitive ? "" : "i"),
      catch: () => new Error(`invalid regular expression ${JSON.stringify(query.pattern)}`)
    })
    const globs = query.globs.map(Glob.compile)
    const matches: Array<Workspace.SearchMatch> = []
    let truncated = false
    const decoder = new TextDecoder()
    const searchFile = (path: string) =>
      Effect.gen(function*() {
        if (!Glob.matchesAny(globs, path)) return true
        // One read, no stat first: a file is searched whole or, past the limit, skipped (as ripgrep's --max-filesize).
        const bytes = yield* handle.read(path, { end: Workspace.SEARCH_MAX_FILE_BYTES + 1 })
        if (bytes.length > Workspace.SEARCH_MAX_FILE_BYTES) return true
        if (bytes.includes(0)) return true
        const lines = decoder.decode(bytes).split("\n")
        if (lines[lines.length - 1] === "") lines.pop()
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i]!.replace(/\r$/, "")
          if (!regex.test(line)) continue
          if (matches.length === query.maxMatches) {
            truncated = true
            return false
          }
          matches.push({ path, line: i + 1, text: line.slice(0, Workspace.SEARCH_LINE_LIMIT) })
        }
        return true
      })
    const start = yield* handle.stat(query.path)
    if (start.kind === "file") yield* searchFile(start.path)
    else {
      yield* Walk.walk(handle, start.path, { ...query, scanLimit: Number.MAX_SAFE_INTEGER }, (path, entry) =>
        entry.kind === "file" ? searchFile(path).pipe(Effect.catchTag("PathRefused", () => Effect.succeed(true))) : Effect.succeed(true))
    }
    return { matches, truncated, engine: "builtin" } satisfies Workspace.SearchResult
  })

const SearchParameters = Schema.Struct({
  pattern: Schema.String.annotations({ description: "A regular expression (or literal text with literal: true)." }),
  literal: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  caseSensitive: Schema.optional(Schema.Boolean).annotations({ description: "Default: smart case (insensitive unless the pattern has upper case)." }),
  path: Schema.optionalWith(Schema.String, { default: () => "." }),
  globs: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  includeHidden: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  includeDependencies: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  maxMatches: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)), { default: () => 100 })
})

const SearchResultSchema = Schema.Struct({
  matches: Schema.Array(Schema.Struct({ path: Schema.String, line: Schema.Number, text: Schema.String })),
  truncated: Schema.Boolean,
  engine: Schema.String
})

/** `search_files`: lines matching a pattern, with ripgrep where the workspace has it. */
export const searchFiles = Tool.make({
  name: "search_files",
  description: "Searches file contents under the workspace root for a regular expression (smart case). " +
    "Hidden files and dependency directories are skipped unless included; at most maxMatches lines (default 100).",
  parameters: SearchParameters,
  success: SearchResultSchema,
  metadata: { sideEffect: "none", idempotency: "supported", capabilities: ["filesystem.read"], parallel: true },
  handler: (args, context) =>
    Effect.flatMap(handleOf(context), (handle) => (handle.search ?? ((q) => builtinSearch(handle, q)))(args))
})
