/**
 * The in-memory `SessionStore`: for tests and ephemeral runs. Every operation
 * is one synchronous step, so it is atomic without locks. Time comes from the
 * Effect `Clock`, so `TestClock` drives lease expiry.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Layer, Option, Schema } from "effect"
import { OpenCallback } from "../schema/Callback.js"
import { Conflict, LeaseLost, SequenceConflict, SessionClosed, SessionNotFound } from "../schema/Errors.js"
import { makeSessionId, type CallbackId, type CommitId, type InputId, type OperationId, type SessionId } from "../schema/Ids.js"
import { Admission, Command, InboxItem } from "../schema/Inbox.js"
import { canonical } from "../schema/Json.js"
import { CommitReceipt, Lease } from "../schema/Lease.js"
import { OperationReceipt } from "../schema/Operation.js"
import { LogPage, LogRecord } from "../schema/Record.js"
import { Session, SessionPage } from "../schema/Session.js"
import * as ListCursor from "../services/ListCursor.js"
import { project, statusOf } from "../services/LogProjection.js"
import { createdRecord, draft, fingerprint } from "../services/SessionDraft.js"
import { SessionStore } from "../services/SessionStore.js"

interface Entry {
  session: Session
  readonly workspaceId: string
  readonly idempotencyKey: string | undefined
  readonly fingerprint: string
  readonly path: ReadonlyArray<SessionId>
  openCallbacks: Map<CallbackId, OpenCallback>
  readonly inbox: Array<{ item: InboxItem; fingerprint: string; consumed: boolean }>
  readonly inputs: Map<InputId, number>
  readonly log: Array<LogRecord>
  readonly operations: Map<OperationId, OperationReceipt>
  lease: { owner: string | null; epoch: number; expiresAt: number }
}

const encodeCommand = Schema.encodeSync(Command)

/** Builds an empty in-memory store. */
export const make = Effect.sync(() => {
  const sessions = new Map<SessionId, Entry>()
  const byKey = new Map<string, SessionId>()
  const commits = new Map<CommitId, CommitReceipt>()
  // Newest last, so listings walk it backwards.
  const order: Array<SessionId> = []

  const find = (sessionId: SessionId) => {
    const entry = sessions.get(sessionId)
    return entry ? Effect.succeed(entry) : Effect.fail(new SessionNotFound({ sessionId }))
  }

  const isLive = (entry: Entry, now: number) => entry.lease.owner !== null && entry.lease.expiresAt > now

  const now = Clock.currentTimeMillis

  return SessionStore.of({
    now,

    create: (input) =>
      Effect.gen(function*() {
        const workspaceId = input.principal.workspaceId.toLowerCase()
        const print = fingerprint(input)
        if (input.idempotencyKey !== undefined) {
          const existing = byKey.get(`${workspaceId}\u0000${input.idempotencyKey}`)
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
          parent = sessions.get(input.parentId)
          if (!parent || parent.workspaceId !== workspaceId) {
            return yield* new SessionNotFound({ sessionId: input.parentId })
          }
          if (input.alias !== undefined) {
            for (const other of sessions.values()) {
              if (other.session.parentId === input.parentId && other.session.alias === input.alias) {
                return yield* new Conflict({ entity: "alias", key: input.alias, reason: "alias already taken" })
              }
            }
          }
        }
        const at = yield* now
        const id = input.sessionId ?? (yield* makeSessionId)
        const session = draft(id, input, parent?.session, at)
        const entry: Entry = {
          session,
          workspaceId,
          idempotencyKey: input.idempotencyKey,
          fingerprint: print,
          path: [...(parent?.path ?? []), id],
          openCallbacks: new Map(),
          inbox: [],
          inputs: new Map(),
          log: [],
          operations: new Map(),
          lease: { owner: null, epoch: 0, expiresAt: 0 }
        }
        const commitId = `commit_${id.slice(4)}` as CommitId
        entry.log.push(new LogRecord({ sessionId: id, seq: 1, at, commitId, body: createdRecord(session) }, true))
        sessions.set(id, entry)
        order.push(id)
        if (input.idempotencyKey !== undefined) byKey.set(`${workspaceId}\u0000${input.idempotencyKey}`, id)
        return session
      }),

    get: (sessionId) => Effect.map(find(sessionId), (entry) => entry.session),

    list: (request) =>
      Effect.gen(function*() {
        const limit = yield* ListCursor.limitOf(request.limit)
        const before = request.cursor === undefined ? undefined : yield* ListCursor.decode(request.cursor)
        const workspaceId = request.workspaceId.toLowerCase()
        let match: (entry: Entry) => boolean
        if (request.scope === "roots") {
          match = (entry) => entry.session.parentId === null
        } else {
          const anchorId = "children" in request.scope ? request.scope.children : request.scope.tree
          const anchor = sessions.get(anchorId)
          if (!anchor || anchor.workspaceId !== workspaceId) {
            return yield* new SessionNotFound({ sessionId: anchorId })
          }
          match = "children" in request.scope
            ? (entry) => entry.session.parentId === anchorId
            : (entry) => entry.session.id !== anchorId && entry.path.includes(anchorId)
        }
        const items: Array<Session> = []
        let more = false
        for (let i = order.length - 1; i >= 0; i--) {
          const id = order[i]!
          if (before !== undefined && id >= before) continue
          const entry = sessions.get(id)!
          if (entry.workspaceId !== workspaceId || !match(entry)) continue
          if (!request.includeArchived && entry.session.archived) continue
          if (items.length === limit) {
            more = true
            break
          }
          items.push(entry.session)
        }
        return new SessionPage(
          more ? { items, nextCursor: ListCursor.encode(items[items.length - 1]!.id) } : { items },
          true
        )
      }),

    push: (sessionId, command) =>
      Effect.gen(function*() {
        const entry = yield* find(sessionId)
        const print = canonical(encodeCommand(command))
        const known = entry.inputs.get(command.inputId)
        if (known !== undefined) {
          const slot = entry.inbox[known - 1]!
          if (slot.fingerprint !== print) {
            return yield* new Conflict({
              entity: "input",
              key: command.inputId,
              reason: "inputId reused with a different command"
            })
          }
          return new Admission({ sessionId, inputId: command.inputId, position: known, duplicate: true }, true)
        }
        if (entry.session.status === "closed") return yield* new SessionClosed({ sessionId })
        const position = entry.inbox.length + 1
        const item = new InboxItem({ sessionId, position, receivedAt: yield* now, command }, true)
        entry.inbox.push({ item, fingerprint: print, consumed: false })
        entry.inputs.set(command.inputId, position)
        return new Admission({ sessionId, inputId: command.inputId, position, duplicate: false }, true)
      }),

    readInbox: (sessionId, options) =>
      Effect.sync(() => {
        const entry = sessions.get(sessionId)
        if (!entry) return []
        const limit = options?.limit ?? 1000
        const ready: Array<InboxItem> = []
        for (const slot of entry.inbox) {
          if (ready.length >= limit) break
          if (!slot.consumed) ready.push(slot.item)
        }
        return ready
      }),

    acquire: (sessionId, owner, ttlMillis) =>
      Effect.gen(function*() {
        const entry = yield* find(sessionId)
        const at = yield* now
        if (isLive(entry, at)) return Option.none()
        entry.lease = { owner, epoch: entry.lease.epoch + 1, expiresAt: at + ttlMillis }
        return Option.some(new Lease({ sessionId, owner, epoch: entry.lease.epoch, expiresAt: entry.lease.expiresAt }, true))
      }),

    renew: (lease, ttlMillis) =>
      Effect.gen(function*() {
        const entry = sessions.get(lease.sessionId)
        const at = yield* now
        if (!entry || !holds(entry, lease.owner, lease.epoch, at)) {
          return yield* new LeaseLost({ sessionId: lease.sessionId, epoch: lease.epoch, owner: lease.owner })
        }
        entry.lease = { ...entry.lease, expiresAt: at + ttlMillis }
        return new Lease({ ...lease, expiresAt: entry.lease.expiresAt }, true)
      }),

    release: (lease) =>
      Effect.sync(() => {
        const entry = sessions.get(lease.sessionId)
        if (entry && entry.lease.owner === lease.owner && entry.lease.epoch === lease.epoch) {
          entry.lease = { owner: null, epoch: entry.lease.epoch, expiresAt: 0 }
        }
      }),

    append: (commit) =>
      Effect.gen(function*() {
        const replay = commits.get(commit.commitId)
        if (replay !== undefined) {
          if (replay.sessionId !== commit.sessionId) {
            return yield* new Conflict({
              entity: "commit",
              key: commit.commitId,
              reason: "commitId already used by another session"
            })
          }
          return replay
        }
        const entry = yield* find(commit.sessionId)
        const at = yield* now
        if (!holds(entry, commit.owner, commit.epoch, at)) {
          return yield* new LeaseLost({ sessionId: commit.sessionId, epoch: commit.epoch, owner: commit.owner })
        }
        const session = entry.session
        if (session.headSeq !== commit.expectedHeadSeq) {
          return yield* new SequenceConflict({
            sessionId: commit.sessionId,
            expected: commit.expectedHeadSeq,
            actual: session.headSeq
          })
        }
        if (new Set(commit.consumes).size !== commit.consumes.length) {
          return yield* new Conflict({ entity: "input", key: commit.consumes[0]!, reason: "consumed twice in one commit" })
        }
        const slots = []
        for (const inputId of commit.consumes) {
          const position = entry.inputs.get(inputId)
          const slot = position === undefined ? undefined : entry.inbox[position - 1]!
          if (!slot || slot.consumed) {
            return yield* new Conflict({ entity: "input", key: inputId, reason: "not a ready inbox item" })
          }
          slots.push(slot)
        }
        const projection = project(commit.sessionId, {
          headSeq: session.headSeq,
          activeTurnId: session.activeTurnId,
          openCallbacks: entry.openCallbacks.size,
          title: session.title,
          archived: session.archived,
          closed: session.status === "closed"
        }, commit.records, at)
        // Everything is validated: from here on nothing fails, so the commit is all-or-nothing.
        for (const slot of slots) slot.consumed = true
        commit.records.forEach((body, i) =>
          entry.log.push(
            new LogRecord({ sessionId: commit.sessionId, seq: session.headSeq + 1 + i, at, commitId: commit.commitId, body }, true)
          )
        )
        for (const change of projection.operations) {
          const previous = entry.operations.get(change.operationId)
          const start = change.start
          entry.operations.set(
            change.operationId,
            new OperationReceipt({
              operationId: change.operationId,
              sessionId: commit.sessionId,
              turnId: previous?.turnId ?? change.turnId,
              kind: start?.kind ?? previous?.kind ?? "tool",
              name: start?.name ?? previous?.name ?? "",
              input: start ? start.input : previous?.input,
              startedSeq: start?.seq ?? previous?.startedSeq ?? change.end!.seq,
              status: change.end?.status ?? "started",
              output: change.end?.output,
              isError: change.end?.isError ?? false,
              ...(change.end ? { endedSeq: change.end.seq } : {})
            }, true)
          )
        }
        for (const callback of projection.callbacksOpened) entry.openCallbacks.set(callback.callbackId, callback)
        for (const callbackId of projection.callbacksClosed) entry.openCallbacks.delete(callbackId)
        const head = { ...projection.head, openCallbacks: entry.openCallbacks.size }
        entry.session = new Session({
          ...session,
          headSeq: head.headSeq,
          activeTurnId: head.activeTurnId,
          title: head.title,
          archived: head.archived,
          status: statusOf(head),
          updatedAt: at
        }, true)
        const receipt = new CommitReceipt({
          commitId: commit.commitId,
          sessionId: commit.sessionId,
          firstSeq: session.headSeq + 1,
          headSeq: head.headSeq,
          at
        }, true)
        commits.set(commit.commitId, receipt)
        return receipt
      }),

    readLog: (sessionId, options) =>
      Effect.sync(() => {
        const after = options?.after ?? 0
        const limit = options?.limit ?? 500
        const log = sessions.get(sessionId)?.log ?? []
        // seq n lives at index n - 1.
        const records = log.slice(after, after + limit)
        const cursor = records.length > 0 ? records[records.length - 1]!.seq : after
        return new LogPage({ records, cursor, more: log.length > cursor }, true)
      }),

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
          if (entry.session.activeTurnId !== null || entry.inbox.some((slot) => !slot.consumed)) out.push(id)
        }
        return out
      })
  })
})

const holds = (entry: Entry, owner: string, epoch: number, now: number) =>
  entry.lease.owner === owner && entry.lease.epoch === epoch && entry.lease.expiresAt > now

/** A fresh, empty in-memory store per layer build. */
export const layer: Layer.Layer<SessionStore> = Layer.effect(SessionStore, make)
