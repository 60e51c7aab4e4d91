/**
 * The processes `process.*` starts, per session: each belongs to the session
 * that started it (a child works in its root's workspace, but sees only its
 * own processes), keeps its output in a bounded buffer, and is stopped (its
 * whole process group) when that session closes or the host stops.
 *
 * Every process is recorded in its workspace before it starts
 * (`.troupe/processes/<sessionId>.json`, through the port, with its exit once
 * it ends), so a host that restarts after a crash or a stop, or takes over
 * the session from another, reports the processes it did not start as `lost`
 * (or `exited`, with their exit status) instead of pretending they run or
 * forgetting them. Their output is gone with the host that held it.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { ProcessCursorRefused, ProcessUnavailable } from "../../schema/Errors.js"
import type { SessionId } from "../../schema/Ids.js"
import type * as Tool from "../../services/Tool.js"
import * as Workspace from "../../services/Workspace.js"
import * as OutputBuffer from "./OutputBuffer.js"

/** Bytes of output kept per process by default (the last ones). */
export const BUFFER_BYTES = 256 * 1024
/** Processes one session may have running at once by default. */
export const MAX_RUNNING = 8
/** Processes (running or ended) one session's table remembers; the oldest ended ones are forgotten first. */
export const MAX_KEPT = 32

/** How the table runs processes. */
export interface Options {
  /** Bytes of output kept per process (default `BUFFER_BYTES`). */
  readonly processOutputBytes?: number | undefined
  /** Processes one session may have running at once (default `MAX_RUNNING`). */
  readonly maxProcesses?: number | undefined
}

/** Where a process is: running here, ended, or started by a host that is gone. */
export type Status = "running" | "exited" | "lost"

/** What `process.list` and `process.start` tell of a process. */
export interface Info {
  readonly id: string
  readonly command: string
  readonly status: Status
  /** Set while this host knows it (not for a lost one). */
  readonly pid?: number | undefined
  readonly startedAt: string
  readonly exitCode?: number | null | undefined
  readonly signal?: string | null | undefined
  /** Bytes it has written so far (stdout and stderr). */
  readonly outputBytes: number
}

/** What `process.read` gives: output from a cursor, and where to read on. */
export interface ReadResult {
  readonly id: string
  readonly status: Status
  readonly exitCode?: number | null | undefined
  readonly signal?: string | null | undefined
  /** stdout and stderr as they came, interleaved. */
  readonly output: string
  /** Pass it back to read on. */
  readonly cursor: number
  /** Bytes after the given cursor that were dropped (the buffer keeps the last ones) before they were read. */
  readonly skipped: number
  /** More output is there already. */
  readonly more: boolean
}

interface Entry {
  readonly id: string
  readonly command: string
  readonly startedAt: number
  status: Status
  exit: Workspace.ExitStatus | undefined
  readonly buffer: OutputBuffer.OutputBuffer
  child: Workspace.Child | undefined
  scope: Scope.CloseableScope | undefined
  /** Called whenever output arrives or the process ends. */
  readonly listeners: Set<() => void>
}

interface Owner {
  readonly handle: Workspace.Handle
  readonly entries: Map<string, Entry>
  next: number
  /** Orders writes of the record. */
  readonly lock: Effect.Semaphore
}

const ProcessRecord = Schema.Struct({
  id: Schema.String,
  command: Schema.String,
  startedAt: Schema.Number,
  exit: Schema.optional(Schema.Struct({ code: Schema.NullOr(Schema.Number), signal: Schema.NullOr(Schema.String) }))
})
const RecordFile = Schema.parseJson(Schema.Struct({ processes: Schema.Array(ProcessRecord) }))

/** Where a session's processes are recorded, in its workspace. */
export const recordPath = (sessionId: string): string => `.troupe/processes/${sessionId.replace(/[^A-Za-z0-9_-]/g, "_")}.json`

const info = (entry: Entry): Info => ({
  id: entry.id,
  command: entry.command,
  status: entry.status,
  ...(entry.child === undefined ? {} : { pid: entry.child.pid }),
  startedAt: new Date(entry.startedAt).toISOString(),
  ...(entry.exit === undefined ? {} : { exitCode: entry.exit.code, signal: entry.exit.signal }),
  outputBytes: entry.buffer.end
})

const notify = (entry: Entry) => {
  for (const listener of [...entry.listeners]) listener()
}

/** Waits until `entry` has output past `cursor` or is no longer running. */
const changed = (entry: Entry, cursor: number) =>
  Effect.async<void>((resume) => {
    if (entry.buffer.end > cursor || entry.status !== "running") return resume(Effect.void)
    const listener = () => {
      entry.listeners.delete(listener)
      resume(Effect.void)
    }
    entry.listeners.add(listener)
    return Effect.sync(() => entry.listeners.delete(listener))
  })

