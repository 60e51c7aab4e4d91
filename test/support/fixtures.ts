/**
 * Test fixtures shared by the store suites and the benches: principals, agents,
 * inbox messages, commits and the canonical four-record turn.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Effect, Inspectable } from "effect"
import { randomUUID } from "node:crypto"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import { Usage } from "../../src/schema/Budget.js"
import { ApprovalRequest } from "../../src/schema/Callback.js"
import { type CallbackId, InputId, makeCommitId, makeInputId, makeOperationId, makeTurnId } from "../../src/schema/Ids.js"
import { Message } from "../../src/schema/Inbox.js"
import { Commit, type Lease } from "../../src/schema/Lease.js"
import { Principal } from "../../src/schema/Principal.js"
import {
  CallbackOpened,
  OperationCompleted,
  OperationStarted,
  type RecordBody,
  TurnEnded,
  TurnStarted
} from "../../src/schema/Record.js"

/** A principal in a workspace of its own: three fresh, distinct UUIDs. */
export const principal = (userId?: string): Principal =>
  new Principal({
    customerId: randomUUID(),
    organizationId: randomUUID(),
    workspaceId: randomUUID(),
    ...(userId === undefined ? {} : { userId })
  })

/** A minimal agent definition on the scripted model; every other field takes its default. */
export const agent = (name = "assistant"): Agent =>
  new Agent({
    name,
    instructions: `You are ${name}.`,
    model: new ModelRef({ name: "scripted" })
  })

/** A fresh, unique inbox input id (no Effect needed, unlike `makeInputId`). */
export const inputId = (): InputId => InputId.make(`in-${randomUUID()}`)

/** A user message; a fresh input id unless one is given. */
export const message = (text: string, id?: string): Message =>
  new Message({ inputId: id === undefined ? inputId() : InputId.make(id), text })

/** A commit fenced by `lease` at `expectedHeadSeq`, with a fresh commit id. */
export const commit = (
  lease: Lease,
  expectedHeadSeq: number,
  records: ReadonlyArray<RecordBody>,
  consumes: ReadonlyArray<InputId> = [],
  admits?: ReadonlyArray<Message>
): Effect.Effect<Commit> =>
  Effect.map(
    makeCommitId,
    (commitId) =>
      new Commit({
        commitId,
        sessionId: lease.sessionId,
        owner: lease.owner,
        epoch: lease.epoch,
        expectedHeadSeq,
        records,
        consumes,
        ...(admits === undefined ? {} : { admits })
      })
  )

/**
 * The canonical turn: `turn_started`, one model `operation_started` and
 * `operation_completed`, `turn_ended` (completed). Fresh turn and operation ids
 * each time, so the batch can be appended repeatedly to one session.
 */
export const turnBatch = (
  options: { readonly inputId?: InputId | undefined; readonly text?: string | undefined } = {}
): Effect.Effect<ReadonlyArray<RecordBody>> =>
  Effect.gen(function*() {
    const turnId = yield* makeTurnId
    const operationId = yield* makeOperationId
    const startedBy = options.inputId ?? (yield* makeInputId)
    const text = options.text ?? "hello"
    return [
      new TurnStarted({ turnId, inputId: startedBy, text }),
      new OperationStarted({
        operationId,
        turnId,
        kind: "model",
        name: "scripted",
        input: { messages: 1, tools: 0 }
      }),
      new OperationCompleted({ operationId, turnId, output: { text: `echo: ${text}` } }),
      new TurnEnded({ turnId, outcome: "completed", output: `echo: ${text}`, usage: Usage.zero })
    ]
  })

/**
 * A turn parked on approvals: `turn_started`, a `deploy` tool's
 * `operation_started`, and one approval `callback_opened` per id, under fresh
 * turn and operation ids.
 */
export const approvalWait = (callbackIds: ReadonlyArray<CallbackId>) =>
  Effect.gen(function*() {
    const turnId = yield* makeTurnId
    const operationId = yield* makeOperationId
    const records: ReadonlyArray<RecordBody> = [
      new TurnStarted({ turnId, inputId: inputId(), text: "deploy" }),
      new OperationStarted({ operationId, turnId, kind: "tool", name: "deploy", input: { callId: "c1", arguments: "{}", requestedBy: operationId } }),
      ...callbackIds.map((callbackId) =>
        new CallbackOpened({
          callbackId,
          turnId,
          operationId,
          kind: "approval",
          request: new ApprovalRequest({ toolName: "deploy", callId: "c1", arguments: "{}" })
        })
      )
    ]
    return { turnId, operationId, records }
  })

/**
 * Runs `self` expecting it to fail with the error tagged `tag`, and returns
 * that error narrowed to its class so a test can assert its fields. A success
 * or another error fails the test with a message naming what happened instead.
 */
export const failure = <A, E extends { readonly _tag: string }, R, const T extends E["_tag"]>(
  self: Effect.Effect<A, E, R>,
  tag: T
): Effect.Effect<Extract<E, { readonly _tag: T }>, never, R> =>
  Effect.flip(self).pipe(
    Effect.catchAll((value) =>
      Effect.dieMessage(`expected a ${tag} failure, but it succeeded with ${Inspectable.format(value)}`)
    ),
    Effect.map((error) => {
      assert.strictEqual(error._tag, tag, `expected a ${tag} failure, got ${Inspectable.format(error)}`)
      // The tag was just checked, and tags identify the error classes of the union.
      return error as Extract<E, { readonly _tag: T }>
    })
  )
