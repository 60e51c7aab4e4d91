/**
 * Globs over `/`-separated relative paths, the subset tools and people use:
 * `*` (within a segment), `**` (any number of segments), `?`, `[abc]`,
 * `[!abc]`, `{a,b}`. A glob without a `/` matches the last segment anywhere
 * (`*.ts` finds `src/a.ts`), as ripgrep's and git's do. Pure.
 *
 * @since 0.1.0
 */

/** A compiled glob. */
export interface Glob {
  readonly source: string
  readonly test: (path: string) => boolean
}

const escape = (c: string) => (/[.+^$()|\\\]{}[]/.test(c) ? `\\${c}` : c)

/** The regular expression source of one glob (whole-path match). */
const translate = (glob: string): string => {
  let out = ""
  let depth = 0
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!
    if (c === "*") {
      if (glob[i + 1] === "*") {
        // `**/` is any number of leading segments; a trailing `**` is anything below.
        const slash = glob[i + 2] === "/"
        out += slash ? "(?:.*/)?" : ".*"
        i += slash ? 2 : 1
      } else out += "[^/]*"
    } else if (c === "?") out += "[^/]"
    else if (c === "[") {
      const close = glob.indexOf("]", i + 2)
      if (close === -1) out += "\\["
      else {
        let body = glob.slice(i + 1, close)
        if (body.startsWith("!")) body = `^${body.slice(1)}`
        out += `[${body.replace(/\\/g, "\\\\")}]`
        i = close
      }
    } else if (c === "{") {
      depth++
      out += "(?:"
    } else if (c === "}" && depth > 0) {
      depth--
      out += ")"
    } else if (c === "," && depth > 0) out += "|"
    else out += escape(c)
  }
  while (depth-- > 0) out += ")"
  return out
}

/** Compiles a glob; a glob without `/` matches a path's last segment. */
export const compile = (glob: string): Glob => {
  const anchored = glob.replace(/^\.\//, "").replace(/^\//, "")
  const body = translate(anchored)
  const pattern = new RegExp(anchored.includes("/") ? `^${body}$` : `^(?:.*/)?${body}$`)
  return { source: glob, test: (path) => pattern.test(path) }
}

/** Whether `path` matches any of `globs` (all paths match no globs). */
export const matchesAny = (globs: ReadonlyArray<Glob>, path: string): boolean =>
  globs.length === 0 || globs.some((glob) => glob.test(path))

/**
 * The fixed directory a glob starts under (`src/lib` of `src/lib/**\/*.ts`),
 * so a walk need not visit the rest; `.` when it starts with a wildcard.
 */
export const base = (glob: string): string => {
  const segments = glob.replace(/^\.\//, "").split("/")
  const fixed: Array<string> = []
  for (const segment of segments.slice(0, -1)) {
    if (/[*?[{]/.test(segment)) break
    fixed.push(segment)
  }
  return fixed.length === 0 ? "." : fixed.join("/")
}
