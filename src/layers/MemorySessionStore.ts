/**
 * The in-memory `SessionStore`: for tests and ephemeral runs. Every operation
 * is one synchronous step, so it is atomic without locks. Time comes from the
 * Effect `Clock`, so `TestClock` drives lease expiry.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { OpenCallback } from "../schema/Callback.js"
import {
  Conflict,
  InvalidInput,
  LeaseLost,
  SequenceConflict,
  SessionClosed,
  SessionNotFound,
  type SpawnRefused,
  StaleCallback
} from "../schema/Errors.js"
import { makeSessionId, type CallbackId, type CommitId, type InputId, type OperationId, type SessionId } from "../schema/Ids.js"
import { Admission, type CallbackAnswer, Command, InboxItem } from "../schema/Inbox.js"
import { commandText } from "../internal/CommandText.js"
import { type Commit, CommitReceipt, Lease } from "../schema/Lease.js"
import { OperationReceipt } from "../schema/Operation.js"
import type { Principal } from "../schema/Principal.js"
import { LogPage, LogRecord } from "../schema/Record.js"
import { ChildEntry, ChildPage, maxTreeNodes, Session, SessionPage, SessionTree, TreeNode } from "../schema/Session.js"
import * as Trusted from "../schema/Trusted.js"
import * as ListCursor from "../internal/ListCursor.js"
import { type Head, type OperationChange, project, statusOf } from "../internal/LogProjection.js"
import {
  aliasFor,
  childInput,
  childTurnRefusal,
  createdRecord,
  draft,
  printOf,
  spawnRecord,
  spawnRefusal,
  tenantOf
} from "../internal/SessionDraft.js"
import { admitsRefusal, answerRefusal, closedReason, type Pushable, SessionStore, type Spawned } from "../services/SessionStore.js"

interface Entry {
  session: Session
  readonly tenant: string
  readonly idempotencyKey: string | undefined
  readonly fingerprint: string
  readonly path: ReadonlyArray<SessionId>
  openCallbacks: Map<CallbackId, OpenCallback>
  /** Parks in `agents.wait` not ended yet (`children_awaited`): they count with the open callbacks in the status. */
  waits: number
  /** Open callbacks an answer was admitted to (at most one each: `admitAnswer`). */
  readonly answered: Set<CallbackId>
  readonly inbox: Array<InboxSlot>
  /**
   * Unconsumed inbox items, and the index of the first slot that may be one: kept as items are
   * admitted and consumed, so a session's reads and checks cost the same however long its inbox
   * has grown (consumed items stay, for idempotency).
   */
  ready: number
  firstReady: number
  readonly inputs: Map<InputId, number>
  readonly log: Array<LogRecord>
  readonly operations: Map<OperationId, OperationReceipt>
  lease: { owner: string | null; epoch: number; expiresAt: number }
  /** Direct children, oldest first. */
  readonly children: Array<SessionId>
  /** On a root: child turns admitted across its whole tree. */
  childTurns: number
}

/** An admitted command, in its place in the inbox. */
interface InboxSlot {
  readonly item: InboxItem
  /** The command's canonical encoding, made the first time an input id is admitted again (most never are). */
  fingerprint: string | undefined
  consumed: boolean
}


