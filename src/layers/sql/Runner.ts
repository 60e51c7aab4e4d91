/**
 * How the SQL store runs its statements, built once per store from its
 * `Dialect` and shared by its reads, its lease writes and its other writes.
 *
 * The three ways SQL is run (docs/store.md, "How the store runs SQL: three paths"):
 * 1. `drive`: a write's `Steps`, one Effect per statement, inside `dialect.transaction`
 *    (PostgreSQL's writes; every write over a caller's SqlClient);
 * 2. `dialect.transact`: the same `Steps` in one synchronous SQLite transaction (SqliteSessionStore.layer);
 * 3. `dialect.append`: PostgreSQL's one-statement append (PgAppend), derived from `project`.
 * Reads and the one-statement writes (acquire, renew, release, updateMetadata) go through `query`.
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Clock, Dialect } from "./Dialect.js"
import { type SessionRow, sessionColumns } from "./Rows.js"
import * as SqlStatements from "./SqlStatements.js"
import type { Steps } from "./Steps.js"

/** A store's statement runner over its dialect. */
export interface Runner {
  readonly dialect: Dialect
  /** One statement outside a write transaction (or on the current one's connection). */
  readonly query: SqlStatements.Statements["query"]
  /** The store clock, read with one statement. */
  readonly readClock: Effect.Effect<number, SqlError>
  /** The session row of `sessionId`, whoever's tenancy it is. */
  readonly sessionById: (sessionId: string) => Effect.Effect<ReadonlyArray<SessionRow>, SqlError>
  /** Path 1: runs steps one statement at a time, feeding each statement's rows back. */
  readonly drive: <A, E>(steps: Steps<A, E>) => Effect.Effect<A, E | SqlError>
  /** Runs the statements of a write transaction, the dialect's way (path 2) or one Effect each (path 1); a refusal rolls it back. */
  readonly transact: <A, E>(steps: (clock: Clock) => Steps<A, E>, session?: string) => Effect.Effect<A, E | SqlError>
}

/** The runner of `dialect` over the `SqlClient` in context. */
export const make = (dialect: Dialect) =>
  Effect.map(SqlStatements.make(dialect.placeholders, dialect.outside), ({ query }): Runner => {
    const readClock = Effect.flatMap(dialect.clock, (clock) =>
      Effect.map(
        query<{ now: number | string }>(`SELECT ${clock.text} AS now`, clock.params),
        (rows) => Number(rows[0]!.now)
      ))

    const sessionById = (sessionId: string) =>
      query<SessionRow>(`SELECT ${sessionColumns} FROM troupe_sessions WHERE id = ?`, [sessionId])

    const drive = <A, E>(steps: Steps<A, E>): Effect.Effect<A, E | SqlError> => {
      const resume = (rows: ReadonlyArray<unknown> | undefined): Effect.Effect<A, E | SqlError> => {
        const next = steps.next(rows as ReadonlyArray<never>)
        if (next.done) return next.value
        return Effect.flatMap(query(next.value.text, next.value.params), resume)
      }
      return Effect.suspend(() => resume(undefined))
    }

    const transact = <A, E>(steps: (clock: Clock) => Steps<A, E>, session?: string): Effect.Effect<A, E | SqlError> =>
      dialect.transact !== undefined
        ? dialect.transact(steps, session)
        : dialect.transaction(Effect.flatMap(dialect.clock, (clock) => drive(steps(clock))))

    return { dialect, query, readClock, sessionById, drive, transact }
  })
