/**
 * `process.start`, `process.list`, `process.read`, `process.write` and
 * `process.signal`: long-running processes of a session (a dev server, a
 * watcher, a REPL), started through the workspace port's `spawn` with the
 * environment `bash` gets, owned by the session that started them
 * (`ProcessTable`). The model reads their output from a cursor, with a bounded
 * wait for more; `process.start` asks for an approval by default, as `bash`
 * does. Over the wire (OpenAI) the names are `process_start`, ….
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Tool from "../../services/Tool.js"
import { BUFFER_BYTES, ProcessTable } from "./ProcessTable.js"
import * as Shell from "./Shell.js"

/** Signals `process.signal` sends (to the process's whole group). */
export const SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT"] as const

/** The longest `process.read` wait, in seconds. */
export const MAX_WAIT_SECONDS = 30

const Status = Schema.Literal("running", "exited", "lost")

const Info = Schema.Struct({
  id: Schema.String,
  command: Schema.String,
  status: Status,
  pid: Schema.optional(Schema.Number),
  startedAt: Schema.String,
  exitCode: Schema.optional(Schema.NullOr(Schema.Number)),
  signal: Schema.optional(Schema.NullOr(Schema.String)),
  outputBytes: Schema.Number
})

const Id = Schema.String.annotations({ description: "The id process.start gave (p1, p2, …)." })

/** `process.start`: starts a command that keeps running; asks for an approval unless `ask: false`. */
export const start = (options: Shell.Options = {}) =>
  Tool.make({
    name: "process.start",
    description: "Starts a long-running command in the workspace (sh -c) that this session owns: a server, a watcher, a REPL. " +
      "Read its output with process.read, write to its stdin with process.write, stop it with process.signal. " +
      "It is stopped when the session closes. Use bash for commands that finish. Asks for approval.",
    parameters: Schema.Struct({ command: Schema.String.pipe(Schema.minLength(1)), cwd: Schema.optional(Schema.String) }),
    success: Info,
    metadata: { sideEffect: "execute", idempotency: "unsupported", capabilities: ["process.execute"] },
    needsApproval: () => options.ask ?? true,
    handler: (args, context) =>
      Effect.flatMap(ProcessTable, (table) => table.start(context, { command: args.command, cwd: args.cwd, env: Shell.environmentFor(options, context) }))
  })

/** `process.list`: the session's processes. */
export const list = Tool.make({
  name: "process.list",
  description: "Lists the processes this session started: running, exited (with the exit code) or lost (started before the daemon restarted).",
  parameters: Schema.Struct({}),
  success: Schema.Struct({ processes: Schema.Array(Info) }),
  metadata: { sideEffect: "none", idempotency: "supported", parallel: true },
  handler: (_, context) => Effect.flatMap(ProcessTable, (table) => Effect.map(table.list(context), (processes) => ({ processes })))
})

/** `process.read`: output since a cursor, waiting up to `waitSeconds` for some. */
export const read = Tool.make({
  name: "process.read",
  description: `Reads a process's output (stdout and stderr interleaved) from cursor (default 0), at most ${Shell.OUTPUT_LIMIT} bytes; ` +
    "pass the returned cursor back to read on. With waitSeconds it waits for new output or the exit. " +
    `Only the latest output is kept (${BUFFER_BYTES / 1024} KiB by default): skipped says how many bytes were dropped before you read them.`,
  parameters: Schema.Struct({
    id: Id,
    cursor: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), { default: () => 0 }),
    waitSeconds: Schema.optionalWith(Schema.Number.pipe(Schema.between(0, MAX_WAIT_SECONDS)), { default: () => 0 })
  }),
  success: Schema.Struct({
    id: Schema.String,
    status: Status,
    exitCode: Schema.optional(Schema.NullOr(Schema.Number)),
    signal: Schema.optional(Schema.NullOr(Schema.String)),
    output: Schema.String,
    cursor: Schema.Number,
    skipped: Schema.Number,
    more: Schema.Boolean
  }),
  metadata: { sideEffect: "none", idempotency: "supported", parallel: true },
  handler: (args, context) =>
    Effect.flatMap(ProcessTable, (table) =>
      table.read(context, { id: args.id, cursor: args.cursor, waitMillis: args.waitSeconds * 1000, maxBytes: Shell.OUTPUT_LIMIT }))
})

/** `process.write`: text to a process's stdin (`end` closes it). */
export const write = Tool.make({
  name: "process.write",
  description: "Writes text to a running process's stdin (include \\n to end a line); end: true closes its stdin afterwards.",
  parameters: Schema.Struct({ id: Id, data: Schema.String, end: Schema.optionalWith(Schema.Boolean, { default: () => false }) }),
  success: Schema.Struct({ id: Schema.String, bytes: Schema.Number }),
  metadata: { sideEffect: "execute", idempotency: "unsupported", capabilities: ["process.execute"] },
  handler: (args, context) =>
    Effect.flatMap(ProcessTable, (table) =>
      Effect.as(table.write(context, args), { id: args.id, bytes: Buffer.byteLength(args.data) }))
})

/** `process.signal`: a signal to a running process's whole group (SIGTERM by default). */
export const signal = Tool.make({
  name: "process.signal",
  description: "Sends a signal to a running process and everything it started (default SIGTERM; SIGKILL if it does not stop).",
  parameters: Schema.Struct({ id: Id, signal: Schema.optionalWith(Schema.Literal(...SIGNALS), { default: () => "SIGTERM" as const }) }),
  success: Schema.Struct({ id: Schema.String, signal: Schema.String }),
  metadata: { sideEffect: "execute", idempotency: "unsupported", capabilities: ["process.execute"] },
  handler: (args, context) =>
    Effect.flatMap(ProcessTable, (table) => Effect.as(table.signal(context, args), { id: args.id, signal: args.signal }))
})

/** The five tools, `process.start` with `options`. */
export const tools = (options: Shell.Options = {}) => [start(options), list, read, write, signal] as const