/** The table's operations, for the session of each call. */
export class ProcessTable extends Context.Tag("troupe/tools/ProcessTable")<ProcessTable, {
  readonly start: (
    context: Tool.ToolContext,
    options: { readonly command: string; readonly cwd?: string | undefined; readonly env: Readonly<Record<string, string>> }
  ) => Effect.Effect<Info, Workspace.Failure | ProcessUnavailable>
  readonly list: (context: Tool.ToolContext) => Effect.Effect<ReadonlyArray<Info>, Workspace.Failure>
  readonly read: (
    context: Tool.ToolContext,
    options: { readonly id: string; readonly cursor: number; readonly waitMillis: number; readonly maxBytes: number }
  ) => Effect.Effect<ReadResult, Workspace.Failure | ProcessUnavailable | ProcessCursorRefused>
  readonly write: (
    context: Tool.ToolContext,
    options: { readonly id: string; readonly data: string; readonly end: boolean }
  ) => Effect.Effect<void, Workspace.Failure | ProcessUnavailable>
  readonly signal: (context: Tool.ToolContext, options: { readonly id: string; readonly signal: string }) => Effect.Effect<void, Workspace.Failure | ProcessUnavailable>
  /** Stops the session's processes and forgets them (its record too). */
  readonly sessionClosed: (sessionId: SessionId) => Effect.Effect<void>
}>() {}

