/**
 * `read_file`, `write_file` and `edit_file` on the `Workspace` port. A read is
 * bounded (`READ_MAX_LINES` lines, `READ_MAX_BYTES` bytes) and, when there is
 * more, gives a cursor naming the path, the file's version and the byte offset
 * to read on from; a cursor is refused (`CursorRefused`) once the file
 * changed, for another path, or at an offset that is not a line start inside
 * the file. Reading `startLine: -N` gives the last N lines without reading the
 * whole file.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Glob from "../../internal/Glob.js"
import { CursorRefused, EditRefused } from "../../schema/Errors.js"
import * as Tool from "../../services/Tool.js"
import * as Workspace from "../../services/Workspace.js"

/** Most lines one `read_file` returns. */
export const READ_MAX_LINES = 2000
/** Most bytes of text one `read_file` returns. */
export const READ_MAX_BYTES = 64 * 1024
const CHUNK = 256 * 1024

/** The workspace of the call's tree. */
export const handleOf = (context: Tool.ToolContext) =>
  Effect.flatMap(Workspace.Workspace, (workspace) => workspace.forRoot(context.rootId ?? context.sessionId))

interface Cursor {
  readonly p: string
  readonly v: string
  readonly o: number
  readonly l: number
}

const encodeCursor = (cursor: Cursor) => Buffer.from(JSON.stringify(cursor)).toString("base64url")
const decodeCursor = (text: string): Cursor | undefined => {
  try {
    const c = JSON.parse(Buffer.from(text, "base64url").toString("utf8"))
    return typeof c?.p === "string" && typeof c.v === "string" && Number.isInteger(c.o) && Number.isInteger(c.l) ? c : undefined
  } catch {
    return undefined
  }
}

const ReadParameters = Schema.Struct({
  path: Schema.String,
  startLine: Schema.optional(Schema.Number.pipe(Schema.int())).annotations({ description: "1-based first line; negative: that many last lines." }),
  lineCount: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, READ_MAX_LINES))),
  cursor: Schema.optional(Schema.String).annotations({ description: "The cursor a previous read_file of this path gave, to read on." })
})

const ReadResult = Schema.Struct({
  path: Schema.String,
  version: Schema.String,
  size: Schema.Number,
  /** The first line's number; absent for a read from the end. */
  startLine: Schema.optional(Schema.Number),
  lines: Schema.Number,
  text: Schema.String,
  binary: Schema.Boolean,
  /** Present when there is more: pass it back as `cursor`. */
  cursor: Schema.optional(Schema.String)
})

/** Lines from byte `offset` (a line start), at most `count` and `READ_MAX_BYTES`; the byte offset after them. */
const readForward = (handle: Workspace.Handle, path: string, size: number, offset: number, skip: number, count: number) =>
  Effect.gen(function*() {
    let at = offset
    // Skip whole lines first (a start line far into the file).
    while (skip > 0 && at < size) {
      const chunk = yield* handle.read(path, { start: at, end: at + CHUNK })
      let i = 0
      while (skip > 0 && (i = chunk.indexOf(10, i)) !== -1) {
        skip--
        i++
        if (skip === 0) at += i
      }
      if (skip > 0) at += chunk.length
    }
    const out: Array<Uint8Array> = []
    let bytes = 0
    let lines = 0
    let end = at
    while (lines < count && end < size && bytes < READ_MAX_BYTES) {
      const chunk = yield* handle.read(path, { start: end, end: end + Math.min(CHUNK, READ_MAX_BYTES - bytes + 1) })
      let i = 0
      let taken = 0
      while (lines < count) {
        const nl = chunk.indexOf(10, i)
        const lineEnd = nl === -1 ? chunk.length : nl + 1
        if (nl === -1 && end + chunk.length < size) break
        if (bytes + (lineEnd - i) > READ_MAX_BYTES && lines > 0) break
        taken = lineEnd
        bytes += lineEnd - i
        lines++
        i = lineEnd
        if (nl === -1) break
      }
      if (taken === 0) {
        // One line longer than the whole budget: give its start, cut at the budget.
        const cut = chunk.subarray(0, READ_MAX_BYTES)
        out.push(cut)
        end += cut.length
        lines++
        break
      }
      out.push(chunk.subarray(0, taken))
      end += taken
      if (taken < chunk.length && lines < count) break
    }
    return { text: Buffer.concat(out).toString("utf8"), lines, start: at, end }
  })

/** The last `count` lines, read backwards from the end in chunks. */
const readTail = (handle: Workspace.Handle, path: string, size: number, count: number) =>
  Effect.gen(function*() {
    let start = size
    let newlines = 0
    // A final newline ends the last line; it does not start another.
    const last = size === 0 ? [] : yield* handle.read(path, { start: size - 1 })
    const trailing = last[0] === 10 ? 1 : 0
    while (start > 0 && newlines < count + trailing && size - start < READ_MAX_BYTES) {
      const from = Math.max(0, start - CHUNK)
      const chunk = yield* handle.read(path, { start: from, end: start })
      let i = chunk.length
      while (i > 0 && newlines < count + trailing) {
        i--
        if (chunk[i] === 10) newlines++
      }
      start = newlines >= count + trailing ? from + i + 1 : from
    }
    start = Math.max(start, size - READ_MAX_BYTES)
    const bytes = yield* handle.read(path, { start, end: size })
    const text = Buffer.from(bytes).toString("utf8")
    return { text, lines: text === "" ? 0 : text.split("\n").length - trailing }
  })

