/**
 * The SQL store's writes besides leases: create, metadata, a spawn and a child
 * turn, a push and an answer, and a commit (`append`), each one write
 * transaction (or the dialect's own statement, on PostgreSQL).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { Conflict, SessionNotFound, StaleCallback } from "../../schema/Errors.js"
import { makeSessionId, type SessionId } from "../../schema/Ids.js"
import { type CallbackAnswer, Command } from "../../schema/Inbox.js"
import { type Commit } from "../../schema/Lease.js"
import { Principal } from "../../schema/Principal.js"
import { tenantOf } from "../../internal/SessionDraft.js"
import {
  type AdmitChildTurn,
  closedReason,
  type CreateSession,
  type MetadataPatch,
  type Pushable,
  SessionStore,
  type SpawnChild
} from "../../services/SessionStore.js"
import type { Append, Push } from "./Dialect.js"
import { commandText, sessionColumns, type SessionRow, toSession } from "./Rows.js"
import { unavailable } from "./Unavailable.js"
import { createSteps } from "./CreateSteps.js"
import { answerSteps, pushSteps } from "./PushSteps.js"
import { childTurnSteps, spawnSteps } from "./SpawnSteps.js"
import { commitSteps } from "./CommitSteps.js"
import type { Runner } from "./Runner.js"

/** The writes of a store run by `runner`. */
export const make = (runner: Runner, readLog: SessionStore["Type"]["readLog"]) => {
  const { dialect, query, transact } = runner

  // One write transaction of statements (`createSteps`): on SQLite one synchronous transaction, like a commit.
  const create = Effect.fnUntraced(function*(input: CreateSession) {
    const id = input.sessionId ?? (yield* makeSessionId)
    return yield* transact((clock) => createSteps(input, id, clock), id)
  }, unavailable("create"))

  const updateMetadata = Effect.fnUntraced(function*(principal: Principal, sessionId: SessionId, patch: MetadataPatch) {
    const clock = yield* dialect.clock
    // One statement: the row is written under its own lock, whoever holds the lease.
    const rows = yield* query<SessionRow>(
      `UPDATE troupe_sessions SET
        title = CASE WHEN ? = 1 THEN ? ELSE title END,
        archived = CASE WHEN ? = 1 THEN ? ELSE archived END,
        updated_at = ${clock.text}
      WHERE id = ? AND tenant = ?
      RETURNING ${sessionColumns}`,
      [
        patch.title === undefined ? 0 : 1,
        patch.title ?? null,
        patch.archived === undefined ? 0 : 1,
        patch.archived ? 1 : 0,
        ...clock.params,
        sessionId,
        tenantOf(principal)
      ]
    )
    if (rows.length === 0) return yield* new SessionNotFound({ sessionId })
    return yield* toSession(rows[0]!)
  }, unavailable("updateMetadata"))

  const spawn = Effect.fnUntraced(function*(input: SpawnChild) {
    const childId = input.sessionId ?? (yield* makeSessionId)
    return yield* transact((clock) => spawnSteps(input, childId, clock, dialect.lockRow), input.commit.sessionId)
  }, unavailable("spawn"))

  const admitChildTurn = Effect.fnUntraced(function*(input: AdmitChildTurn) {
    return yield* transact((clock) => childTurnSteps(input, clock, dialect.lockRow), input.childId)
  }, unavailable("admitChildTurn"))

  const pushInTransaction: Push = (sessionId, inputId, print) =>
    transact((clock) => pushSteps(sessionId, inputId, print, clock, dialect.lockRow), sessionId)
  const pushWith = dialect.push === undefined ? pushInTransaction : dialect.push(pushInTransaction)

  const push = Effect.fnUntraced(function*(sessionId: SessionId, command: Pushable) {
    if ((command as Command)._tag === "callback_answer") {
      return yield* new Conflict({ entity: "input", key: command.inputId, reason: "a callback answer goes through admitAnswer" })
    }
    return yield* pushWith(sessionId, command.inputId, commandText(command))
  }, unavailable("push"))

  const inTransaction: Append = (commit) => transact((clock) => commitSteps(commit, clock, dialect.lockRow), commit.sessionId)

  // Path 3 when the dialect has one (PostgreSQL), falling back on `inTransaction` (path 1); else path 1 or 2.
  const commitWith = dialect.append === undefined ? inTransaction : dialect.append({ query, inTransaction })
  const append = (commit: Commit) => unavailable("append")(commitWith(commit))

  const admitAnswer = Effect.fnUntraced(function*(sessionId: SessionId, answer: CallbackAnswer) {
    const print = commandText(answer)
    return yield* Effect.catchIf(
      transact((clock) => answerSteps(sessionId, answer, print, clock, dialect.lockRow), sessionId),
      (refusal): refusal is "closed" => refusal === "closed",
      // Closing is final: the log read after the refusing transaction tells how.
      () =>
        Effect.flatMap(
          closedReason(readLog, sessionId, answer.callbackId),
          (reason) => Effect.fail(new StaleCallback({ sessionId, callbackId: answer.callbackId, reason }))
        )
    )
  }, unavailable("admitAnswer"))

  return { create, updateMetadata, spawn, admitChildTurn, push, admitAnswer, append }
}
