/**
 * The `SessionStore` on `@effect/sql`'s abstract `SqlClient`, shared by the
 * SQLite and PostgreSQL layers. What differs between them is a small
 * `Dialect`: how a write transaction starts, how the session row is locked, and
 * whose clock leases run on.
 *
 * Every mutation locks the session row first, reads the clock after the lock,
 * checks the lease epoch and the expected head, then writes. The folder holds
 * one module per concern (src/layers/sql/README.md is its map): the dialect,
 * the rows, each write path's statements (`*Steps`), the migrations, the
 * SQLite and PostgreSQL specifics, and the store's reads, lease writes and
 * other writes, which `make` puts together.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { StoreUnavailable } from "../../schema/Errors.js"
import { SessionStore } from "../../services/SessionStore.js"
import type { Dialect } from "./Dialect.js"
import * as Leases from "./Leases.js"
import * as Migrations from "./Migrations.js"
import * as Reads from "./Reads.js"
import * as Runner from "./Runner.js"
import { unavailable } from "./Unavailable.js"
import * as Writes from "./Writes.js"

export type { Append, AppendError, AppendStrategy, Clock, Dialect, Push, PushStrategy } from "./Dialect.js"
export type { Step, Steps } from "./Steps.js"

/**
 * Brings the store's tables up to date (idempotent). A failing migration is a
 * `StoreUnavailable`, not a crash; a first migration racing another process's
 * (both creating the migrations table) is retried.
 */
export const migrate = Migrations.run.pipe(
  Effect.catchAllDefect((defect) => Effect.fail(defect)),
  Effect.mapError((cause) => new StoreUnavailable({ operation: "migrate", cause })),
  Effect.retry({ times: 3, schedule: Schedule.spaced("100 millis") })
)

/** Builds the store over the `SqlClient` in context; the driver layer runs `migrate` first. */
export const make = (dialect: Dialect) =>
  Effect.map(Runner.make(dialect), (runner) => {
    const reads = Reads.make(runner)
    return SessionStore.of({
      now: unavailable("now")(runner.readClock),
      ...reads,
      ...Leases.make(runner),
      ...Writes.make(runner, reads.readLog)
    })
  })