/** `read_file`: a bounded range of lines of a text file, with a cursor to read on. */
export const readFile = Tool.make({
  name: "read_file",
  description: `Reads a text file of the workspace: at most ${READ_MAX_LINES} lines or ${READ_MAX_BYTES} bytes from startLine ` +
    "(1-based; negative for the last lines). When there is more, the result has a cursor: pass it back to read on. " +
    "A cursor is refused once the file changed.",
  parameters: ReadParameters,
  success: ReadResult,
  metadata: { sideEffect: "none", idempotency: "supported", capabilities: ["filesystem.read"], parallel: true },
  handler: (args, context) =>
    Effect.gen(function*() {
      const handle = yield* handleOf(context)
      const stat = yield* handle.stat(args.path)
      const head = yield* handle.read(stat.path, { start: 0, end: 8192 })
      const base = { path: stat.path, version: stat.version, size: stat.size }
      if (head.includes(0)) return { ...base, lines: 0, text: "", binary: true }
      const count = args.lineCount ?? READ_MAX_LINES
      if (args.cursor === undefined && args.startLine !== undefined && args.startLine < 0) {
        const tail = yield* readTail(handle, stat.path, stat.size, Math.min(-args.startLine, READ_MAX_LINES))
        return { ...base, lines: tail.lines, text: tail.text, binary: false }
      }
      let offset = 0
      let firstLine = Math.max(1, args.startLine ?? 1)
      let skip = firstLine - 1
      if (args.cursor !== undefined) {
        const cursor = decodeCursor(args.cursor)
        if (cursor === undefined) return yield* new CursorRefused({ path: stat.path, reason: "malformed" })
        if (cursor.p !== stat.path) return yield* new CursorRefused({ path: stat.path, reason: "path_differs" })
        if (cursor.v !== stat.version) return yield* new CursorRefused({ path: stat.path, reason: "file_changed" })
        const before = cursor.o === 0 ? [10] : yield* handle.read(stat.path, { start: cursor.o - 1, end: cursor.o })
        if (cursor.o < 0 || cursor.o > stat.size || before[0] !== 10) {
          return yield* new CursorRefused({ path: stat.path, reason: "offset_invalid" })
        }
        offset = cursor.o
        firstLine = cursor.l
        skip = 0
      }
      const read = yield* readForward(handle, stat.path, stat.size, offset, skip, count)
      const more = read.end < stat.size
      return {
        ...base,
        startLine: firstLine,
        lines: read.lines,
        text: read.text,
        binary: false,
        ...(more ? { cursor: encodeCursor({ p: stat.path, v: stat.version, o: read.end, l: firstLine + read.lines }) } : {})
      }
    })
})

/** What writing tools may write without asking (globs); everything else asks. */
export interface WriteOptions {
  readonly writable?: ReadonlyArray<string> | undefined
}

const asksFor = (options: WriteOptions) => {
  const globs = (options.writable ?? []).map(Glob.compile)
  return (args: { readonly path: string }) => {
    const normal = Workspace.normalize(args.path)
    return !normal.ok || !globs.some((glob) => glob.test(normal.path))
  }
}

const WriteResult = Schema.Struct({ path: Schema.String, bytes: Schema.Number, version: Schema.String })

/** `write_file`: replaces (or creates) a file atomically; asks first outside `writable`. */
export const writeFile = (options: WriteOptions = {}) =>
  Tool.make({
    name: "write_file",
    description: "Writes a whole file of the workspace (created with its directories, or replaced atomically).",
    parameters: Schema.Struct({ path: Schema.String, content: Schema.String }),
    success: WriteResult,
    metadata: { sideEffect: "write", idempotency: "supported", capabilities: ["filesystem.write"] },
    needsApproval: asksFor(options),
    handler: (args, context) =>
      Effect.gen(function*() {
        const handle = yield* handleOf(context)
        const stat = yield* handle.write(args.path, args.content)
        return { path: stat.path, bytes: stat.size, version: stat.version }
      })
  })

/** The 1-based lines where `needle` starts in `text`, and how many times it occurs. */
const occurrences = (text: string, needle: string) => {
  const lines: Array<number> = []
  let count = 0
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) {
    count++
    if (lines.length < 10) lines.push(text.slice(0, at).split("\n").length)
  }
  return { count, lines }
}

/** `edit_file`: replaces exact text; no match or more than one (without `replaceAll`) is an `EditRefused`. */
export const editFile = (options: WriteOptions = {}) =>
  Tool.make({
    name: "edit_file",
    description: "Replaces exact text in a file of the workspace: oldText must occur exactly once (or set replaceAll).",
    parameters: Schema.Struct({
      path: Schema.String,
      oldText: Schema.String.pipe(Schema.minLength(1)),
      newText: Schema.String,
      replaceAll: Schema.optionalWith(Schema.Boolean, { default: () => false })
    }),
    success: Schema.Struct({ path: Schema.String, replacements: Schema.Number, version: Schema.String }),
    metadata: { sideEffect: "write", idempotency: "unsupported", capabilities: ["filesystem.write"] },
    needsApproval: asksFor(options),
    handler: (args, context) =>
      Effect.gen(function*() {
        const handle = yield* handleOf(context)
        const stat = yield* handle.stat(args.path)
        const text = Buffer.from(yield* handle.read(stat.path)).toString("utf8")
        const found = occurrences(text, args.oldText)
        const refuse = (reason: EditRefused["reason"]) => new EditRefused({ path: stat.path, reason, matches: found.count, lines: found.lines })
        if (args.oldText === args.newText) return yield* refuse("no_change")
        if (found.count === 0) return yield* refuse("no_match")
        if (found.count > 1 && !args.replaceAll) return yield* refuse("ambiguous")
        const next = args.replaceAll ? text.split(args.oldText).join(args.newText) : text.replace(args.oldText, () => args.newText)
        const written = yield* handle.write(stat.path, next)
        return { path: written.path, replacements: args.replaceAll ? found.count : 1, version: written.version }
      })
  })
