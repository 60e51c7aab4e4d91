/**
 * Group commit on PostgreSQL: when several sessions append at once, their
 * one-statement appends (PgAppend) travel in ONE round trip, as one
 * transaction. A batch is a simple-protocol query of `EXECUTE`s of the
 * append, prepared once per connection (`PREPARE`, so its plan is cached as
 * the named statement's is); a query of several statements runs as one
 * implicit transaction, committed once (one WAL flush) after the last.
 *
 * Every append in a batch is the same statement as alone: it locks its own
 * session row and checks its own lease epoch, expected head, commit id and
 * inputs, and one that is refused (or that met a stale snapshot) writes
 * nothing and returns its row: the others commit. Nothing is acknowledged
 * before the batch's transaction committed: the rows arrive with the query's
 * end. A batch that fails as a whole fails differently by cause: a server
 * error (a deadlock, a commit id taken meanwhile, a lost prepared statement)
 * rolled everything back, so every append runs again alone and gets its own
 * outcome; a lost connection fails every append, as it fails a lone one
 * (a retry of the same commit id is safe: decision 0003).
 *
 * A batch forms only under load: an append goes out at once while fewer than
 * `inFlight` append round trips are under way; otherwise it waits, and the
 * next round trip to end sends everything waiting (up to `maxBatch`) as one.
 * A batch locks its session rows in descending session-id order (its
 * statements' first parameter), so two batches cannot deadlock on each other,
 * nor a batch with a spawn or a child's turn admission, which lock a session
 * and then its root (the tree's oldest, smallest id). See docs/decisions/0021-postgres-turn-round-trips.md.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import { connectionUsable, type Named, statementName } from "./PgNamed.js"

/** How group commit is tuned. */
export interface Options {
  /** At most this many appends in one round trip (default 32). */
  readonly maxBatch?: number | undefined
  /** Append round trips under way at once before appends wait to go together (default 2). */
  readonly inFlight?: number | undefined
  /** Told the size of every round trip that ran (1: alone), for benchmarks and diagnostics. */
  readonly onBatch?: ((size: number) => void) | undefined
}

type Rows = ReadonlyArray<unknown>

interface Waiting {
  readonly name: string
  readonly text: string
  readonly params: ReadonlyArray<unknown>
  readonly resume: (effect: Effect.Effect<Rows, SqlError>) => void
}

/** The node-postgres client of a reserved connection (`@effect/sql-pg` 0.53 exposes it as `pg`). */
interface RawClient {
  readonly query: (text: string, callback: (error: Error | undefined, result: unknown) => void) => void
  readonly end?: () => Promise<void>
}

/** A string as an SQL literal, whatever `standard_conforming_strings` is (as node-postgres' `escapeLiteral`, with native replaces). */
export const quote = (text: string): string =>
  text.includes("\\")
    ? ` E'${text.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`
    : `'${text.replace(/'/g, "''")}'`

/** A parameter as the SQL literal of what the extended protocol would bind (text, arrays of text, numbers, booleans, null). */
export const literal = (value: unknown): string => {
  if (value === null || value === undefined) return "NULL"
  if (typeof value === "boolean") return value ? "TRUE" : "FALSE"
  if (typeof value === "number" && Number.isFinite(value)) return String(value)
  if (typeof value === "string") return quote(value)
  if (Array.isArray(value)) return value.length === 0 ? "'{}'" : `ARRAY[${value.map(literal).join(", ")}]`
  throw new TypeError(`no SQL literal for ${typeof value}`)
}

/** A server's refusal that leaves the connection usable: the batch was rolled back, its appends can run alone. */
const rolledBack = connectionUsable

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

const queryOn = (client: RawClient, text: string) =>
  Effect.async<unknown, unknown>((resume) => {
    client.query(text, (error, result) => resume(error ? Effect.fail(error) : Effect.succeed(result)))
  })

/**
 * A `Named` executor that batches: `solo` runs one statement alone, outside
 * any transaction (the named prepared statement: `PgNamed.alone`); batches
 * run on a connection reserved from `sql`; a statement inside a caller's
 * transaction runs on its connection.
 * Its batches run on fibers of the scope it is made in.
 */