/** A table over the context's workspace; every process still running is stopped when the scope closes. */
export const make = (options: Options = {}): Effect.Effect<ProcessTable["Type"], never, Workspace.Workspace | Scope.Scope> =>
  Effect.gen(function*() {
    const workspace = yield* Workspace.Workspace
    const tableScope = yield* Effect.scope
    const capacity = options.processOutputBytes ?? BUFFER_BYTES
    const maxRunning = options.maxProcesses ?? MAX_RUNNING
    const owners = new Map<string, Owner>()
    const opening = yield* Effect.makeSemaphore(1)

    /** Writes the session's record: what it runs and how its ended processes ended (none left: no file). */
    const persist = (sessionId: string, owner: Owner) =>
      owner.lock.withPermits(1)(Effect.suspend(() => {
        const processes = [...owner.entries.values()].map((e) => ({
          id: e.id,
          command: e.command,
          startedAt: e.startedAt,
          ...(e.exit === undefined ? {} : { exit: { code: e.exit.code, signal: e.exit.signal } })
        }))
        return processes.length === 0
          ? Effect.catchIf(owner.handle.remove(recordPath(sessionId)), (e) => e._tag === "WorkspaceFailure" && e.code === "not_found", () => Effect.void)
          : Effect.asVoid(owner.handle.write(recordPath(sessionId), Schema.encodeSync(RecordFile)({ processes })))
      })).pipe(Effect.uninterruptible)

    /** What an earlier host recorded: lost, or ended with the status it recorded. */
    const restore = (handle: Workspace.Handle, sessionId: string) =>
      handle.read(recordPath(sessionId)).pipe(
        Effect.map((bytes) => Schema.decodeUnknownOption(RecordFile)(new TextDecoder().decode(bytes))),
        Effect.orElseSucceed(() => Option.none<typeof RecordFile.Type>()),
        Effect.map((file): ReadonlyArray<Entry> =>
          Option.isNone(file) ? [] : file.value.processes.map((r): Entry => ({
            id: r.id,
            command: r.command,
            startedAt: r.startedAt,
            status: r.exit === undefined ? "lost" : "exited",
            exit: r.exit,
            buffer: OutputBuffer.make(0),
            child: undefined,
            scope: undefined,
            listeners: new Set()
          })))
      )

    const ownerOf = (context: Tool.ToolContext) =>
      opening.withPermits(1)(Effect.gen(function*() {
        const known = owners.get(context.sessionId)
        if (known !== undefined) return known
        const handle = yield* workspace.forRoot(context.rootId ?? context.sessionId)
        const restored = yield* restore(handle, context.sessionId)
        const owner: Owner = {
          handle,
          entries: new Map(restored.map((e) => [e.id, e])),
          next: 1 + Math.max(0, ...restored.map((e) => Number(/^p(\d+)$/.exec(e.id)?.[1] ?? 0))),
          lock: yield* Effect.makeSemaphore(1)
        }
        owners.set(context.sessionId, owner)
        return owner
      }))

    const entryOf = (context: Tool.ToolContext, id: string) =>
      Effect.flatMap(ownerOf(context), (owner) => {
        const entry = owner.entries.get(id)
        return entry === undefined ? Effect.fail(new ProcessUnavailable({ processId: id, reason: "unknown" })) : Effect.succeed(entry)
      })

    /** The entry of a process this host runs, or why there is none. */
    const liveOf = (context: Tool.ToolContext, id: string) =>
      Effect.flatMap(entryOf(context, id), (entry) =>
        entry.status === "running" && entry.child !== undefined
          ? Effect.succeed({ entry, child: entry.child })
          : Effect.fail(new ProcessUnavailable({ processId: id, reason: entry.status === "lost" ? "lost" : "exited" })))

    /** Collects the output, then the exit: the group is killed then (what the command left behind), and the exit recorded. */
    const follow = (sessionId: string, owner: Owner, entry: Entry, child: Workspace.Child, scope: Scope.Scope) =>
      Effect.gen(function*() {
        const output = yield* Effect.forkIn(
          Stream.runForEach(child.output, (out) =>
            Effect.sync(() => {
              OutputBuffer.append(entry.buffer, out.data)
              notify(entry)
            })),
          scope
        )
        const exit = yield* child.exit
        yield* Effect.ignore(child.signal("SIGKILL"))
        // A straggler that left the group could hold the pipes open: the output is what came until then.
        yield* Fiber.join(output).pipe(Effect.timeout("2 seconds"), Effect.ignore)
        entry.exit = exit
        entry.status = "exited"
        notify(entry)
        yield* Effect.ignore(persist(sessionId, owner))
      })

    /** Forgets the oldest ended processes beyond `MAX_KEPT`. */
    const prune = (owner: Owner) =>
      Effect.gen(function*() {
        for (const entry of [...owner.entries.values()]) {
          if (owner.entries.size < MAX_KEPT) return
          if (entry.status === "running") continue
          owner.entries.delete(entry.id)
          if (entry.scope !== undefined) yield* Scope.close(entry.scope, Exit.void)
        }
      })

    const start: ProcessTable["Type"]["start"] = (context, options) =>
      Effect.gen(function*() {
        const owner = yield* ownerOf(context)
        const running = [...owner.entries.values()].filter((e) => e.status === "running").length
        if (running >= maxRunning) return yield* new ProcessUnavailable({ processId: `p${owner.next}`, reason: "limit" })
        yield* prune(owner)
        const entry: Entry = {
          id: `p${owner.next++}`,
          command: options.command,
          startedAt: Date.now(),
          status: "running",
          exit: undefined,
          buffer: OutputBuffer.make(capacity),
          child: undefined,
          scope: undefined,
          listeners: new Set()
        }
        owner.entries.set(entry.id, entry)
        const forget = Effect.suspend(() => {
          owner.entries.delete(entry.id)
          return Effect.ignore(persist(context.sessionId, owner))
        })
        // Recorded before it starts: whatever happens to this host from here on, a successor reports it.
        yield* Effect.onError(persist(context.sessionId, owner), () => forget)
        const scope = yield* Scope.fork(tableScope, ExecutionStrategy.sequential)
        const child = yield* owner.handle.spawn({ command: options.command, cwd: options.cwd, env: options.env }).pipe(
          Scope.extend(scope),
          Effect.onError(() => Effect.zipRight(Scope.close(scope, Exit.void), forget))
        )
        entry.child = child
        entry.scope = scope
        yield* Effect.forkIn(follow(context.sessionId, owner, entry, child, scope), scope)
        return info(entry)
      })

    const read: ProcessTable["Type"]["read"] = (context, options) =>
      Effect.gen(function*() {
        const entry = yield* entryOf(context, options.id)
        if (entry.child === undefined) return yield* new ProcessUnavailable({ processId: entry.id, reason: "lost" })
        if (options.cursor > entry.buffer.end) {
          return yield* new ProcessCursorRefused({ processId: entry.id, cursor: options.cursor, written: entry.buffer.end })
        }
        if (options.waitMillis > 0) yield* Effect.timeoutOption(changed(entry, options.cursor), options.waitMillis)
        const slice = OutputBuffer.read(entry.buffer, options.cursor, options.maxBytes, entry.status !== "running")
        return {
          id: entry.id,
          status: entry.status,
          ...(entry.exit === undefined ? {} : { exitCode: entry.exit.code, signal: entry.exit.signal }),
          output: new TextDecoder().decode(slice.bytes),
          cursor: slice.next,
          skipped: slice.skipped,
          more: slice.next < entry.buffer.end
        }
      })

    const closeOwner = (sessionId: string, owner: Owner) =>
      Effect.gen(function*() {
        for (const entry of owner.entries.values()) {
          if (entry.scope !== undefined) yield* Scope.close(entry.scope, Exit.void)
        }
        owner.entries.clear()
        yield* Effect.ignore(persist(sessionId, owner))
      })

    return ProcessTable.of({
      start,
      list: (context) => Effect.map(ownerOf(context), (owner) => [...owner.entries.values()].map(info)),
      read,
      write: (context, options) =>
        Effect.flatMap(liveOf(context, options.id), ({ child }) => child.write(options.data, options.end)),
      signal: (context, options) => Effect.flatMap(liveOf(context, options.id), ({ child }) => child.signal(options.signal)),
      sessionClosed: (sessionId) =>
        Effect.suspend(() => {
          const owner = owners.get(sessionId)
          if (owner === undefined) return Effect.void
          owners.delete(sessionId)
          return closeOwner(sessionId, owner)
        })
    })
  })
