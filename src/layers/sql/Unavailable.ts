/**
 * Where the SQL store maps its driver's failures: once, at the edge of each
 * store operation, to `StoreUnavailable` (the driver error kept as the cause).
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { StoreUnavailable } from "../../schema/Errors.js"

/** Maps a driver failure to `StoreUnavailable`, keeping the driver error as the cause. */
export const unavailable = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E | SqlError, R>) =>
  Effect.catchIf(
    effect,
    (error): error is SqlError => (error as { _tag?: string })?._tag === "SqlError",
    (cause) => Effect.fail(new StoreUnavailable({ operation, cause }))
  ) as Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable, R>