export const make = (solo: Named, options: Options = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const run = yield* FiberSet.makeRuntime<never>()
    const maxBatch = Math.max(1, options.maxBatch ?? 32)
    const inFlight = Math.max(1, options.inFlight ?? 2)
    /** The connections the statement was prepared on (as `troupe_group_…`), by node-postgres client. */
    const prepared = new WeakMap<RawClient, Set<string>>()
    const waiting: Array<Waiting> = []
    let running = 0

    const told = (size: number) => {
      try {
        options.onBatch?.(size)
      } catch {
        // An observer's failure is not the writers'.
      }
    }

    /** Sends `items` (one statement, several sessions) as one query on one connection, in session-id order. */
    const together = (items: ReadonlyArray<Waiting>) =>
      Effect.scoped(Effect.flatMap(sql.reserve, (connection) => {
        const client = (connection as { readonly pg?: RawClient }).pg
        if (typeof client?.query !== "function") {
          return Effect.sync(() => items.forEach((item) => item.resume(solo(item.name, item.text, item.params))))
        }
        const first = items[0]!
        const name = statementName("group", first.text)
        const known = prepared.get(client) ?? new Set<string>()
        const prepare = known.has(name)
          ? Effect.void
          : Effect.tap(queryOn(client, `PREPARE ${name} AS ${first.text}`), () => {
            known.add(name)
            prepared.set(client, known)
          })
        // Newest session first: the store's other writers that lock two rows (spawn, a child's turn) lock the root last.
        const ordered = [...items].sort((a, b) => (String(a.params[0]) > String(b.params[0]) ? -1 : String(a.params[0]) < String(b.params[0]) ? 1 : 0))
        let text: string
        try {
          text = ordered.map((item) => `EXECUTE ${name}(${item.params.map(literal).join(", ")})`).join(";\n")
        } catch {
          // A parameter with no literal: nothing was sent, each goes alone.
          return Effect.sync(() => ordered.forEach((item) => item.resume(solo(item.name, item.text, item.params))))
        }
        return Effect.zipRight(prepare, queryOn(client, text)).pipe(
          Effect.matchEffect({
            onFailure: (error) =>
              Effect.sync(() => {
                if (rolledBack(error)) {
                  known.delete(name)
                  for (const item of ordered) item.resume(solo(item.name, item.text, item.params))
                } else {
                  // Ending it keeps the pool from lending the dead connection out again.
                  client.end?.().catch(() => undefined)
                  for (const item of ordered) item.resume(Effect.fail(failed(error)))
                }
              }),
            onSuccess: (result) =>
              Effect.sync(() => {
                const results = (Array.isArray(result) ? result : [result]) as ReadonlyArray<{ readonly rows?: Rows }>
                ordered.forEach((item, i) => {
                  const rows = results.length === ordered.length ? results[i]?.rows : undefined
                  item.resume(rows === undefined ? Effect.fail(failed(new Error("a batch answered without its rows"))) : Effect.succeed(rows))
                })
              })
          })
        )
      })).pipe(
        // A failure to reserve a connection is every write's; so is a batch ended otherwise (the layer closing).
        Effect.catchAll((error) => Effect.sync(() => items.forEach((item) => item.resume(Effect.fail(failed(error)))))),
        Effect.ensuring(Effect.sync(() => items.forEach((item) => item.resume(Effect.fail(failed(new Error("the store closed"))))))
        )
      )

    /** Sends what waits, while fewer than `inFlight` round trips are under way. */
    const pump = (): void => {
      while (running < inFlight && waiting.length > 0) {
        const name = waiting[0]!.name
        const batch: Array<Waiting> = []
        for (let i = 0; i < waiting.length && batch.length < maxBatch;) {
          if (waiting[i]!.name === name) batch.push(...waiting.splice(i, 1))
          else i++
        }
        running++
        told(batch.length)
        // Alone, the append runs on its own fiber (which cannot be interrupted while it waits: see `execute`).
        if (batch.length === 1) batch[0]!.resume(Effect.ensuring(solo(name, batch[0]!.text, batch[0]!.params), finished))
        else run(Effect.ensuring(together(batch), finished))
      }
    }

    const finished = Effect.sync(() => {
      running--
      pump()
    })

    /** Waits its turn in `waiting`, alone or in a batch. */
    const queued: Named = (name, text, params) =>
      Effect.uninterruptible(Effect.flatten(Effect.async<Effect.Effect<Rows, SqlError>>((resume) => {
        let settled = false
        // The first outcome counts; a later one (the batch's closing guard) is ignored.
        const once = (effect: Effect.Effect<Rows, SqlError>) => {
          if (settled) return
          settled = true
          resume(Effect.succeed(effect))
        }
        waiting.push({ name, text, params, resume: once })
        pump()
      })))

    const execute: Named = (name, text, params) =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) =>
        // Inside a caller's transaction the statement runs on its connection, alone.
        Option.isSome(transaction)
          ? transaction.value[0].execute(text, params, undefined)
          // Once queued it runs: an interrupted caller does not cancel it (as alone), and a round trip it leads is counted until it ends.
          : Effect.uninterruptible(Effect.suspend(() => {
            if (running >= inFlight || waiting.length > 0) return queued(name, text, params)
            // Nothing waits and a round trip is free: it goes alone at once, as `pump` would send it.
            running++
            told(1)
            return Effect.ensuring(solo(name, text, params), finished)
          })))
    return execute
  })