/** Builds an empty in-memory store. */
export const make = Effect.sync(() => {
  const sessions = new Map<SessionId, Entry>()
  const byKey = new Map<string, SessionId>()
  const commits = new Map<CommitId, CommitReceipt>()
  // The child each spawn commit created, for replays.
  const spawns = new Map<CommitId, SessionId>()
  // Newest last, so listings walk it backwards.
  const order: Array<SessionId> = []

  const find = (sessionId: SessionId) => {
    const entry = sessions.get(sessionId)
    return entry ? Effect.succeed(entry) : Effect.fail(new SessionNotFound({ sessionId }))
  }

  /** The session when it belongs to `principal`'s tenancy; any other is indistinguishable from an unknown one. */
  const owned = (principal: Principal, sessionId: SessionId) => {
    const entry = sessions.get(sessionId)
    return entry && entry.tenant === tenantOf(principal)
      ? Effect.succeed(entry)
      : Effect.fail(new SessionNotFound({ sessionId }))
  }

  const isLive = (entry: Entry, now: number) => entry.lease.owner !== null && entry.lease.expiresAt > now

  const now = Clock.currentTimeMillis
  /**
   * Runs `f` with the time read in place: one Effect step, where `yield* now`
   * inside a generator costs several (the store's hot writes are synchronous).
   */
  const at = <X extends Effect.Effect<unknown, unknown>>(
    f: (now: number) => X
  ): Effect.Effect<Effect.Effect.Success<X>, Effect.Effect.Error<X>> =>
    Effect.clockWith((clock) => f(clock.unsafeCurrentTimeMillis())) as never
  const missing = (sessionId: SessionId) => Effect.fail(new SessionNotFound({ sessionId }))

  /** Stores a new session (validated by the caller) and its `session_created` record. */
  const insert = (
    session: Session,
    tenant: string,
    parent: Entry | undefined,
    idempotencyKey: string | undefined,
    print: string,
    at: number
  ): Entry => {
    const id = session.id
    const entry: Entry = {
      session,
      tenant,
      idempotencyKey,
      fingerprint: print,
      path: [...(parent?.path ?? []), id],
      openCallbacks: new Map(),
      waits: 0,
      answered: new Set(),
      inbox: [],
      ready: 0,
      firstReady: 0,
      inputs: new Map(),
      log: [],
      operations: new Map(),
      lease: { owner: null, epoch: 0, expiresAt: 0 },
      children: [],
      childTurns: 0
    }
    const commitId = `commit_${id.slice(4)}` as CommitId
    entry.log.push(Trusted.make(LogRecord, { sessionId: id, seq: 1, at, commitId, body: createdRecord(session) }))
    sessions.set(id, entry)
    order.push(id)
    parent?.children.push(id)
    if (idempotencyKey !== undefined) byKey.set(`${tenant}\u0000${idempotencyKey}`, id)
    return entry
  }

  const aliasTaken = (parent: Entry, alias: string) =>
    parent.children.some((id) => sessions.get(id)!.session.alias === alias)

  /**
   * Admits `command` (not yet known to the entry, which is open) at the end of the inbox: ready,
   * or already `consumed` (a commit's `admits`).
   */
  const enqueue = (entry: Entry, command: Command, at: number, consumed = false) => {
    const sessionId = entry.session.id
    const position = entry.inbox.length + 1
    const item = new InboxItem({ sessionId, position, receivedAt: at, command }, true)
    entry.inbox.push({ item, fingerprint: undefined, consumed })
    entry.inputs.set(command.inputId, position)
    if (consumed) skipConsumed(entry)
    else entry.ready++
    return new Admission({ sessionId, inputId: command.inputId, position, duplicate: false }, true)
  }

  /** Marks a ready slot consumed. */
  const consume = (entry: Entry, slot: InboxSlot) => {
    slot.consumed = true
    entry.ready--
    skipConsumed(entry)
  }

  /** Moves `firstReady` past the consumed slots at the front of what may still be ready. */
  const skipConsumed = (entry: Entry) => {
    while (entry.firstReady < entry.inbox.length && entry.inbox[entry.firstReady]!.consumed) entry.firstReady++
  }

  /** An earlier admission of `command`'s inputId: a duplicate, or `Conflict` when its content differs. */
  const earlier = (entry: Entry, command: Command) => {
    const known = entry.inputs.get(command.inputId)
    if (known === undefined) return undefined
    const slot = entry.inbox[known - 1]!
    slot.fingerprint ??= commandText(slot.item.command)
    if (slot.fingerprint !== commandText(command)) {
      return Either.left(
        new Conflict({ entity: "input", key: command.inputId, reason: "inputId reused with a different command" })
      )
    }
    return Either.right(
      new Admission({ sessionId: entry.session.id, inputId: command.inputId, position: known, duplicate: true }, true)
    )
  }

  /** A commit's earlier receipt, `Conflict` when another session used its id, or undefined. */
  const replayOf = (commit: Commit) => {
    const replay = commits.get(commit.commitId)
    if (replay === undefined) return undefined
    return replay.sessionId === commit.sessionId
      ? Either.right(replay)
      : Either.left(
        new Conflict({ entity: "commit", key: commit.commitId, reason: "commitId already used by another session" })
      )
  }

  /**
   * Checks `commit` against the entry (fence, head, inbox) at `at` and returns
   * how to apply it, or why not. Nothing is written until the returned
   * function runs, and from then on nothing fails: all or nothing.
   */
  const prepare = (
    entry: Entry,
    commit: Commit,
    at: number
  ): Either.Either<() => CommitReceipt, LeaseLost | SequenceConflict | Conflict> => {
    if (!holds(entry, commit.owner, commit.epoch, at)) {
      return Either.left(new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner }))
    }
    const session = entry.session
    if (session.headSeq !== commit.expectedHeadSeq) {
      return Either.left(
        new SequenceConflict({ sessionId: commit.sessionId, expected: commit.expectedHeadSeq, actual: session.headSeq })
      )
    }
    if (new Set(commit.consumes).size !== commit.consumes.length) {
      return Either.left(new Conflict({ entity: "input", key: commit.consumes[0]!, reason: "consumed twice in one commit" }))
    }
    const slots: Array<Entry["inbox"][number]> = []
    for (const inputId of commit.consumes) {
      const position = entry.inputs.get(inputId)
      const slot = position === undefined ? undefined : entry.inbox[position - 1]!
      if (!slot || slot.consumed) {
        return Either.left(new Conflict({ entity: "input", key: inputId, reason: "not a ready inbox item" }))
      }
      slots.push(slot)
    }
    const admits = commit.admits ?? []
    if (admits.length > 0) {
      const ready = entry.ready - slots.length
      const refused = admitsRefusal(admits, ready, (inputId) => entry.inputs.has(inputId))
      if (refused !== undefined) return Either.left(refused)
    }
    return Either.right(() => applyCommit(entry, commit, slots, admits, at))
  }

  /** Writes a prepared commit (checked by `prepare`): from here on nothing fails. */
  const applyCommit = (
    entry: Entry,
    commit: Commit,
    slots: ReadonlyArray<InboxSlot>,
    admits: ReadonlyArray<Command>,
    at: number
  ): CommitReceipt => {
    // Projected when applied: a metadata write between preparing and applying is kept.
    const current = entry.session
    const before = entry.openCallbacks.size
    const projection = project(commit.sessionId, headOf(entry), commit.records, at)
    // Indexed loops: a `for…of` compiles to the iterator protocol inside a try/finally, five times here.
    for (let i = 0; i < slots.length; i++) consume(entry, slots[i]!)
    for (let i = 0; i < admits.length; i++) enqueue(entry, admits[i]!, at, true)
    appendLog(entry, commit, current.headSeq + 1, at)
    const changes = projection.operations
    for (let i = 0; i < changes.length; i++) {
      const change = changes[i]!
      entry.operations.set(change.operationId, operationReceipt(commit.sessionId, change, entry.operations.get(change.operationId)))
    }
    const opened = projection.callbacksOpened
    for (let i = 0; i < opened.length; i++) entry.openCallbacks.set(opened[i]!.callbackId, opened[i]!)
    const closed = projection.callbacksClosed
    for (let i = 0; i < closed.length; i++) {
      entry.openCallbacks.delete(closed[i]!)
      entry.answered.delete(closed[i]!)
    }
    // The projection counts the callbacks the batch opened (net) and its parks; the rest are the parks.
    entry.waits = projection.head.openCallbacks - (before + projection.callbacksOpened.length)
    entry.session = sessionAfter(current, projection.head, entry.openCallbacks.size + entry.waits, at)
    const receipt = Trusted.make(CommitReceipt, {
      commitId: commit.commitId,
      sessionId: commit.sessionId,
      firstSeq: current.headSeq + 1,
      headSeq: projection.head.headSeq,
      at
    })
    commits.set(commit.commitId, receipt)
    return receipt
  }

  /** A newest-first page of `candidates` (oldest first) bound to the listing `of`. */
  const pageOf = (
    candidates: ReadonlyArray<SessionId>,
    match: (entry: Entry) => boolean,
    before: SessionId | undefined,
    limit: number,
    of: string
  ) => {
    const items: Array<Session> = []
    let more = false
    for (let i = candidates.length - 1; i >= 0; i--) {
      const id = candidates[i]!
      if (before !== undefined && id >= before) continue
      const entry = sessions.get(id)!
      if (!match(entry)) continue
      if (items.length === limit) {
        more = true
        break
      }
      items.push(entry.session)
    }
    return { items, nextCursor: more ? ListCursor.encode(items[items.length - 1]!.id, of) : undefined }
  }

  /** A page of the log after `after`. */
  const logPageOf = (log: ReadonlyArray<LogRecord>, after: number, limit: number) => {
    // seq n lives at index n - 1.
    const records = log.slice(after, after + limit)
    const cursor = records.length > 0 ? records[records.length - 1]!.seq : after
    return new LogPage({ records, cursor, more: log.length > cursor }, true)
  }

  const readLog: SessionStore["Type"]["readLog"] = (sessionId, options) =>
    Effect.sync(() => logPageOf(sessions.get(sessionId)?.log ?? [], options?.after ?? 0, options?.limit ?? 500))

  /** The unconsumed inbox items, in admission order. */
  const readyOf = (entry: Entry, limit: number) => {
    const ready: Array<InboxItem> = []
    for (let i = entry.firstReady; i < entry.inbox.length && ready.length < limit; i++) {
      const slot = entry.inbox[i]!
      if (!slot.consumed) ready.push(slot.item)
    }
    return ready
  }

  /** Takes the lease of `entry` when it is free or expired (bumping the epoch), else undefined. */
  const acquireNow = (entry: Entry, owner: string, ttlMillis: number, now: number) => {
    if (isLive(entry, now)) return undefined
    entry.lease = { owner, epoch: entry.lease.epoch + 1, expiresAt: now + ttlMillis }
    return new Lease({ sessionId: entry.session.id, owner, epoch: entry.lease.epoch, expiresAt: entry.lease.expiresAt }, true)
  }

  /**
   * Admits `answer` if the rule lets it, in one synchronous step (no fiber
   * can interleave): the callback is marked answered as the answer is queued.
   */
  const admitAnswerNow = (
    entry: Entry,
    answer: CallbackAnswer,
    at: number
  ): Either.Either<Admission, Conflict | SessionClosed | StaleCallback["reason"] | "closed"> => {
    const known = earlier(entry, answer)
    if (known !== undefined) return known
    if (entry.session.status === "closed") return Either.left(new SessionClosed({ sessionId: entry.session.id }))
    const open = entry.openCallbacks.get(answer.callbackId)
    const refusal = answerRefusal(
      open && { turnId: open.turnId, operationId: open.operationId, answered: entry.answered.has(answer.callbackId) },
      entry.session.activeTurnId,
      answer
    )
    if (refusal !== undefined) return Either.left(refusal)
    entry.answered.add(answer.callbackId)
    return Either.right(enqueue(entry, answer, at))
  }

  const entryOf = (session: Session) =>
    new ChildEntry({ session, alias: session.alias, agent: session.agent.name, agentPath: session.agentPath }, true)

  /** `lease` renewed at `at`, or the loss that refuses it. */
  const renewAt = (lease: Lease, ttlMillis: number, at: number): Lease | LeaseLost => {
    const entry = sessions.get(lease.sessionId)
    if (!entry || !holds(entry, lease.owner, lease.epoch, at)) {
      return new LeaseLost({ sessionId: lease.sessionId, epoch: lease.epoch, owner: lease.owner })
    }
    entry.lease = { ...entry.lease, expiresAt: at + ttlMillis }
    return new Lease({ ...lease, expiresAt: entry.lease.expiresAt }, true)
  }

  return SessionStore.of({
    now,

    create: (input) =>
      Effect.gen(function*() {
        const tenant = tenantOf(input.principal)
        const print = printOf(input)
        if (input.idempotencyKey !== undefined) {
          const existing = byKey.get(`${tenant}\u0000${input.idempotencyKey}`)
          if (existing !== undefined) {
            const entry = sessions.get(existing)!
            if (entry.fingerprint !== print) {
              return yield* new Conflict({
                entity: "session",
                key: input.idempotencyKey,
                reason: "idempotency key reused with a different request"
              })
            }
            return entry.session
          }
        }
        let parent: Entry | undefined
        if (input.parentId !== undefined) {
          parent = yield* owned(input.principal, input.parentId)
          if (input.alias !== undefined && aliasTaken(parent, input.alias)) {
            return yield* new Conflict({ entity: "alias", key: input.alias, reason: "alias already taken" })
          }
        }
        const at = yield* now
        const id = input.sessionId ?? (yield* makeSessionId)
        const session = draft(id, input, parent?.session, at)
        insert(session, tenant, parent, input.idempotencyKey, print, at)
        return session
      }),

    get: (sessionId) => Effect.map(find(sessionId), (entry) => entry.session),

    list: (request) =>
      Effect.gen(function*() {
        const limit = yield* ListCursor.limitOf(request.limit)
        const includeArchived = request.includeArchived === true
        const of = ListCursor.listing(request.principal, { _tag: "list", scope: request.scope, includeArchived })
        const before = yield* ListCursor.positionOf(request.cursor, of)
        const tenant = tenantOf(request.principal)
        let match: (entry: Entry) => boolean
        let candidates: ReadonlyArray<SessionId> = order
        if (request.scope === "roots") {
          match = (entry) => entry.tenant === tenant && entry.session.parentId === null
        } else {
          const anchorId = "children" in request.scope ? request.scope.children : request.scope.tree
          const anchor = yield* owned(request.principal, anchorId)
          if ("children" in request.scope) {
            candidates = anchor.children
            match = () => true
          } else {
            match = (entry) => entry.session.id !== anchorId && entry.path.includes(anchorId)
          }
        }
        const page = pageOf(
          candidates,
          (entry) => (includeArchived || !entry.session.archived) && match(entry),
          before,
          limit,
          of
        )
        return new SessionPage(page.nextCursor ? page : { items: page.items }, true)
      }),

    children: (principal, sessionId, request = {}) =>
      Effect.gen(function*() {
        const limit = yield* ListCursor.limitOf(request.limit)
        const of = ListCursor.listing(principal, { _tag: "children", sessionId })
        const before = yield* ListCursor.positionOf(request.cursor, of)
        const anchor = yield* owned(principal, sessionId)
        const page = pageOf(anchor.children, () => true, before, limit, of)
        const items = page.items.map(entryOf)
        return new ChildPage(page.nextCursor ? { items, nextCursor: page.nextCursor } : { items }, true)
      }),

    tree: (principal, sessionId, options = {}) =>
      Effect.gen(function*() {
        const anchor = yield* owned(principal, sessionId)
        const nodes: Array<TreeNode> = []
        // Breadth first, then sorted into creation order: parents come before their children.
        const queue = [...anchor.children]
        for (let i = 0; i < queue.length; i++) {
          const entry = sessions.get(queue[i]!)!
          queue.push(...entry.children)
          if (!options.includeArchived && entry.session.archived) continue
          if (nodes.length === maxTreeNodes) {
            return yield* new InvalidInput({
              what: "tree",
              reason: `more than ${maxTreeNodes} sessions below ${sessionId}: page with list({ scope: { tree } })`
            })
          }
          const session = entry.session
          nodes.push(
            new TreeNode({ session, parentId: session.parentId!, alias: session.alias, agentPath: session.agentPath }, true)
          )
        }
        nodes.sort((a, b) => (a.session.id < b.session.id ? -1 : a.session.id > b.session.id ? 1 : 0))
        return new SessionTree({ root: anchor.session, nodes }, true)
      }),

    findChild: (principal, parentId, child) =>
      Effect.gen(function*() {
        const parent = sessions.get(parentId)
        if (parent !== undefined && parent.tenant === tenantOf(principal)) {
          const byId = sessions.get(child as SessionId)
          if (byId !== undefined && byId.session.parentId === parentId) return byId.session
          for (const id of parent.children) {
            const session = sessions.get(id)!.session
            if (session.id === child || session.alias === child) return session
          }
        }
        return yield* new SessionNotFound({ sessionId: child })
      }),

    updateMetadata: (principal, sessionId, patch) =>
      Effect.gen(function*() {
        const entry = yield* owned(principal, sessionId)
        const at = yield* now
        entry.session = Trusted.make(Session, {
          ...entry.session,
          title: patch.title ?? entry.session.title,
          archived: patch.archived ?? entry.session.archived,
          updatedAt: at
        })
        return entry.session
      }),

    spawn: (input) =>
      Effect.gen(function*() {
        const commit = input.commit
        const replay = replayOf(commit)
        if (replay !== undefined) {
          const receipt = yield* replay
          const childId = spawns.get(commit.commitId)
          if (childId === undefined) {
            return yield* new Conflict({ entity: "commit", key: commit.commitId, reason: "commitId already used by another commit" })
          }
          const child = sessions.get(childId)!
          const admission = earlier(child, input.message)
          if (admission === undefined || Either.isLeft(admission)) {
            return yield* new Conflict({ entity: "commit", key: commit.commitId, reason: "replayed with another first message" })
          }
          return { child: child.session, admission: admission.right, receipt, duplicate: true } satisfies Spawned
        }
        const parent = yield* owned(input.principal, commit.sessionId)
        const at = yield* now
        if (!holds(parent, commit.owner, commit.epoch, at)) {
          return yield* new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner })
        }
        if (parent.session.status === "closed") return yield* new SessionClosed({ sessionId: parent.session.id })
        const root = sessions.get(parent.session.rootId)!
        const refusal = spawnRefusal(parent.session, input.agent.name, parent.children.length, root.childTurns)
        if (refusal !== undefined) return yield* Effect.fail<SpawnRefused>(refusal)
        let alias = input.alias
        if (alias !== undefined) {
          if (aliasTaken(parent, alias)) {
            return yield* new Conflict({ entity: "alias", key: alias, reason: "alias already taken" })
          }
        } else {
          let n = parent.children.length + 1
          while (aliasTaken(parent, aliasFor(input.agent.name, n))) n++
          alias = aliasFor(input.agent.name, n)
        }
        const id = input.sessionId ?? (yield* makeSessionId)
        if (sessions.has(id)) return yield* new Conflict({ entity: "session", key: id, reason: "session id already taken" })
        const create = childInput(input, parent.session, id, alias)
        const child = draft(id, create, parent.session, at)
        const apply = yield* prepare(parent, {
          ...commit,
          records: [spawnRecord(input, child), ...commit.records]
        } as Commit, at)
        // Everything is checked: from here on nothing fails.
        const entry = insert(child, parent.tenant, parent, undefined, printOf(create), at)
        const admission = enqueue(entry, input.message, at)
        root.childTurns++
        const receipt = apply()
        spawns.set(commit.commitId, id)
        return { child, admission, receipt, duplicate: false } satisfies Spawned
      }),

    admitChildTurn: (input) =>
      Effect.gen(function*() {
        const child = yield* owned(input.principal, input.childId)
        if (child.session.parentId !== input.parentId) return yield* new SessionNotFound({ sessionId: input.childId })
        const known = earlier(child, input.message)
        if (known !== undefined) return yield* known
        if (child.session.status === "closed") return yield* new SessionClosed({ sessionId: input.childId })
        const root = sessions.get(child.session.rootId)!
        const refusal = childTurnRefusal(child.session, root.childTurns)
        if (refusal !== undefined) return yield* Effect.fail<SpawnRefused>(refusal)
        root.childTurns++
        return enqueue(child, input.message, yield* now)
      }),

    push: (sessionId, command: Pushable) =>
      at((now) => {
        const entry = sessions.get(sessionId)
        if (entry === undefined) return missing(sessionId)
        if ((command as Command)._tag === "callback_answer") {
          return Effect.fail(new Conflict({ entity: "input", key: command.inputId, reason: "a callback answer goes through admitAnswer" }))
        }
        const known = earlier(entry, command)
        if (known !== undefined) return known
        if (entry.session.status === "closed") return Effect.fail(new SessionClosed({ sessionId }))
        return Effect.succeed(enqueue(entry, command, now))
      }),

    admitAnswer: (sessionId, answer) =>
      Effect.gen(function*() {
        const entry = yield* find(sessionId)
        const admitted = admitAnswerNow(entry, answer, yield* now)
        if (Either.isRight(admitted)) return admitted.right
        const refusal = admitted.left
        if (typeof refusal !== "string") return yield* refusal
        const reason = refusal === "closed" ? yield* closedReason(readLog, sessionId, answer.callbackId) : refusal
        return yield* new StaleCallback({ sessionId, callbackId: answer.callbackId, reason })
      }),

    readInbox: (sessionId, options) =>
      Effect.sync(() => {
        const entry = sessions.get(sessionId)
        return entry === undefined ? [] : readyOf(entry, options?.limit ?? 1000)
      }),

    withPendingInbox: (sessionIds) =>
      Effect.sync(() => sessionIds.filter((id) => (sessions.get(id)?.ready ?? 0) > 0)),

    acquire: (sessionId, owner, ttlMillis) =>
      at((now) => {
        const entry = sessions.get(sessionId)
        if (entry === undefined) return missing(sessionId)
        return Effect.succeed(Option.fromNullable(acquireNow(entry, owner, ttlMillis, now)))
      }),

    start: (sessionId, owner, ttlMillis, limits) =>
      at((now) => {
        const entry = sessions.get(sessionId)
        if (entry === undefined) return missing(sessionId)
        const lease = acquireNow(entry, owner, ttlMillis, now)
        if (lease === undefined) return Effect.succeed(Option.none())
        return Effect.succeed(Option.some({
          lease,
          session: entry.session,
          log: logPageOf(entry.log, 0, limits?.log ?? 1000),
          inbox: readyOf(entry, limits?.inbox ?? 1000)
        }))
      }),

    renew: (lease, ttlMillis) =>
      at((now) => {
        const renewed = renewAt(lease, ttlMillis, now)
        return renewed instanceof LeaseLost ? Effect.fail(renewed) : Effect.succeed(renewed)
      }),

    renewAll: (leases, ttlMillis) => at((now) => Effect.succeed(leases.map((lease) => renewAt(lease, ttlMillis, now)))),

    release: (lease) =>
      Effect.sync(() => {
        const entry = sessions.get(lease.sessionId)
        if (entry && entry.lease.owner === lease.owner && entry.lease.epoch === lease.epoch) {
          entry.lease = { owner: null, epoch: entry.lease.epoch, expiresAt: 0 }
        }
      }),

    releaseIdle: (lease) =>
      Effect.sync(() => {
        const entry = sessions.get(lease.sessionId)
        if (!entry || entry.lease.owner !== lease.owner || entry.lease.epoch !== lease.epoch) return true
        if (entry.ready > 0) return false
        entry.lease = { owner: null, epoch: entry.lease.epoch, expiresAt: 0 }
        return true
      }),

    append: (commit) =>
      at((now) => {
        const replay = replayOf(commit)
        if (replay !== undefined) return replay
        const entry = sessions.get(commit.sessionId)
        if (entry === undefined) return missing(commit.sessionId)
        const apply = prepare(entry, commit, now)
        return Either.isLeft(apply) ? Effect.fail(apply.left) : Effect.succeed(apply.right())
      }),

    readLog,

    operations: (sessionId, turnId) =>
      Effect.sync(() => {
        const all = [...(sessions.get(sessionId)?.operations.values() ?? [])]
        return all
          .filter((receipt) => turnId === undefined || receipt.turnId === turnId)
          .sort((a, b) => a.startedSeq - b.startedSeq)
      }),

    openCallbacks: (sessionId) =>
      Effect.sync(() =>
        [...(sessions.get(sessionId)?.openCallbacks.values() ?? [])].sort((a, b) => a.openedSeq - b.openedSeq)
      ),

    runnable: (options) =>
      Effect.map(now, (at) => {
        const out: Array<SessionId> = []
        const limit = options?.limit ?? 100
        for (const id of order) {
          if (out.length >= limit) break
          const entry = sessions.get(id)!
          if (entry.session.status === "closed" || isLive(entry, at)) continue
          if (entry.session.activeTurnId !== null || entry.ready > 0) out.push(id)
        }
        return out
      })
  })
})

