/**
 * How a `troupe sessions` subcommand reaches the daemon: one connection for
 * the command (`Connect`), its errors mapped to exits, and paged listings
 * read to a limit.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Connect from "../Connect.js"
import type * as ExitCode from "../ExitCode.js"

/** Runs a client command: connect, act, map errors to exits. */
export const withClient = <A>(
  o: Connect.ConnectOptions,
  body: (connected: Connect.Connected) => Effect.Effect<A, Connect.CallError | ExitCode.CliFailure>
): Effect.Effect<A, ExitCode.CliFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const connected = yield* Connect.connect(o)
    return yield* body(connected).pipe(
      Effect.mapError((error) => (error._tag === "CliFailure" ? error : connected.fail(error)))
    )
  }))

/** Up to `limit` items of a paged listing, `pageMax` at most a page, following `nextCursor`. */
export const collect = <A, E>(
  limit: number,
  pageMax: number,
  page: (size: number, cursor: string | undefined) => Effect.Effect<{ readonly items: ReadonlyArray<A>; readonly nextCursor?: string | undefined }, E>
) =>
  Effect.gen(function*() {
    const items: Array<A> = []
    let cursor: string | undefined
    while (items.length < limit) {
      const next = yield* page(Math.max(1, Math.min(pageMax, limit - items.length)), cursor)
      items.push(...next.items)
      cursor = next.nextCursor
      if (cursor === undefined || next.items.length === 0) break
    }
    return items
  })
