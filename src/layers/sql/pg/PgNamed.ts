/**
 * How PostgreSQL's lone statements run: as protocol-level named prepared
 * statements (`Named`), parsed and planned once per connection, on the
 * current transaction's connection, or on a connection of the pool the store
 * opened (`Pool`), or else on one reserved from the `SqlClient`. The append,
 * the push, group commit and the store's reads outside a transaction run so.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { createHash } from "node:crypto"

/** Runs `text` as the protocol-level prepared statement `name`, so the server parses and plans it once per connection. */
export type Named = (
  name: string,
  text: string,
  params: ReadonlyArray<unknown>
) => Effect.Effect<ReadonlyArray<unknown>, SqlError>

interface NodePgClient {
  readonly query: (
    config: { readonly name: string; readonly text: string; readonly values: ReadonlyArray<unknown> },
    callback: (error: Error | undefined, result: { readonly rows: ReadonlyArray<unknown> }) => void
  ) => void
}

/** A node-postgres pool, as far as a lone statement uses it (`pg.Pool#connect`). */
export interface Pool {
  readonly connect: (
    callback: (
      error: Error | undefined,
      client: (NodePgClient & PoolClientEvents) | undefined,
      release: (error?: unknown) => void
    ) => void
  ) => void
}

interface PoolClientEvents {
  readonly on: (event: "error", listener: (error: unknown) => void) => unknown
  readonly off: (event: "error", listener: (error: unknown) => void) => unknown
}

/**
 * The name of a prepared statement of `kind` for the text `sql`: `troupe_`,
 * the kind, and a prefix of the text's SHA-1 (`digits` hex digits), so that
 * one text has one name on every connection.
 */
export const statementName = (kind: string, sql: string, digits = 12): string =>
  `troupe_${kind}_${createHash("sha1").update(sql).digest("hex").slice(0, digits)}`

/**
 * `Named` on a connection reserved from `sql`, or taken from `pool` (the
 * pool `sql` runs on) when the store knows it. `@effect/sql-pg` runs every
 * statement unnamed, so the append would be parsed and planned on every call
 * (0.7–4 ms of server time here); its reserved connection carries the
 * node-postgres client as `pg`, whose named queries are parsed once per
 * connection and then run on a cached generic plan. Without that client
 * (another driver) the statement runs unnamed. An interrupted caller does not
 * cancel the statement: it commits or not on its own, and a retry of the same
 * `commitId` is safe either way. The reservation and the statement are waited
 * for uninterruptibly: `@effect/sql-pg` cannot cancel a wait for a pool
 * connection, and hands the connection to an interrupted waiter later, where
 * nobody releases it (decision 0020: a starved worker lost its whole pool so).
 */
export const named = (sql: SqlClient.SqlClient, pool?: Pool): Named => {
  const outside = alone(sql, pool)
  return (name, text, params) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) =>
      // Inside a caller's transaction the statement must run on its connection.
      Option.isSome(transaction) ? transaction.value[0].execute(text, params, undefined) : outside(name, text, params))
}

/** `named` for a caller that knows it runs outside any transaction (group commit, which looked already). */
export const alone = (sql: SqlClient.SqlClient, pool?: Pool): Named => pool === undefined ? reserved(sql) : pooled(pool)

/** A lone statement on a connection reserved from `sql` for it (a scope, its finalizer, several Effect steps). */
const reserved = (sql: SqlClient.SqlClient): Named => (name, text, params) =>
  Effect.uninterruptible(Effect.scoped(Effect.flatMap(sql.reserve, (connection) => {
    const client = (connection as { readonly pg?: Partial<NodePgClient> }).pg
    if (typeof client?.query !== "function") return connection.execute(text, params, undefined)
    const query = client.query.bind(client)
    return Effect.async<ReadonlyArray<unknown>, SqlError>((resume) => {
      query({ name, text, values: params }, (error, result) => {
        resume(error ? Effect.fail(failed(error)) : Effect.succeed(result.rows))
      })
    })
  })))

/**
 * A lone statement on a connection of `pool`, taken, used and given back in
 * the pool's callbacks, as `@effect/sql-pg` runs a statement outside a
 * transaction (one Effect instead of a reservation's scope): a connection that
 * failed meanwhile (its `error` event) is given back with the error, so the
 * pool ends it. The connection is given back in the statement's callback,
 * whatever became of the caller.
 */
const pooled = (pool: Pool): Named => (name, text, params) =>
  Effect.uninterruptible(Effect.async<ReadonlyArray<unknown>, SqlError>((resume) => {
    pool.connect((error, client, release) => {
      if (error !== undefined || client === undefined) {
        resume(Effect.fail(
          new SqlError({ cause: error ?? new Error("No client returned"), message: "Failed to acquire connection" })
        ))
        return
      }
      let lost: unknown = undefined
      const onError = (cause: unknown) => {
        lost = cause
      }
      client.on("error", onError)
      const done = (outcome: Effect.Effect<ReadonlyArray<unknown>, SqlError>) => {
        client.off("error", onError)
        release(lost)
        resume(outcome)
      }
      try {
        client.query({ name, text, values: params }, (queryError, result) => {
          // A connection the server ended (its FATAL reply comes before the socket closes) must not go back to the pool as idle.
          if (queryError && !connectionUsable(queryError)) lost ??= queryError
          done(queryError ? Effect.fail(failed(queryError)) : Effect.succeed(result.rows))
        })
      } catch (thrown) {
        done(Effect.fail(failed(thrown)))
      }
    })
  }))

/** A server's refusal (an SQLSTATE) that leaves the connection usable; not one of class 08 (connection exception) or 57 (operator intervention, e.g. terminated), nor a driver's error. */
export const connectionUsable = (error: unknown): boolean => {
  const code = (error as { readonly code?: unknown })?.code
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith("08") && !code.startsWith("57")
}

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })
