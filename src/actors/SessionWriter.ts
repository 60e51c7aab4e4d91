/**
 * An actor's single write path: every commit, the actor's or its turn's (a
 * spawn included), is fenced by the lease epoch and the expected head, folded
 * onto the actor's state, and then announced. What a commit causes happens
 * between the append and the announcing, so whoever sees a record published
 * also sees what it caused: a turn's end is reported to telemetry (and, for a
 * child, its result is delivered to the parent's inbox), closed callbacks are
 * withdrawn from providers, and a steer or child result is handed to the
 * running turn. Losing the lease is fatal.
 *
 * @since 0.1.0
 */
import { identity } from "effect/Function"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import { type Conflict, LeaseLost, type SpawnRefused, type StoreUnavailable } from "../schema/Errors.js"
import { type CallbackId, type CommitId, type InputId, makeCommitId, type SessionId } from "../schema/Ids.js"
import { ChildResult, childResultInputId, type Message } from "../schema/Inbox.js"
import type { Commit, CommitReceipt, Lease } from "../schema/Lease.js"
import type { RecordBody, TurnEnded } from "../schema/Record.js"
import type { Session } from "../schema/Session.js"
import type { CallbackBroker } from "../services/CallbackBroker.js"
import { spawnRecord } from "../internal/SessionDraft.js"
import type { SessionStore, SpawnChild, Spawned } from "../services/SessionStore.js"
import type { RunningTurn } from "./RunningTurn.js"
import * as SessionState from "./SessionState.js"

/** How the store refuses an append. */
type AppendError = Effect.Effect.Error<ReturnType<SessionStore["Type"]["append"]>>

/** What the writer changes as it commits. */
export interface Target {
  readonly session: Session
  state: SessionState.SessionState
  running: RunningTurn | undefined
  /** Where parked turns wait for answers. */
  readonly answers: Map<CallbackId, Deferred.Deferred<unknown>>
}

/** What the writer is given. */
export interface Deps {
  readonly store: SessionStore["Type"]
  readonly broker: CallbackBroker["Type"]
  readonly lease: Ref.Ref<Lease>
  /** Ends the actor with the error (the lease is lost, or the store is gone). */
  readonly lose: (error: LeaseLost | StoreUnavailable) => Effect.Effect<never, LeaseLost | StoreUnavailable>
  readonly announceEnd: (end: TurnEnded, excluded: boolean) => Effect.Effect<void>
  /** Announces a written commit: what it does in place is done as it is called; `undefined` when nothing is left to run. */
  readonly publishRecords: (firstSeq: number, at: number, records: ReadonlyArray<RecordBody>) => Effect.Effect<void> | undefined
  /** Wakes another session's actor (the parent a result went to). */
  readonly wake: (sessionId: SessionId) => Effect.Effect<void>
  /** The actor's scope: it owns the deliveries of child results, which never delay the turn that ended. */
  readonly scope: Scope.Scope
}

/** A child's result, delivered to its parent's inbox under an id derived from the turn (a redelivery is a no-op). */
export const deliverResult = (deps: Pick<Deps, "store" | "wake">, session: Session, end: TurnEnded) =>
  Effect.suspend(() => {
    const parentId = session.parentId
    if (parentId === null) return Effect.void
    const result = new ChildResult({
      inputId: childResultInputId(end.turnId),
      childSessionId: session.id,
      turnId: end.turnId,
      outcome: end.outcome,
      output: end.output,
      publicFinalMessage: end.publicFinalMessage,
      failureCode: end.failureCode,
      reason: end.reason,
      usage: end.usage
    }, true)
    return deps.store.push(parentId, result).pipe(
      Effect.flatMap((admission) => (admission.duplicate ? Effect.void : deps.wake(parentId))),
      // A closed (or gone) parent takes nothing: the result stays in the child's own log.
      Effect.catchAll((error) => Effect.logDebug("child result not delivered", error).pipe(Effect.annotateLogs({ parentId })))
    )
  })

/** Whether folding `record` causes more than the fold (see `written`'s switch). */
const causes = (record: RecordBody): boolean =>
  record._tag === "turn_ended" || record._tag === "callback_resolved" || record._tag === "child_result" ||
  (record._tag === "input_applied" && record.kind === "steer")

