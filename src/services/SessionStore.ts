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
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Agent } from "../schema/Agent.js"
import type { Budgets } from "../schema/Budget.js"
import type { OpenCallback } from "../schema/Callback.js"
import {
  Conflict,
  type InvalidInput,
  type LeaseLost,
  type SequenceConflict,
  type SessionClosed,
  type SessionNotFound,
  type SpawnRefused,
  type StaleCallback,
  type StoreUnavailable
} from "../schema/Errors.js"
import type { CallbackId, InputId, OperationId, SessionId, TurnId } from "../schema/Ids.js"
import type { Admission, CallbackAnswer, Command, InboxItem, Message } from "../schema/Inbox.js"
import type { Commit, CommitReceipt, Lease } from "../schema/Lease.js"
import type { OperationReceipt } from "../schema/Operation.js"
import type { BusyPolicy, SubagentPolicy } from "../schema/Policy.js"
import type { Principal } from "../schema/Principal.js"
import type { LogPage } from "../schema/Record.js"
import type { ChildPage, ListScope, Session, SessionPage, SessionTree } from "../schema/Session.js"

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

/**
 * A listing request: always within the caller's tenancy (the whole principal:
 * customer, organization and workspace).
 */
export interface ListSessions {
  readonly principal: Principal
  readonly scope: ListScope
  readonly includeArchived?: boolean | undefined
  /** An opaque cursor from a previous page's `nextCursor`. */
  readonly cursor?: string | undefined
  /** Page size, 1 to 500 (default 50). */
  readonly limit?: number | undefined
}

/** A page of a listing: an opaque cursor from a previous page's `nextCursor`, and a size (1 to 500, default 50). */
export interface PageRequest {
  readonly cursor?: string | undefined
  readonly limit?: number | undefined
}

/** Metadata a caller may change without driving the session: no lease, no record, any status. */
export interface MetadataPatch {
  readonly title?: string | undefined
  readonly archived?: boolean | undefined
}

/**
 * A spawn: a child session, its first message, and the parent's
 * `child_spawned` record, all in one transaction.
 */
export interface SpawnChild {
  /** Whose tree it is: the parent's principal (a mismatch is `SessionNotFound`). */
  readonly principal: Principal
  /**
   * The parent's fenced commit (its lease epoch and expected head, as for
   * `append`). The store writes its `child_spawned` record first, then
   * `commit.records`, and consumes `commit.consumes`. Replaying its `commitId`
   * returns the first spawn's answer and writes nothing.
   */
  readonly commit: Commit
  /** The child's agent, frozen into it. */
  readonly agent: Agent
  /** The child's first message: admitted into its inbox, counted as one child turn. */
  readonly message: Message
  /** The child's id (default: minted). */
  readonly sessionId?: SessionId | undefined
  /** A permanent alias, unique among the parent's children (default `<agent>-<n>`, n = the parent's child count + 1). */
  readonly alias?: string | undefined
  readonly title?: string | undefined
  /** The parent turn and tool call that spawned it, for the `child_spawned` record. */
  readonly turnId?: TurnId | undefined
  readonly operationId?: OperationId | undefined
  readonly busyPolicy?: BusyPolicy | undefined
  readonly budgets?: Budgets | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
}

/** What a spawn wrote (or, on a replay of its commit, had written). */
export interface Spawned {
  /** The child as created (its policy is the root's, copied). */
  readonly child: Session
  /** The admission of its first message. */
  readonly admission: Admission
  /** The parent's commit: its `child_spawned` record is at `receipt.firstSeq`. */
  readonly receipt: CommitReceipt
  /** True when this was a replay of a spawn already written. */
  readonly duplicate: boolean
}

/** A further turn for an existing child, sent by its parent. */
export interface AdmitChildTurn {
  /** The tree's principal (a mismatch is `SessionNotFound`). */
  readonly principal: Principal
  /** The parent sending it: the child must be its direct child, else `SessionNotFound`. */
  readonly parentId: SessionId
  readonly childId: SessionId
  readonly message: Message
}

