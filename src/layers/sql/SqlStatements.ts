/**
 * Precompiled statements on an `@effect/sql` connection. The store's hot paths
 * run fixed SQL text straight on a `Connection`: the tagged-template route
 * costs about 37 µs of CPU per statement here (compilation, a span and fiber
 * bookkeeping each time), this one about 11 µs. See
 * docs/decisions/0001-sql-hot-path.md.
 *
 * Text is written with `?` placeholders; PostgreSQL's `$n` are derived once
 * per distinct text.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** Placeholder style of a database. */
export type Placeholders = "?" | "$n"

/** Runs `?`-placeholder SQL on the current transaction's connection, or a reserved one. */
export interface Statements {
  readonly query: <Row = Record<string, unknown>>(
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<Row>, SqlError>
}

/** `(?, ?, ?), (?, ?, ?)`: the VALUES list of a multi-row insert. */
export const rows = (count: number, width: number): string => {
  const one = `(${Array.from({ length: width }, () => "?").join(", ")})`
  return Array.from({ length: count }, () => one).join(", ")
}

/** `?, ?, ?`: a list of `count` placeholders, for `IN (…)`. */
export const list = (count: number): string => Array.from({ length: count }, () => "?").join(", ")

/** Shapes of one statement kept at most (larger counts are built each time). */
const largestShape = 256

/**
 * Memoizes the text of a statement by its shape (a dialect's clause, a count of rows or of
 * placeholders): a hot path then hands the same string to the statement cache each time,
 * instead of building it anew (and hashing it again to look it up) for every call.
 */
export const shaped = <const Keys extends ReadonlyArray<string | number>>(
  build: (...keys: Keys) => string
): ((...keys: Keys) => string) => {
  const texts = new Map<string | number, unknown>()
  return (...keys) => {
    let level: Map<string | number, unknown> = texts
    for (let i = 0; i < keys.length - 1; i++) {
      let next = level.get(keys[i]!) as Map<string | number, unknown> | undefined
      if (next === undefined) {
        next = new Map()
        level.set(keys[i]!, next)
      }
      level = next
    }
    const last = keys[keys.length - 1]!
    const known = level.get(last) as string | undefined
    if (known !== undefined) return known
    const text = build(...keys)
    if (keys.every((key) => typeof key !== "number" || key <= largestShape)) level.set(last, text)
    return text
  }
}

/** Runs compiled SQL text with its parameters. */
export type Executor = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SqlError>

/**
 * Builds the runner over the `SqlClient` in context. Inside a transaction a
 * statement runs on the transaction's connection; outside, on `outside`
 * (default: a connection reserved for the one statement, which an interrupted
 * caller waits for: a statement is short, and a reserve given up on would leak
 * its connection).
 */
export const make = (placeholders: Placeholders, outside?: Executor) =>
  Effect.map(SqlClient.SqlClient, (sql): Statements => {
    const compiled = new Map<string, string>()
    const compile = (text: string) => {
      if (placeholders === "?") return text
      let out = compiled.get(text)
      if (out === undefined) {
        let n = 0
        out = text.replace(/\?/g, () => `$${++n}`)
        compiled.set(text, out)
      }
      return out
    }
    // Uninterruptible: `@effect/sql-pg` cannot cancel a `reserve` still waiting for a pool
    // connection, so an interrupted waiter would leave the connection it later gets checked out
    // for good; a few such waiters (an actor stopping after its lease lapsed) starve the store.
    const single: Executor = outside ??
      ((text, params) =>
        Effect.uninterruptible(Effect.scoped(Effect.flatMap(sql.reserve, (conn) => conn.execute(text, params, undefined)))))
    return {
      query: <Row>(text: string, params: ReadonlyArray<unknown>) =>
        Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (tx) =>
          Option.isSome(tx)
            ? tx.value[0].execute(compile(text), params, undefined)
            : single(compile(text), params)) as Effect.Effect<ReadonlyArray<Row>, SqlError>
    }
  })
