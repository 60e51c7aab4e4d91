/**
 * Errors that cross a boundary (store, wire, public API). Infrastructure
 * errors are mapped to these at the edge.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { BudgetDimension, Usage } from "./Budget.js"
import { CallbackId, SessionId, TurnId } from "./Ids.js"
import { FailureCode } from "./Turn.js"

/** The lease is held by someone else, expired, or was taken over. */
export class LeaseLost extends Schema.TaggedError<LeaseLost>()("LeaseLost", {
  sessionId: SessionId,
  /** The epoch the caller held. */
  epoch: Schema.Number,
  owner: Schema.String
}) {
  override get message() {
    return `lease of ${this.sessionId} at epoch ${this.epoch} is no longer held by ${this.owner}`
  }
}

/** A commit expected another head sequence number. */
export class SequenceConflict extends Schema.TaggedError<SequenceConflict>()("SequenceConflict", {
  sessionId: SessionId,
  expected: Schema.Number,
  actual: Schema.Number
}) {
  override get message() {
    return `session ${this.sessionId}: expected head ${this.expected}, found ${this.actual}`
  }
}

/** The same idempotency key was used with different content. */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  /** What the key names: `session` (idempotency key), `input` (inbox inputId), `alias`. */
  entity: Schema.Literal("session", "input", "alias", "commit"),
  key: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.entity} ${this.key}: ${this.reason}`
  }
}

/** No session with that id is visible to the caller. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String
}) {
  override get message() {
    return `session ${this.sessionId} not found`
  }
}

/** The session is closed and accepts nothing more. */
export class SessionClosed extends Schema.TaggedError<SessionClosed>()("SessionClosed", {
  sessionId: SessionId
}) {
  override get message() {
    return `session ${this.sessionId} is closed`
  }
}

/** The store could not be reached or failed; the driver's error is the cause. */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  operation: Schema.String,
  /** Which store, where it is known (`sqlite:PATH`): set when opening it failed. */
  store: Schema.optional(Schema.String),
  cause: Schema.Defect
}) {
  override get message() {
    if (this.store === undefined) return `store unavailable during ${this.operation}`
    // Opening a named store: the path and the reason are what the user can act on.
    const why = this.cause instanceof Error ? this.cause.message : typeof this.cause === "string" ? this.cause : undefined
    return `store ${this.store} unavailable during ${this.operation}${why === undefined ? "" : `: ${why}`}`
  }
}

/** An input failed to decode (a bad cursor, a malformed record from storage). */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  what: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `invalid ${this.what}: ${this.reason}`
  }
}

/** The session is running a turn and its busy policy is `reject`. */
export class SessionBusy extends Schema.TaggedError<SessionBusy>()("SessionBusy", {
  sessionId: SessionId,
  activeTurnId: TurnId
}) {
  override get message() {
    return `session ${this.sessionId} is busy with turn ${this.activeTurnId}`
  }
}

/** An interrupt named a turn that is not the session's active turn. */
export class TurnMismatch extends Schema.TaggedError<TurnMismatch>()("TurnMismatch", {
  sessionId: SessionId,
  expectedTurnId: TurnId,
  activeTurnId: Schema.NullOr(TurnId)
}) {
  override get message() {
    return `session ${this.sessionId}: turn ${this.expectedTurnId} is not active (active: ${this.activeTurnId ?? "none"})`
  }
}

/** A turn ended as failed; `failure` carries the typed cause (e.g. a `BudgetExhausted`). */
export class TurnFailed extends Schema.TaggedError<TurnFailed>()("TurnFailed", {
  sessionId: SessionId,
  turnId: TurnId,
  failureCode: FailureCode,
  failure: Schema.optional(Schema.Unknown),
  usage: Usage
}) {
  override get message() {
    return `turn ${this.turnId} failed: ${this.failureCode}`
  }
}

/**
 * A completed turn's output did not decode with the schema the caller gave
 * `awaitOutput` (not JSON, or a value the schema refuses: a refinement the
 * agent's JSON Schema could not say).
 */
export class InvalidOutput extends Schema.TaggedError<InvalidOutput>()("InvalidOutput", {
  sessionId: SessionId,
  turnId: TurnId,
  reason: Schema.String
}) {
  override get message() {
    return `turn ${this.turnId}: the output does not decode: ${this.reason}`
  }
}

/** A turn ended because it was interrupted. */
export class TurnInterrupted extends Schema.TaggedError<TurnInterrupted>()("TurnInterrupted", {
  sessionId: SessionId,
  turnId: TurnId,
  reason: Schema.optional(Schema.String)
}) {
  override get message() {
    return `turn ${this.turnId} was interrupted${this.reason ? `: ${this.reason}` : ""}`
  }
}

/** The model provider failed in a way retries did not fix. */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  reason: Schema.String,
  retryable: Schema.Boolean,
  status: Schema.optional(Schema.Number)
}) {
  override get message() {
    return `model error: ${this.reason}`
  }
}

/** The session has no such turn: it is neither running nor in the log. */
export class TurnNotFound extends Schema.TaggedError<TurnNotFound>()("TurnNotFound", {
  sessionId: SessionId,
  turnId: TurnId
}) {
  override get message() {
    return `session ${this.sessionId} has no turn ${this.turnId}`
  }
}

/** A turn ran out of one of its budgets; `observed` is what it had used (or was about to). */
export class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {
  sessionId: SessionId,
  turnId: TurnId,
  dimension: BudgetDimension,
  limit: Schema.Number,
  observed: Schema.Number,
  /** For `toolCallsByName`: the tool whose limit was reached. */
  toolName: Schema.optional(Schema.String)
}) {
  override get message() {
    return `turn ${this.turnId} exhausted its ${this.dimension}${this.toolName ? ` (${this.toolName})` : ""} budget: ${this.observed} > ${this.limit}`
  }
}

/** An answer to a callback that is closed, unknown, already answered, or for another turn or operation. */
export class StaleCallback extends Schema.TaggedError<StaleCallback>()("StaleCallback", {
  sessionId: SessionId,
  callbackId: CallbackId,
  /** `not_open`: the session never opened it; `answered` / `cancelled`: closed that way (expiry counts as cancelled); `mismatch`: another turn or operation. */
  reason: Schema.Literal("not_open", "answered", "cancelled", "mismatch")
}) {
  override get message() {
    return `callback ${this.callbackId} of session ${this.sessionId} is stale (${this.reason})`
  }
}

/**
 * A callback provider's handler answered with a value that is not an answer
 * of the callback's kind (or, for a client tool, not that tool's success):
 * the provider ends with this error and the callback stays open for another.
 */
export class InvalidCallbackAnswer extends Schema.TaggedError<InvalidCallbackAnswer>()("InvalidCallbackAnswer", {
  sessionId: SessionId,
  callbackId: CallbackId,
  kind: Schema.Literal("approval", "client_tool"),
  /** The client tool's name, for a `client_tool` callback. */
  toolName: Schema.optional(Schema.String),
  reason: Schema.String
}) {
  override get message() {
    const what = this.toolName === undefined ? `${this.kind} callback` : `${this.kind} callback of ${this.toolName}`
    return `the provider's answer to ${what} ${this.callbackId} is not a valid answer: ${this.reason}`
  }
}

