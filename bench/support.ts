/**
 * What several benches share: the canonical four-record turn, and a session
 * whose log is filled with such turns straight through the store.
 */
import { Effect, Option } from "effect"
import type { Agent } from "../src/schema/Agent.js"
import { Usage } from "../src/schema/Budget.js"
import { type InputId, makeCommitId, makeOperationId, makeTurnId } from "../src/schema/Ids.js"
import { Commit } from "../src/schema/Lease.js"
import type { Principal } from "../src/schema/Principal.js"
import { OperationCompleted, OperationStarted, TurnEnded, TurnStarted } from "../src/schema/Record.js"
import { SessionStore } from "../src/services/SessionStore.js"

/** One completed turn: `turn_started`, a model call's start and receipt, `turn_ended`. */
export const turnRecords = (inputId: InputId) =>
  Effect.gen(function*() {
    const turnId = yield* makeTurnId
    const operationId = yield* makeOperationId
    return [
      new TurnStarted({ turnId, inputId, text: "hello" }),
      new OperationStarted({ operationId, turnId, kind: "model", name: "scripted", input: { messages: 1 } }),
      new OperationCompleted({ operationId, turnId, output: { text: "hi there" }, isError: false }),
      new TurnEnded({ turnId, outcome: "completed", output: "hi there", usage: Usage.zero })
    ]
  })

/**
 * Creates a session and commits turns to it (25 a commit) until its log holds
 * about `records` records (the last turn may pass it by up to three); returns
 * the session and its head.
 */
export const fillLog = (principal: Principal, agent: Agent, records: number, inputId: InputId) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const session = yield* store.create({ principal, agent })
    const lease = Option.getOrThrow(yield* store.acquire(session.id, "bench", 3_600_000))
    // The session is created with one record (session_created).
    let head = 1
    while (head < records) {
      const batch = []
      for (let i = 0; i < 25 && head + batch.length < records; i++) batch.push(...(yield* turnRecords(inputId)))
      const receipt = yield* store.append(
        new Commit({
          commitId: yield* makeCommitId,
          sessionId: session.id,
          owner: "bench",
          epoch: lease.epoch,
          expectedHeadSeq: head,
          records: batch,
          consumes: []
        })
      )
      head = receipt.headSeq
    }
    yield* store.release(lease)
    return { sessionId: session.id, head }
  })