/** A commit of `records` on `target`'s head under the lease `current`. */
const commitOf = (
  target: Target,
  current: Lease,
  commitId: CommitId,
  records: ReadonlyArray<RecordBody>,
  consumes: ReadonlyArray<InputId>,
  admits?: ReadonlyArray<Message>
): Commit => ({
  commitId,
  sessionId: target.session.id,
  owner: current.owner,
  epoch: current.epoch,
  expectedHeadSeq: target.state.head,
  records,
  consumes,
  admits
})

/**
 * Stores a commit of `records` (consuming `consumes`, admitting `admits`) under the current lease:
 * a refusal goes to `onFailure` with the lease it was made under (for `fenced`), the receipt to
 * `onSuccess`. Steps chained by hand rather than a generator: every commit of a turn runs them;
 * `wrap` wraps the append (or not) in one step of the caller's.
 */
const storeCommit = <A, E>(
  target: Target,
  { lease, store }: Pick<Deps, "lease" | "store">,
  records: ReadonlyArray<RecordBody>,
  consumes: ReadonlyArray<InputId>,
  admits: ReadonlyArray<Message> | undefined,
  wrap: (append: Effect.Effect<CommitReceipt, AppendError>) => Effect.Effect<CommitReceipt, AppendError>,
  onFailure: (error: AppendError, current: Lease) => Effect.Effect<A, E>,
  onSuccess: (receipt: CommitReceipt) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.flatMap(Ref.get(lease), (current) =>
    Effect.flatMap(makeCommitId, (commitId) =>
      Effect.matchEffect(wrap(store.append(commitOf(target, current, commitId, records, consumes, admits))), {
        onFailure: (error) => onFailure(error, current),
        onSuccess
      })))

/** The write path of an actor. */
export const make = (target: Target, deps: Deps) => {
  const { lease, lose, store } = deps
  const fenced = (current: Lease) => (error: { readonly _tag: string }): Effect.Effect<never, LeaseLost | StoreUnavailable> =>
    error._tag === "SequenceConflict"
      ? lose(new LeaseLost({ sessionId: target.session.id, epoch: current.epoch, owner: current.owner }))
      : error._tag === "LeaseLost" || error._tag === "StoreUnavailable"
      ? lose(error as LeaseLost | StoreUnavailable)
      : Effect.die(error)

  /**
   * Folds what a commit wrote from `firstSeq`, then runs what it causes and
   * announces it. A commit whose records cause nothing (most of a turn's:
   * operations, receipts) is folded and announced in place: `undefined` when nothing is left to run.
   */
  const written = (firstSeq: number, at: number, records: ReadonlyArray<RecordBody>): Effect.Effect<void> | undefined => {
    if (records.some(causes)) return causing(firstSeq, at, records)
    // Folded as it is called: callers call it once the commit is written (no `suspend` step).
    target.state = SessionState.applyCommit(target.state, firstSeq, at, records)
    return deps.publishRecords(firstSeq, at, records)
  }

  const causing = (firstSeq: number, at: number, records: ReadonlyArray<RecordBody>) =>
    Effect.gen(function*() {
      const before = target.state
      target.state = SessionState.applyCommit(before, firstSeq, at, records)
      for (const record of records) {
        switch (record._tag) {
          case "turn_ended":
            if (target.running?.started.turnId === record.turnId) target.running = undefined
            if (before.active?.started.turnId === record.turnId) {
              yield* deps.announceEnd(record, before.active.started.excludeFromAnalytics === true)
              if (target.session.parentId !== null) yield* Effect.forkIn(deliverResult(deps, target.session, record), deps.scope)
            }
            break
          case "callback_resolved":
            target.answers.delete(record.callbackId)
            yield* deps.broker.withdraw(record.callbackId)
            break
          case "input_applied":
            if (record.kind === "steer" && target.running !== undefined) yield* target.running.steered
            break
          case "child_result":
            if (target.running !== undefined) yield* target.running.steered
            break
        }
      }
      const published = deps.publishRecords(firstSeq, at, records)
      if (published !== undefined) yield* published
    })

  /**
   * Stores a commit (see `storeCommit`), then folds and announces it: a `Conflict` is `onConflict`'s, any
   * other refusal fenced. The append is waited for even when interrupted: the statement commits or
   * not on its own anyway, and the PostgreSQL store's append reserves a connection that an
   * interrupted wait would leak.
   */
  const stored = <A>(
    records: ReadonlyArray<RecordBody>,
    consumes: ReadonlyArray<InputId>,
    admits: ReadonlyArray<Message> | undefined,
    onConflict: (error: Conflict) => Effect.Effect<A>,
    onReceipt: (receipt: CommitReceipt) => A
  ): Effect.Effect<A, LeaseLost | StoreUnavailable> =>
    storeCommit(
      target,
      deps,
      records,
      consumes,
      admits,
      Effect.uninterruptible,
      (error, current) => (error._tag === "Conflict" ? onConflict(error) : fenced(current)(error)),
      (receipt) => {
        const announcing = written(receipt.firstSeq, receipt.at, records)
        return announcing === undefined ? Effect.succeed(onReceipt(receipt)) : Effect.as(announcing, onReceipt(receipt))
      }
    )

  /** Appends `records`, consuming `consumes` (a `Conflict` here is a defect: the actor consumes what it read). */
  const append = (
    records: ReadonlyArray<RecordBody>,
    consumes: ReadonlyArray<InputId>
  ): Effect.Effect<CommitReceipt, LeaseLost | StoreUnavailable> => stored(records, consumes, undefined, Effect.die, identity)

  /**
   * A turn's commit of `records`, for a caller that runs it uninterruptibly (under `Lock.atomic`):
   * its receipt, once folded and announced, goes to `then`; a lost lease or a gone store ends the
   * actor (`lose`) and interrupts the turn.
   */
  const appendForTurn = <A>(
    records: ReadonlyArray<RecordBody>,
    then: (receipt: CommitReceipt) => Effect.Effect<A>
  ): Effect.Effect<A> =>
    storeCommit(
      target,
      deps,
      records,
      [],
      undefined,
      identity,
      (error, current) => (error._tag === "Conflict" ? Effect.die(error) : Effect.catchAll(fenced(current)(error), () => Effect.interrupt)),
      (receipt) => {
        const announcing = written(receipt.firstSeq, receipt.at, records)
        return announcing === undefined ? then(receipt) : Effect.flatMap(announcing, () => then(receipt))
      }
    )

  /**
   * Appends `records`, admitting `admits` into the inbox and consuming them in the same commit:
   * `None` when the store refuses the admission (a ready item is ahead of them, or an input id
   * is known already), and nothing was written.
   */
  const admit = (
    records: ReadonlyArray<RecordBody>,
    admits: ReadonlyArray<Message>
  ): Effect.Effect<Option.Option<CommitReceipt>, LeaseLost | StoreUnavailable> =>
    stored(records, [], admits, () => Effect.succeedNone, Option.some)

  /**
   * Spawns a child with the parent's `records` in one transaction: the store
   * writes the parent's `child_spawned` first, then `records`. A refusal of the
   * policy (or an alias taken) writes nothing.
   */
  const spawn = (
    input: Omit<SpawnChild, "principal" | "commit">,
    records: ReadonlyArray<RecordBody>
  ): Effect.Effect<Spawned, SpawnRefused | Conflict | LeaseLost | StoreUnavailable> =>
    Effect.gen(function*() {
      const current = yield* Ref.get(lease)
      const commit = commitOf(target, current, yield* makeCommitId, records, [])
      const spawned = yield* store.spawn({ ...input, principal: target.session.principal, commit }).pipe(
        Effect.catchAll((error): Effect.Effect<never, SpawnRefused | Conflict | LeaseLost | StoreUnavailable> =>
          error._tag === "SpawnRefused" || error._tag === "Conflict"
            ? Effect.fail(error)
            : fenced(current)(error)
        )
      )
      const spawnedRecord = spawnRecord({ ...input, principal: target.session.principal, commit }, spawned.child)
      const announcing = written(spawned.receipt.firstSeq, spawned.receipt.at, [spawnedRecord, ...records])
      if (announcing !== undefined) yield* announcing
      return spawned
    })

  return { append, appendForTurn, admit, spawn }
}

/** An actor's write path. */
export type SessionWriter = ReturnType<typeof make>
