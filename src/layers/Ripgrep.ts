/**
 * `search_files` on ripgrep: the `Workspace.search` hook of `LocalWorkspace`.
 * It is asked for exactly what the built-in walk gives (`tools/SearchFiles`):
 * no ignore files, no symlinks followed, hidden files, dependency roots and
 * sensitive files left out unless asked, files over
 * `Workspace.SEARCH_MAX_FILE_BYTES` and binary files skipped, paths in walk
 * order (`--sort path`), lines cut to `Workspace.SEARCH_LINE_LIMIT`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as Glob from "../internal/Glob.js"
import { WorkspaceFailure } from "../schema/Errors.js"
import * as Workspace from "../services/Workspace.js"

/** ripgrep's arguments for `query` on `rel` (relative to the root, the child's cwd). */
export const argsOf = (rel: string, query: Workspace.SearchQuery, allowSensitive: boolean): ReadonlyArray<string> => {
  const args = [
    "--no-config",
    "--no-ignore",
    "--no-messages",
    "--null",
    "--line-number",
    "--no-heading",
    "--with-filename",
    "--color=never",
    "--sort=path",
    `--max-filesize=${Workspace.SEARCH_MAX_FILE_BYTES}`,
    query.caseSensitive === undefined ? "--smart-case" : query.caseSensitive ? "--case-sensitive" : "--ignore-case"
  ]
  if (query.literal) args.push("--fixed-strings")
  if (query.includeHidden) args.push("--hidden")
  if (!query.includeDependencies) for (const name of Workspace.DEPENDENCY_ROOTS) args.push(`--glob=!${name}`)
  if (!allowSensitive) for (const glob of Workspace.SENSITIVE_GLOBS) args.push(`--glob=!${glob}`)
  args.push("--regexp", query.pattern, "--", rel)
  return args
}

/** Runs ripgrep at `base` and reads its matches until `maxMatches` + 1 (then stops it). */
export const search = (
  rg: string,
  base: string,
  rel: string,
  query: Workspace.SearchQuery,
  allowSensitive: boolean
): Effect.Effect<Workspace.SearchResult, WorkspaceFailure> => {
  const globs = query.globs.map(Glob.compile)
  return Effect.async<Workspace.SearchResult, WorkspaceFailure>((resume) => {
    const child = spawn(rg, argsOf(rel, query, allowSensitive), { cwd: base, stdio: ["ignore", "pipe", "pipe"] })
    const matches: Array<Workspace.SearchMatch> = []
    let truncated = false
    let pending: Buffer = Buffer.alloc(0)
    let stderr = ""
    let settled = false
    const finish = (result: Effect.Effect<Workspace.SearchResult, WorkspaceFailure>) => {
      if (settled) return
      settled = true
      resume(result)
    }
    const take = (line: Buffer) => {
      const nul = line.indexOf(0)
      if (nul === -1) return
      const path = line.subarray(0, nul).toString("utf8").replace(/^\.\//, "")
      const rest = line.subarray(nul + 1).toString("utf8")
      const colon = rest.indexOf(":")
      if (colon === -1 || !/^\d+$/.test(rest.slice(0, colon))) return
      if (!Glob.matchesAny(globs, path)) return
      if (matches.length === query.maxMatches) {
        truncated = true
        child.kill("SIGKILL")
        return
      }
      const text = rest.slice(colon + 1).replace(/\r$/, "").slice(0, Workspace.SEARCH_LINE_LIMIT)
      matches.push({ path, line: Number(rest.slice(0, colon)), text })
    }
    child.stdout.on("data", (chunk: Buffer) => {
      if (truncated) return
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      let newline: number
      while (!truncated && (newline = pending.indexOf(10)) !== -1) {
        take(pending.subarray(0, newline))
        pending = pending.subarray(newline + 1)
      }
    })
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 2000) stderr += chunk.toString("utf8")
    })
    child.on("error", (error) =>
      finish(Effect.fail(new WorkspaceFailure({ operation: "search", path: rel, code: "io", detail: error.message }))))
    child.on("close", (code) => {
      if (!truncated && code !== 0 && code !== 1) {
        return finish(Effect.fail(new WorkspaceFailure({ operation: "search", path: rel, code: "io", detail: stderr.trim().slice(0, 500) || `ripgrep exited ${code}` })))
      }
      matches.sort((a, b) => Workspace.comparePaths(a.path, b.path) || a.line - b.line)
      finish(Effect.succeed({ matches, truncated, engine: "ripgrep" }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })
}