/** The columns of the entry's session that its log determines, as `project` takes them. */
const headOf = (entry: Entry): Head => {
  const session = entry.session
  return {
    headSeq: session.headSeq,
    activeTurnId: session.activeTurnId,
    openCallbacks: entry.openCallbacks.size + entry.waits,
    title: session.title,
    archived: session.archived,
    closed: session.status === "closed"
  }
}

/** Appends a commit's records to the entry's log, the first at `firstSeq`. */
const appendLog = (entry: Entry, commit: Commit, firstSeq: number, at: number) => {
  const records = commit.records
  for (let i = 0; i < records.length; i++) {
    entry.log.push(
      Trusted.make(LogRecord, { sessionId: commit.sessionId, seq: firstSeq + i, at, commitId: commit.commitId, body: records[i]! })
    )
  }
}

/** The receipt of an operation after `change`, over its `previous` receipt when it has one. */
const operationReceipt = (
  sessionId: SessionId,
  change: OperationChange,
  previous: OperationReceipt | undefined
): OperationReceipt => {
  const start = change.start
  const end = change.end
  const receipt: { -readonly [K in keyof OperationReceipt]?: OperationReceipt[K] } = {
    operationId: change.operationId,
    sessionId,
    turnId: previous?.turnId ?? change.turnId,
    kind: start?.kind ?? previous?.kind ?? "tool",
    name: start?.name ?? previous?.name ?? "",
    input: start ? start.input : previous?.input,
    startedSeq: start?.seq ?? previous?.startedSeq ?? end!.seq,
    status: end?.status ?? "started",
    output: end?.output,
    isError: end?.isError ?? false
  }
  if (end) receipt.endedSeq = end.seq
  return Trusted.make(OperationReceipt, receipt as OperationReceipt)
}

/** The session after a commit projected onto `head`, whose open callbacks and parks now number `openCallbacks`. */
const sessionAfter = (current: Session, head: Head, openCallbacks: number, at: number): Session =>
  Trusted.copy(current, {
    headSeq: head.headSeq,
    activeTurnId: head.activeTurnId,
    title: head.title,
    archived: head.archived,
    status: statusOf({ closed: head.closed, activeTurnId: head.activeTurnId, openCallbacks }),
    updatedAt: at
  })

const holds = (entry: Entry, owner: string, epoch: number, now: number) =>
  entry.lease.owner === owner && entry.lease.epoch === epoch && entry.lease.expiresAt > now

/** A fresh, empty in-memory store per layer build. */
export const layer: Layer.Layer<SessionStore> = Layer.effect(SessionStore, make)
