/**
 * `Trusted.make(C, props)` builds what `new C(props, true)` builds, for each class the hot path
 * makes that way: the same prototype, own keys in the same order (so `JSON.stringify`, which
 * stores record bodies, writes the same text), equal by `Equal.equals` and accepted by the
 * class's own schema; defaults filled as the constructor fills them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Equal, Schema } from "effect"
import { PermissionLayer } from "../../src/schema/Agent.js"
import { Budgets, Usage } from "../../src/schema/Budget.js"
import { Message } from "../../src/schema/Inbox.js"
import { ApprovalSettings } from "../../src/schema/Policy.js"
import { RunOptions } from "../../src/schema/Run.js"
import { CommitReceipt } from "../../src/schema/Lease.js"
import { OperationReceipt } from "../../src/schema/Operation.js"
import { Accepted, AssistantDelta, TurnResult } from "../../src/schema/Event.js"
import {
  LogRecord,
  OperationCompleted,
  OperationStarted,
  SessionCreated,
  TurnEnded,
  TurnStarted
} from "../../src/schema/Record.js"
import * as Trusted from "../../src/schema/Trusted.js"
import { draft } from "../../src/internal/SessionDraft.js"
import { Session } from "../../src/schema/Session.js"
import { agent, principal } from "../support/fixtures.js"

const usage = {
  inputTokens: 10,
  outputTokens: 2,
  totalTokens: 12,
  modelCalls: 2,
  toolCalls: 1,
  toolCallsByName: { echo: 1 },
  wallTimeMs: 5,
  costMicros: 0
}

const same = <A extends object, P extends object>(klass: Trusted.SchemaClass<A, P>, props: P) => {
  const expected = new klass(props, true)
  const actual = Trusted.make(klass, props)
  assert.strictEqual(Object.getPrototypeOf(actual), Object.getPrototypeOf(expected))
  assert.deepStrictEqual(Reflect.ownKeys(actual), Reflect.ownKeys(expected))
  assert.strictEqual(JSON.stringify(actual), JSON.stringify(expected))
  assert.isTrue(Equal.equals(actual, expected))
  assert.isTrue(actual instanceof klass)
  assert.isTrue(Schema.is(klass as unknown as Schema.Schema<A>)(actual))
  return actual
}

describe("Trusted.make", () => {
  it("builds a tagged record as the constructor does, its tag last", () => {
    const started = same(OperationStarted, {
      operationId: "op_01J0000000000000000000000" as never,
      turnId: "turn_01J0000000000000000000000" as never,
      kind: "model",
      name: "scripted",
      input: { messages: 1, tools: 0, steers: 0, results: 0 }
    })
    assert.strictEqual(started._tag, "operation_started")
    assert.strictEqual(Object.keys(started).at(-1), "_tag")
  })

  it("keeps a key given as undefined, as the constructor does", () => {
    const started = same(TurnStarted, {
      turnId: "turn_01J0000000000000000000000" as never,
      inputId: "in_1" as never,
      text: "hello",
      run: undefined,
      excludeFromAnalytics: undefined
    })
    assert.isTrue(Object.prototype.hasOwnProperty.call(started, "run"))
  })

  it("builds the rest of a turn's records and the store's receipts the same way", () => {
    const turnId = "turn_01J0000000000000000000000" as never
    const operationId = "op_01J0000000000000000000000" as never
    const ended = same(TurnEnded, { turnId, outcome: "completed", output: "done", usage: new Usage(usage) })
    same(OperationCompleted, { operationId, turnId, output: { text: "ok" }, isError: false })
    same(AssistantDelta, { sessionId: "sess_1" as never, turnId, text: "hi" })
    same(Usage, usage)
    same(LogRecord, { sessionId: "sess_1" as never, seq: 3, at: 1, commitId: "commit_1" as never, body: ended })
    same(CommitReceipt, { commitId: "commit_1" as never, sessionId: "sess_1" as never, firstSeq: 2, headSeq: 3, at: 1 })
    same(OperationReceipt, {
      operationId,
      sessionId: "sess_1" as never,
      turnId,
      kind: "tool",
      name: "echo",
      input: { callId: "c1", arguments: {}, requestedBy: "model" },
      startedSeq: 2,
      status: "completed",
      output: "ok",
      isError: false,
      endedSeq: 3
    })
  })

  it("builds what a send and its turn make: the message, its answer, the turn's plan and result", () => {
    const sessionId = "sess_1" as never
    const inputId = "in_1" as never
    const turnId = "turn_01J0000000000000000000000" as never
    // A message with the keys a send leaves undefined, and one with a run and analytics opt-out.
    same(Message, { inputId, text: "hi", source: undefined, run: undefined, excludeFromAnalytics: undefined })
    const run = same(RunOptions, {
      inherited: [same(PermissionLayer, { source: "parent", default: "ask", rules: { echo: "allow" } })],
      approvals: new ApprovalSettings({ mode: "ask", timeoutMs: 1000 })
    })
    same(Message, { inputId, text: "hi", source: "cli", run, excludeFromAnalytics: true })
    same(RunOptions, { inherited: [] })
    same(Accepted, { sessionId, inputId, disposition: "started", turnId, cursor: 4 })
    same(Accepted, { sessionId, inputId, disposition: "queued" })
    same(Budgets, {})
    same(Budgets, { totalTokens: 100, toolCalls: 3 })
    same(TurnResult, { sessionId, turnId, output: "done", publicFinalMessage: "done", usage: new Usage(usage) })
  })

  it("builds a session as the constructor does", () => {
    const base = draft("sess_1" as never, { principal: principal(), agent: agent() }, undefined, 1)
    assert.isTrue(base instanceof Session)
    same(Session, { ...base, headSeq: 9, updatedAt: 2 })
  })

  it("takes the constructor for props that carry a tag of their own", () => {
    const json = JSON.parse(JSON.stringify(new SessionCreated({ agentName: "a", parentId: null, title: null }, true)))
    const made = same(SessionCreated, json)
    assert.strictEqual(made._tag, "session_created")
  })

  it("fills a constructor default the props leave out", () => {
    class WithDefault extends Schema.Class<WithDefault>("test/WithDefault")({
      name: Schema.String,
      tries: Schema.optionalWith(Schema.Number, { default: () => 3 }),
      label: Schema.String.pipe(Schema.propertySignature, Schema.withConstructorDefault(() => "none"))
    }) {}
    const made = same(WithDefault, { name: "x" })
    assert.strictEqual(made.tries, 3)
    assert.strictEqual(made.label, "none")
    assert.strictEqual(same(WithDefault, { name: "y", tries: 1, label: "l" }).tries, 1)
  })
})