/** Which limit of a `SubagentPolicy` refused a spawn or a child turn. */
export const SpawnLimit = Schema.Literal("no_policy", "max_depth", "max_children", "max_child_turns", "agent_not_allowed")
/** @since 0.1.0 */
export type SpawnLimit = typeof SpawnLimit.Type

/**
 * A spawn (or a further child turn) the tree's `SubagentPolicy` does not
 * allow: `no_policy` (the session may not spawn at all), `max_depth`,
 * `max_children` (of this parent), `max_child_turns` (across the whole tree),
 * `agent_not_allowed`. `limit` is the policy's value and `observed` what the
 * admission would have made it; nothing was written. Retryable only in the
 * sense that another agent or a later tree may fit.
 */
export class SpawnRefused extends Schema.TaggedError<SpawnRefused>()("SpawnRefused", {
  /** The session that asked: the parent of a spawn, the child of a further turn. */
  sessionId: SessionId,
  reason: SpawnLimit,
  limit: Schema.optional(Schema.Number),
  observed: Schema.optional(Schema.Number),
  /** For `agent_not_allowed`: the agent asked for. */
  agent: Schema.optional(Schema.String)
}) {
  override get message() {
    const detail = this.reason === "agent_not_allowed"
      ? ` (${this.agent ?? "?"})`
      : this.limit === undefined
      ? ""
      : ` (limit ${this.limit})`
    return `session ${this.sessionId} may not spawn: ${this.reason}${detail}`
  }
}

