/**
 * The backstop for a lost cross-process signal: every `every`, the host asks
 * the store which of its live actors' inboxes hold something (one call for all
 * of them) and rings those bells. One fiber for the host instead of a poller
 * per actor; a store no other process shares needs none (its pushes ring the
 * bell themselves).
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { SessionId } from "../schema/Ids.js"
import type * as Doorbell from "../internal/Doorbell.js"
import type { SessionStore } from "../services/SessionStore.js"

/** Looks at the inboxes of `actors` every `every`, forever. */
export const run = (
  store: SessionStore["Type"],
  every: Duration.Duration,
  actors: ReadonlyMap<SessionId, Doorbell.Doorbell>
): Effect.Effect<never> =>
  Effect.gen(function*() {
    for (;;) {
      yield* Effect.sleep(every)
      const quiet: Array<SessionId> = []
      for (const [sessionId, bell] of actors) if (!bell.pending()) quiet.push(sessionId)
      if (quiet.length === 0) continue
      // An actor that left meanwhile has no bell to ring; a store failure waits for the next round.
      for (const sessionId of yield* Effect.orElseSucceed(store.withPendingInbox(quiet), () => [])) actors.get(sessionId)?.ring()
    }
  })