/** What an actor starts from (`SessionStore.start`): read once its lease is taken. */
export interface ActorStart {
  readonly lease: Lease
  readonly session: Session
  /** The log's first page (`readLog` from the start); `more` when the actor must read on. */
  readonly log: LogPage
  /** The unconsumed inbox in admission order, as `readInbox` reads it. */
  readonly inbox: ReadonlyArray<InboxItem>
}

/** How much `start` reads of the log and the inbox. */
export interface StartLimits {
  /** Log records in the first page (default 1000). */
  readonly log?: number | undefined
  /** Inbox items (default 1000). */
  readonly inbox?: number | undefined
}

/** A command `push` admits: any but a callback answer, which only `admitAnswer` admits. */
export type Pushable = Exclude<Command, CallbackAnswer>

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
     * Lists sessions of the caller's tenancy, newest first, in pages. New
     * sessions never shift later pages: cursors are positions in creation
     * order, bound to the tenancy and the listing (scope, anchor, archived
     * flag); a cursor of another listing or tenancy is `InvalidInput`.
     */
    readonly list: (
      request: ListSessions
    ) => Effect.Effect<SessionPage, SessionNotFound | InvalidInput | StoreUnavailable>

    /**
     * The direct children of a session, newest first, archived ones included,
     * in pages (cursors bound like `list`'s). Another tenancy's session is
     * `SessionNotFound`.
     */
    readonly children: (
      principal: Principal,
      sessionId: SessionId,
      page?: PageRequest
    ) => Effect.Effect<ChildPage, SessionNotFound | InvalidInput | StoreUnavailable>

    /**
     * A session and its whole subtree, oldest first (parents before their
     * children); archived sessions only with `includeArchived`. More than
     * `maxTreeNodes` nodes is `InvalidInput` (page with `list({ scope: { tree } })`).
     */
    readonly tree: (
      principal: Principal,
      sessionId: SessionId,
      options?: { readonly includeArchived?: boolean | undefined }
    ) => Effect.Effect<SessionTree, SessionNotFound | InvalidInput | StoreUnavailable>

    /**
     * A direct child of `parentId` named by its id or its alias (what a
     * parent's tools take). Anything else, a child of another session
     * included, is `SessionNotFound` naming `child`.
     */
    readonly findChild: (
      principal: Principal,
      parentId: SessionId,
      child: string
    ) => Effect.Effect<Session, SessionNotFound | StoreUnavailable>

    /**
     * Changes title and/or archived flag: no lease, no log record, on any
     * session of the principal's tenancy, closed ones and ones another
     * process drives included. Alias, lineage and execution never change.
     */
    readonly updateMetadata: (
      principal: Principal,
      sessionId: SessionId,
      patch: MetadataPatch
    ) => Effect.Effect<Session, SessionNotFound | StoreUnavailable>

    /**
     * Spawns a child in ONE transaction: checks the tree's policy (the
     * parent's frozen copy; the tree's child turns counted on the root's row),
     * creates the child (lineage, alias, the root's policy), admits its first
     * message, and appends the parent's `child_spawned` record (then
     * `commit.records`) as a fenced commit of the parent. Any refusal writes
     * nothing. A closed parent is `SessionClosed`.
     */
    readonly spawn: (
      input: SpawnChild
    ) => Effect.Effect<
      Spawned,
      SpawnRefused | LeaseLost | SequenceConflict | SessionNotFound | SessionClosed | Conflict | StoreUnavailable
    >

    /**
     * Admits a further message to a child from its parent, counting it as one
     * child turn of the tree atomically (`SpawnRefused { reason:
     * "max_child_turns" }` past the limit). A duplicate `inputId` is a
     * duplicate admission and is not counted again.
     */
    readonly admitChildTurn: (
      input: AdmitChildTurn
    ) => Effect.Effect<Admission, SpawnRefused | SessionNotFound | SessionClosed | Conflict | StoreUnavailable>

    /**
     * Admits a command into the session's inbox. Idempotent per `inputId`: the
     * same content is a duplicate admission, other content `Conflict`. A
     * callback answer is `Conflict` here (nothing is written): answers go
     * through `admitAnswer`.
     */
    readonly push: (
      sessionId: SessionId,
      command: Pushable
    ) => Effect.Effect<Admission, SessionNotFound | SessionClosed | Conflict | StoreUnavailable>

    /**
     * Admits an answer to a callback into the session's inbox: at most one
     * answer per callback is ever admitted, through any store over the same
     * data. In the push's own transaction, under the session's lock, the
     * callback must be open, belong to the session's active turn, match the
     * answer's turn and operation, and have no answer admitted yet; the answer
     * is then marked on the callback and pushed, so it is the one the actor
     * applies. Anything else is `StaleCallback` and writes nothing (see
     * `answerRefusal`; a closed callback gets the reason its log records, see
     * `closedReason`). Idempotent per `inputId` as `push` is, and refused on
     * a closed session with `SessionClosed` as `push` is.
     */
    readonly admitAnswer: (
      sessionId: SessionId,
      answer: CallbackAnswer
    ) => Effect.Effect<Admission, StaleCallback | SessionNotFound | SessionClosed | Conflict | StoreUnavailable>

    /** Reads the session's unconsumed inbox items in admission order, at most `limit` (default 1000). */
    readonly readInbox: (
      sessionId: SessionId,
      options?: { readonly limit?: number | undefined }
    ) => Effect.Effect<ReadonlyArray<InboxItem>, StoreUnavailable>

    /**
     * Of `sessionIds`, those whose inbox holds an unconsumed item, in no particular
     * order: one statement per few hundred ids on the SQL stores (a host's inbox
     * backstop asks for all its live actors at once).
     */
    readonly withPendingInbox: (sessionIds: ReadonlyArray<SessionId>) => Effect.Effect<ReadonlyArray<SessionId>, StoreUnavailable>

    /**
     * Acquires the session's lease for `ttlMillis` when it is free or expired,
     * bumping the epoch. `None` when someone else holds a live lease.
     */
    readonly acquire: (
      sessionId: SessionId,
      owner: string,
      ttlMillis: number
    ) => Effect.Effect<Option.Option<Lease>, SessionNotFound | StoreUnavailable>

    /**
     * `acquire`, then, holding the lease, what an actor starts from: the session,
     * the log's first page and the unconsumed inbox, in one call (one transaction
     * on SQLite, which group commit may share; the lease's statement reads the
     * session back on PostgreSQL). `None` when someone else holds a live lease.
     */
    readonly start: (
      sessionId: SessionId,
      owner: string,
      ttlMillis: number,
      limits?: StartLimits
    ) => Effect.Effect<Option.Option<ActorStart>, SessionNotFound | StoreUnavailable>

    /** Extends a live lease; `LeaseLost` when it expired or was taken over. */
    readonly renew: (lease: Lease, ttlMillis: number) => Effect.Effect<Lease, LeaseLost | StoreUnavailable>

    /**
     * Extends many live leases at once (a host's keeper renews all it holds): each comes back
     * renewed, in order, or as `LeaseLost` when it expired or was taken over. One statement per
     * few hundred leases on the SQL stores, instead of one per lease.
     */
    readonly renewAll: (
      leases: ReadonlyArray<Lease>,
      ttlMillis: number
    ) => Effect.Effect<ReadonlyArray<Lease | LeaseLost>, StoreUnavailable>

    /** Gives a lease up; a lease no longer held is left alone. */
    readonly release: (lease: Lease) => Effect.Effect<void, StoreUnavailable>

    /**
     * Gives a lease up unless the session's inbox holds a ready item, in one
     * step (an idle actor passivating: a command pushed through another process
     * meanwhile keeps it, instead of being left with nobody to run it). False
     * when an item is ready and the lease stays held; true when it was given up,
     * or was not held any more.
     */
    readonly releaseIdle: (lease: Lease) => Effect.Effect<boolean, StoreUnavailable>

    /**
     * Appends records and consumes inbox items in one transaction, fenced by the
     * lease epoch and the expected head. Replaying a `commitId` returns the
     * original receipt and writes nothing. Consuming an item that is not ready
     * (unknown, already consumed, or listed twice) is `Conflict`, and nothing
     * of the commit is written. Messages in `admits` enter the inbox after its
     * last item and are consumed by the same commit (an idle actor deciding a
     * message handed to it in memory, instead of a push and then a commit):
     * a ready item left ahead of them, or an input id the inbox knows already
     * (or listed twice), is `Conflict`, and nothing is written.
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

/** What the store knows of a callback when it admits an answer to it, read under the session's lock. */
export interface AnswerTarget {
  readonly turnId: TurnId
  readonly operationId: OperationId
  /** An answer to it was admitted already (it may not be applied yet). */
  readonly answered: boolean
}