/**
 * A message, steer or close sent to a child session from outside its tree's
 * tools: only its parent messages it. Callback answers, exact interrupts,
 * rename, archive and reads stay allowed. Wire kind `forbidden`.
 */
export class ChildControlForbidden extends Schema.TaggedError<ChildControlForbidden>()("ChildControlForbidden", {
  sessionId: SessionId,
  parentId: SessionId,
  action: Schema.Literal("message", "steer", "close")
}) {
  override get message() {
    return `session ${this.sessionId} is a child of ${this.parentId}: only its parent may ${this.action === "close" ? "close" : "message"} it`
  }
}

/**
 * A workspace path the port refuses: outside the root (`..`, an absolute path, a
 * symlink leading out), a NUL byte, a device or other special file, a sensitive
 * file (`.env*`, private keys, credentials) the run did not opt into, or too long.
 */
export class PathRefused extends Schema.TaggedError<PathRefused>()("PathRefused", {
  path: Schema.String,
  reason: Schema.Literal("outside_root", "absolute", "nul_byte", "symlink_escape", "special_file", "sensitive", "too_long")
}) {
  override get message() {
    const why = {
      outside_root: "it leads outside the workspace root",
      absolute: "absolute paths are refused: give a path relative to the workspace root",
      nul_byte: "it contains a NUL byte",
      symlink_escape: "a symbolic link on it leads outside the workspace root",
      special_file: "it is a device, socket or pipe, not a regular file or directory",
      sensitive: "it is a sensitive file (.env*, private keys, credentials) this run did not opt into",
      too_long: "it is longer than the workspace allows"
    }[this.reason]
    return `path ${JSON.stringify(this.path.slice(0, 200))} refused: ${why}`
  }
}

/** A workspace operation failed on a path it accepted: missing, not a file, not a directory, or an I/O error. */
export class WorkspaceFailure extends Schema.TaggedError<WorkspaceFailure>()("WorkspaceFailure", {
  /** `read`, `write`, `list`, `stat`, `mkdir`, `remove`, `spawn`, `search`… */
  operation: Schema.String,
  path: Schema.String,
  /** `not_found`, `not_a_file`, `not_a_directory`, `exists`, `unsupported` or `io`. */
  code: Schema.Literal("not_found", "not_a_file", "not_a_directory", "exists", "unsupported", "io"),
  detail: Schema.optional(Schema.String)
}) {
  override get message() {
    const what = {
      not_found: "no such file or directory",
      not_a_file: "not a regular file",
      not_a_directory: "not a directory",
      exists: "already exists",
      unsupported: "this workspace does not support it",
      io: "input/output error"
    }[this.code]
    return `${this.operation} ${JSON.stringify(this.path.slice(0, 200))}: ${what}${this.detail === undefined ? "" : ` (${this.detail})`}`
  }
}

