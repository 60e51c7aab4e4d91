/**
 * The backstop for a lost cross-process signal: every `every`, the host reads
 * the inbox of each of its live actors and rings the bell of one that holds
 * something. One fiber for the host instead of a poller per actor; a store no
 * other process shares needs none (its pushes ring the bell themselves).
 *
 * @since 0.1.0
 */
import { Duration, Effect } from "effect"
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
      // Entries that leave meanwhile are skipped, new ones are visited: a Map's iterator allows both.
      for (const [sessionId, bell] of actors) {
        if (bell.pending()) continue
        const items = yield* Effect.orElseSucceed(store.readInbox(sessionId, { limit: 1 }), () => [])
        if (items.length > 0) bell.ring()
      }
    }
  })