/**
 * The admission rule for an answer, shared by every store: `closed` when the
 * callback is not open (`target` undefined: `closedReason` tells how), the
 * `StaleCallback` reason when it is open but takes no (more) answers, and
 * `undefined` when the answer is admitted. The order follows the actor's
 * own check (`staleReason` in actors/Decisions.ts), so both give one reason.
 */
export const answerRefusal = (
  target: AnswerTarget | undefined,
  activeTurnId: TurnId | null,
  answer: Pick<CallbackAnswer, "turnId" | "operationId">
): StaleCallback["reason"] | "closed" | undefined => {
  if (target === undefined) return "closed"
  if (target.answered) return "answered"
  // Only a running turn takes answers: a callback left open by a turn that is gone takes none.
  if (activeTurnId !== target.turnId) return "not_open"
  return target.turnId !== answer.turnId || target.operationId !== answer.operationId ? "mismatch" : undefined
}

/**
 * The admission rule for the messages a commit admits (`Commit.admits`), shared
 * by every store: `ready` is how many ready items the inbox keeps besides those
 * the commit consumes (one would be left ahead of the admitted messages), and
 * `known` tells an input id the inbox holds already (an id listed twice counts
 * as known). `Conflict` names the first known id, else the first admitted one;
 * `undefined` admits them.
 */
