/**
 * The `SessionStore` port: the single source of truth. Sessions, inboxes,
 * leases, logs, operation receipts and open callbacks live here and nowhere
 * else; everything else can be rebuilt from it.
 *
 * Layers: `MemorySessionStore.layer`, `SqliteSessionStore.layer`,
 * `PgSessionStore.layer`. All three pass one conformance suite.
 *
 * @since 0.1.0
 */
import { Context, type Effect, type Option } from "effect"
import type { Agent } from "../schema/Agent.js"
import type { Budgets } from "../schema/Budget.js"
import type { OpenCallback } from "../schema/Callback.js"
import type {
  Conflict,
  InvalidInput,
  LeaseLost,
  SequenceConflict,
  SessionClosed,
  SessionNotFound,
  StoreUnavailable
} from "../schema/Errors.js"
import type { SessionId, TurnId } from "../schema/Ids.js"
import type { Admission, Command, InboxItem } from "../schema/Inbox.js"
import type { Commit, CommitReceipt, Lease } from "../schema/Lease.js"
import type { OperationReceipt } from "../schema/Operation.js"
import type { BusyPolicy, SubagentPolicy } from "../schema/Policy.js"
import type { Principal } from "../schema/Principal.js"
import type { LogPage } from "../schema/Record.js"
import type { ListScope, Session, SessionPage } from "../schema/Session.js"

/** What creating a session takes. Lineage is derived from `parentId`. */
export interface CreateSession {
  readonly principal: Principal
  readonly agent: Agent
  readonly title?: string | undefined
  readonly parentId?: SessionId | undefined
  readonly alias?: string | undefined
  /** Same key (per workspace) and same content returns the same session. */
  readonly idempotencyKey?: string | undefined
  readonly busyPolicy?: BusyPolicy | undefined
  readonly budgets?: Budgets | undefined
  readonly subagentPolicy?: SubagentPolicy | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
  /**
   * The id the new session gets: a fresh one (`makeSessionId`); the store mints
   * one when absent. An idempotent replay returns the existing session under
   * its own id, so a caller that chose the id tells a replay from a creation.
   */
  readonly sessionId?: SessionId | undefined
}

/** A listing request: always within one workspace. */
export interface ListSessions {
  readonly workspaceId: string
  readonly scope: ListScope
  readonly includeArchived?: boolean | undefined
  /** An opaque cursor from a previous page's `nextCursor`. */
  readonly cursor?: string | undefined
  /** Page size, 1 to 500 (default 50). */
  readonly limit?: number | undefined
}

/** The store port. */
export class SessionStore extends Context.Tag("troupe/SessionStore")<
  SessionStore,
  {
    /** The store's clock (epoch ms): the one clock every worker's leases agree on. */
    readonly now: Effect.Effect<number, StoreUnavailable>

    /**
     * Creates a session and its `session_created` record (seq 1). Idempotent on
     * `idempotencyKey` within the principal's workspace: the same content returns
     * the existing session, other content fails with `Conflict`. A `parentId`
     * from another workspace is `SessionNotFound`.
     */
    readonly create: (
      input: CreateSession
    ) => Effect.Effect<Session, Conflict | SessionNotFound | StoreUnavailable>

    /** Reads one session. */
    readonly get: (sessionId: SessionId) => Effect.Effect<Session, SessionNotFound | StoreUnavailable>

    /**
     * Lists sessions of one workspace, newest first, in pages. New sessions never
     * shift later pages: cursors are positions in creation order.
     */
    readonly list: (
      request: ListSessions
    ) => Effect.Effect<SessionPage, SessionNotFound | InvalidInput | StoreUnavailable>

    /**
     * Admits a command into the session's inbox. Idempotent per `inputId`: the
     * same content is a duplicate admission, other content `Conflict`.
     */
    readonly push: (
      sessionId: SessionId,
      command: Command
    ) => Effect.Effect<Admission, SessionNotFound | SessionClosed | Conflict | StoreUnavailable>

    /** Reads the session's unconsumed inbox items in admission order, at most `limit` (default 1000). */
    readonly readInbox: (
      sessionId: SessionId,
      options?: { readonly limit?: number | undefined }
    ) => Effect.Effect<ReadonlyArray<InboxItem>, StoreUnavailable>

    /**
     * Acquires the session's lease for `ttlMillis` when it is free or expired,
     * bumping the epoch. `None` when someone else holds a live lease.
     */
    readonly acquire: (
      sessionId: SessionId,
      owner: string,
      ttlMillis: number
    ) => Effect.Effect<Option.Option<Lease>, SessionNotFound | StoreUnavailable>

    /** Extends a live lease; `LeaseLost` when it expired or was taken over. */
    readonly renew: (lease: Lease, ttlMillis: number) => Effect.Effect<Lease, LeaseLost | StoreUnavailable>

    /** Gives a lease up; a lease no longer held is left alone. */
    readonly release: (lease: Lease) => Effect.Effect<void, StoreUnavailable>

    /**
     * Appends records and consumes inbox items in one transaction, fenced by the
     * lease epoch and the expected head. Replaying a `commitId` returns the
     * original receipt and writes nothing. Consuming an item that is not ready
     * (unknown, already consumed, or listed twice) is `Conflict`, and nothing
     * of the commit is written.
     */
    readonly append: (
      commit: Commit
    ) => Effect.Effect<
      CommitReceipt,
      LeaseLost | SequenceConflict | SessionNotFound | Conflict | StoreUnavailable
    >

    /** Reads log records with `seq > after`, at most `limit` (default 500). */
    readonly readLog: (
      sessionId: SessionId,
      options?: { readonly after?: number | undefined; readonly limit?: number | undefined }
    ) => Effect.Effect<LogPage, StoreUnavailable>

    /** Reads operation receipts of a session, optionally of one turn, in start order. */
    readonly operations: (
      sessionId: SessionId,
      turnId?: TurnId
    ) => Effect.Effect<ReadonlyArray<OperationReceipt>, StoreUnavailable>

    /** Reads the session's open callbacks, oldest first. */
    readonly openCallbacks: (sessionId: SessionId) => Effect.Effect<ReadonlyArray<OpenCallback>, StoreUnavailable>

    /**
     * Sessions someone should drive: not closed, lease free or expired, and a
     * ready inbox item or an active turn. Oldest session first.
     */
    readonly runnable: (options?: { readonly limit?: number | undefined }) => Effect.Effect<
      ReadonlyArray<SessionId>,
      StoreUnavailable
    >
  }
>() {}
