/**
 * The `StoreSignals` port: "session S changed" as other processes sharing the
 * store commit. A signal is a hint, never data: whoever receives one reads the
 * store for what changed (the inbox, the log after its cursor), so a dropped or
 * repeated signal costs a read, never a lost or a doubled event. Polling stays
 * as the backstop.
 *
 * Beside the per-session signals, one pool-wide hint: "sessions became
 * claimable" (a draining host released leases with work left), on which the
 * pool's claim loops look at once (decision 0020).
 *
 * Layers: `layerNoop` here (a store no other process shares: the in-process
 * host announces its own commits itself); `PgStoreSignals.layer`
 * (`LISTEN/NOTIFY`: inbox pushes by a trigger from the committing transaction,
 * log appends, volatile deltas and the pool's hint by the committing process
 * just after) and `SqliteStoreSignals.layer` (a cheap `PRAGMA data_version`
 * check at a short interval while anything is watched; the pool's hint and
 * volatile deltas through side files beside the database, decision 0047)
 * beside the stores. Shaped like cluster's `MessageStorage`: a
 * later `@effect/cluster` host can take its wake-ups from the same port.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { AssistantDelta } from "../schema/Event.js"
import type { SessionId } from "../schema/Ids.js"

/** What changed in a watched session. */
export type Signal = Data.TaggedEnum<{
  /** A command was pushed to the session's inbox. */
  Inbox: { readonly sessionId: SessionId }
  /** Records were appended to the session's log, up to `seq`. */
  Log: { readonly sessionId: SessionId; readonly seq: number }
  /** Volatile deltas of a turn another process runs (best effort). */
  Deltas: { readonly sessionId: SessionId; readonly events: ReadonlyArray<AssistantDelta> }
  /** Signals may have been missed (a lost connection came back): read everything again. */
  Missed: { readonly sessionId: SessionId }
}>

/** Constructors for `Signal`. */
export const Signal = Data.taggedEnum<Signal>()

/** What a watcher wants beside the changes. */
export interface WatchOptions {
  /**
   * The volatile deltas of turns other processes run (`Deltas`): a layer that
   * must ask the writing process for them (SQLite) asks only for sessions watched so.
   */
  readonly deltas?: boolean | undefined
}

/** The port. */
export class StoreSignals extends Context.Tag("troupe/StoreSignals")<
  StoreSignals,
  {
    /**
     * Signals for `sessionId` from now on, for the scope: subscribe before
     * reading the store, so a change in between is signalled. The queue slides:
     * a watcher that falls behind loses old hints, never the newest.
     */
    readonly watch: (sessionId: SessionId, options?: WatchOptions) => Effect.Effect<Queue.Dequeue<Signal>, never, Scope.Scope>
    /**
     * `watch` without a queue or a fiber to take from it: `f` is called with
     * every signal for `sessionId` from now on, for the scope, as it arrives. It
     * must return at once (an actor rings its doorbell).
     */
    readonly onSignal: (sessionId: SessionId, f: (signal: Signal) => void) => Effect.Effect<void, never, Scope.Scope>
    /**
     * Tells watchers in other processes that this process appended to the
     * session's log up to `seq` (after the commit; a layer whose store signals
     * commits by itself does nothing).
     */
    readonly announce: (sessionId: SessionId, seq: number) => Effect.Effect<void>
    /** Offers volatile deltas of a turn running here to watchers in other processes (best effort; may do nothing). */
    readonly forward: (sessionId: SessionId, events: ReadonlyArray<AssistantDelta>) => Effect.Effect<void>
    /**
     * Tells the pool (every process sharing the store, this one included) that
     * sessions became claimable: this host released leases of sessions with
     * work left (it is draining), so a worker with free slots may look now
     * rather than at its next claim tick. A hint like the others: whoever
     * receives it asks the store what is runnable.
     */
    readonly announceClaimable: Effect.Effect<void>
    /**
     * Hints that sessions may have become claimable anywhere in the pool, for
     * the scope: the queue slides at one, so hints that pile up while the
     * watcher is busy read as one.
     */
    readonly watchClaimable: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
    /** Whether other processes may signal at all: false for a store nobody else shares. */
    readonly shared: boolean
    /**
     * Whether `announce` does anything: false where the store signals commits
     * by itself (SQLite's `data_version`), so a host skips the call per commit.
     */
    readonly announcesCommits: boolean
  }
>() {}

/** A watch that never signals: its queue only ever waits. */
const silent = <A>() => Effect.acquireRelease(Queue.sliding<A>(1), Queue.shutdown)

/** Signals for a store no other process shares: nothing ever comes. */
export const layerNoop: Layer.Layer<StoreSignals> = Layer.succeed(
  StoreSignals,
  StoreSignals.of({
    watch: () => silent<Signal>(),
    onSignal: () => Effect.void,
    announce: () => Effect.void,
    forward: () => Effect.void,
    announceClaimable: Effect.void,
    watchClaimable: silent<void>(),
    shared: false,
    announcesCommits: false
  })
)
