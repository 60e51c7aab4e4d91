/**
 * What differs between the SQL databases the store runs on (`Dialect`), and the
 * shapes of what a dialect may do its own way: commit (`AppendStrategy`), push
 * (`PushStrategy`), run a write transaction's statements (`transact`).
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { Conflict, LeaseLost, SequenceConflict, SessionClosed, SessionNotFound } from "../../schema/Errors.js"
import { type InputId, type SessionId } from "../../schema/Ids.js"
import { Admission } from "../../schema/Inbox.js"
import { type Commit, CommitReceipt } from "../../schema/Lease.js"
import * as SqlStatements from "./SqlStatements.js"
import type { Steps } from "./Steps.js"

/** What differs between SQL databases. */
export interface Dialect {
  readonly placeholders: SqlStatements.Placeholders
  /** The store clock (epoch ms) as SQL text and the parameters that text takes. */
  readonly clock: Effect.Effect<Clock>
  /** Appended to the query that reads the session row inside a write transaction. */
  readonly lockRow: string
  /** Runs `effect` in a write transaction that serialises with every other writer. */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** Runs one statement outside a transaction (default: on a connection reserved for it). */
  readonly outside?: SqlStatements.Executor | undefined
  /** Commits another way than the default transaction of several statements (PostgreSQL: one statement). */
  readonly append?: AppendStrategy | undefined
  /** Admits a plain push another way than the default transaction of several statements (PostgreSQL: one statement). */
  readonly push?: PushStrategy | undefined
  /**
   * Runs the statements of a write transaction (`Steps`) its own way, giving
   * them the store clock (SQLite: all at once, synchronously). By default each
   * statement is one Effect inside `transaction`. `session` names the session
   * the transaction writes (SQLite groups several sessions' transactions).
   */
  readonly transact?:
    | (<A, E>(steps: (clock: Clock) => Steps<A, E>, session: string | undefined) => Effect.Effect<A, E | SqlError>)
    | undefined
}

/** What `append` fails with besides the driver's `SqlError`. */
export type AppendError = SessionNotFound | Conflict | LeaseLost | SequenceConflict

/** An `append` of `commit`: every check, write and projection of a commit, all or nothing. */
export type Append = (commit: Commit) => Effect.Effect<CommitReceipt, AppendError | SqlError>

/**
 * A dialect's own way to commit, given the store's statement runner and its
 * default append (one transaction of several statements), to fall back on.
 */
export type AppendStrategy = (store: {
  readonly query: SqlStatements.Statements["query"]
  readonly inTransaction: Append
}) => Append

/** A plain push (not an answer) of the command `inputId` whose canonical JSON is `print`. */
export type Push = (
  sessionId: SessionId,
  inputId: InputId,
  print: string
) => Effect.Effect<Admission, SessionNotFound | Conflict | SessionClosed | SqlError>

/** A dialect's own push, given the store's push (one transaction of `pushSteps`) to fall back on. */
export type PushStrategy = (inTransaction: Push) => Push

/**
 * The store clock in a statement: `text` where it goes, `params` it binds; `value`, when the clock
 * is a value read in this process (SQLite's), so a step that needs the time itself reads no statement.
 */
export interface Clock {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
  readonly value?: number | undefined
}

/** The process's clock reading `ms`, bound as a parameter. */
export const boundClock = (ms: number): Clock => ({ text: "?", params: [ms], value: ms })