export const admitsRefusal = (
  admits: ReadonlyArray<Message>,
  ready: number,
  known: (inputId: InputId) => boolean
): Conflict | undefined => {
  const ids = admits.map((message) => message.inputId)
  if (ids.length === 0) return undefined
  if (ready > 0) return new Conflict({ entity: "input", key: ids[0]!, reason: "a ready inbox item is ahead of it" })
  const knownId = ids.find(known)
  if (knownId === undefined && new Set(ids).size === ids.length) return undefined
  return new Conflict({ entity: "input", key: knownId ?? ids[0]!, reason: "inputId already admitted" })
}

/**
 * Why a callback that is not open is not: how its `callback_resolved` record
 * closed it, or `not_open` when the session never opened it. Closing is
 * final, so this may run after the refusing transaction; stale answers are
 * rare, so reading the log for them is cheaper than keeping an index.
 */
export const closedReason = (
  readLog: SessionStore["Type"]["readLog"],
  sessionId: SessionId,
  callbackId: CallbackId
): Effect.Effect<"answered" | "cancelled" | "not_open", StoreUnavailable> =>
  Effect.gen(function*() {
    let after = 0
    for (;;) {
      const page = yield* readLog(sessionId, { after, limit: 1000 })
      for (const { body } of page.records) {
        if (body._tag === "callback_resolved" && body.callbackId === callbackId) {
          return body.resolution === "answered" ? "answered" as const : "cancelled" as const
        }
      }
      if (!page.more) return "not_open" as const
      after = page.cursor
    }
  })