/** A `read_file` cursor that cannot be continued: the file changed, another path, or an offset past the file. */
export class CursorRefused extends Schema.TaggedError<CursorRefused>()("CursorRefused", {
  path: Schema.String,
  reason: Schema.Literal("malformed", "file_changed", "path_differs", "offset_invalid")
}) {
  override get message() {
    const why = {
      malformed: "the cursor is not one read_file gave",
      file_changed: "the file changed since the cursor was given: read it again from the start",
      path_differs: "the cursor belongs to another path",
      offset_invalid: "the cursor's offset is not inside the file"
    }[this.reason]
    return `cursor for ${JSON.stringify(this.path.slice(0, 200))} refused: ${why}`
  }
}

/** An `edit_file` whose `oldText` is not found, or found more than once without `replaceAll`. */
export class EditRefused extends Schema.TaggedError<EditRefused>()("EditRefused", {
  path: Schema.String,
  reason: Schema.Literal("no_match", "ambiguous", "no_change"),
  /** How many times `oldText` occurs. */
  matches: Schema.Number,
  /** The 1-based lines where it starts (first few). */
  lines: Schema.Array(Schema.Number)
}) {
  override get message() {
    switch (this.reason) {
      case "no_match":
        return `edit_file ${this.path}: oldText was not found; read the file again and copy the exact text (whitespace included)`
      case "ambiguous":
        return `edit_file ${this.path}: oldText occurs ${this.matches} times (lines ${this.lines.join(", ")}); ` +
          `add surrounding lines to make it unique, or set replaceAll: true`
      case "no_change":
        return `edit_file ${this.path}: oldText and newText are the same`
    }
  }
}

/**
 * A `process.*` call on a process this session does not own now: unknown,
 * lost (started by a host that is gone: a daemon that restarted), exited, or a
 * start beyond the session's limit of running processes.
 */
export class ProcessUnavailable extends Schema.TaggedError<ProcessUnavailable>()("ProcessUnavailable", {
  processId: Schema.String,
  reason: Schema.Literal("unknown", "lost", "exited", "limit")
}) {
  override get message() {
    const why = {
      unknown: "this session started no process with that id",
      lost: "it was started before the daemon restarted and is lost (its output and state are gone)",
      exited: "it has exited",
      limit: "not started: this session runs as many processes as it may; stop one first (process.signal)"
    }[this.reason]
    return `process ${this.processId}: ${why}`
  }
}

/** A `process.read` cursor past the output the process has written. */
export class ProcessCursorRefused extends Schema.TaggedError<ProcessCursorRefused>()("ProcessCursorRefused", {
  processId: Schema.String,
  cursor: Schema.Number,
  /** Bytes it has written so far. */
  written: Schema.Number
}) {
  override get message() {
    return `process ${this.processId}: cursor ${this.cursor} is past its output (${this.written} bytes): pass a cursor process.read gave`
  }
}

/**
 * A runtime was given an agent that names a host tool (not a client tool)
 * which no layer provides: its calls could only fail, so the runtime does not
 * start. Give the tool to the agent (`Agent.make({ tools: [tool] })`) or to
 * the runtime (`tools: Toolkit.layer([tool])`), or mark it a client tool.
 */
export class ToolNotProvided extends Schema.TaggedError<ToolNotProvided>()("ToolNotProvided", {
  agent: Schema.String,
  tool: Schema.String
}) {
  override get message() {
    return `agent ${this.agent} names the host tool ${this.tool}, which no tool layer provides: give it to the agent (Agent.make({ tools })) or to the runtime (Toolkit.layer)`
  }
}

/**
 * The inspector's page could not be made ready: no prebuilt assets in the
 * package and no sources (or no esbuild) to bundle them from, or a bundle
 * that failed. `troupe serve --http` still serves the API; `/` says why.
 */
export class InspectorUnavailable extends Schema.TaggedError<InspectorUnavailable>()("InspectorUnavailable", {
  reason: Schema.String
}) {
  override get message() {
    return `the inspector's page is unavailable: ${this.reason}`
  }
}
