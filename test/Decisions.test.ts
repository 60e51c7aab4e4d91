/**
 * `Decisions.decide` as plain unit tests: every inbox command against a
 * session that is idle, running, waiting (on a callback, or for the user) and
 * closed, under every busy policy. No store, no runtime: states are folded
 * from records and the outcome is read as data.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Decisions from "../src/actors/Decisions.js"
import * as SessionState from "../src/actors/SessionState.js"
import { Usage } from "../src/schema/Budget.js"
import { ApprovalRequest } from "../src/schema/Callback.js"
import { makeCallbackId, makeInputId, makeOperationId, makeSessionId, makeTurnId } from "../src/schema/Ids.js"
import { CallbackAnswer, type Command, Control, Interrupt, Message, Steer } from "../src/schema/Inbox.js"
import type { BusyPolicy } from "../src/schema/Policy.js"
import {
  CallbackOpened,
  CallbackResolved,
  Closed,
  OperationStarted,
  type RecordBody,
  TurnEnded,
  TurnStarted
} from "../src/schema/Record.js"

const mint = <A>(make: Effect.Effect<A>) => Effect.runSync(make)
const sessionId = mint(makeSessionId)
const running = mint(makeTurnId)
const endedTurn = mint(makeTurnId)
const next = mint(makeTurnId)
const operationId = mint(makeOperationId)
const callbackId = mint(makeCallbackId)
const input = () => mint(makeInputId)

const stateOf = (records: ReadonlyArray<RecordBody>) => SessionState.applyCommit(SessionState.empty(sessionId), 1, 0, records)
const ended = [
  new TurnStarted({ turnId: endedTurn, inputId: input(), text: "before" }),
  new TurnEnded({ turnId: endedTurn, outcome: "completed", output: "done", usage: Usage.zero })
]
const states = {
  idle: stateOf(ended),
  running: stateOf([...ended, new TurnStarted({ turnId: running, inputId: input(), text: "now" })]),
  waiting: stateOf([
    ...ended,
    new TurnStarted({ turnId: running, inputId: input(), text: "now" }),
    new OperationStarted({ operationId, turnId: running, kind: "tool", name: "t", input: { callId: "c", arguments: "{}", requestedBy: operationId } }),
    new CallbackOpened({
      callbackId,
      turnId: running,
      operationId,
      kind: "approval",
      request: new ApprovalRequest({ toolName: "t", callId: "c", arguments: "{}" })
    })
  ]),
  closed: stateOf([...ended, new Closed({})])
}
type StateName = keyof typeof states

const decide = <C extends Command>(state: StateName, command: C, busyPolicy: BusyPolicy = "queue", waitingForUser = false) =>
  Decisions.decide(states[state], command, { busyPolicy, waitingForUser, nextTurnId: next })

const tags = (outcome: Decisions.Outcome) => outcome.records.map((r) => r._tag)
const message = () => new Message({ inputId: input(), text: "hello" })

describe("Decisions.decide", () => {
  describe("message", () => {
    for (const policy of ["queue", "steer", "reject", "interrupt"] as const) {
      it(`idle (${policy}): starts a turn with the next id, consuming the message`, () => {
        const command = message()
        const outcome = decide("idle", command, policy)
        assert.deepStrictEqual(outcome.reply, { _tag: "Started", turnId: next })
        assert.deepStrictEqual(tags(outcome), ["turn_started"])
        assert.deepStrictEqual(outcome.consumes, [command.inputId])
        assert.strictEqual(outcome.start?.turnId, next)
        assert.strictEqual(outcome.start?.text, "hello")
        assert.isUndefined(outcome.interrupt)
      })
      it(`closed (${policy}): recorded as ignored and consumed, nothing else`, () => {
        const command = message()
        const outcome = decide("closed", command, policy)
        assert.deepStrictEqual(outcome.reply, { _tag: "Applied" })
        assert.deepStrictEqual(outcome.records.map((r) => r._tag === "input_applied" && r.detail), [{ ignored: "session closed" }])
        assert.deepStrictEqual(outcome.consumes, [command.inputId])
        assert.isUndefined(outcome.start)
      })
    }
    for (const state of ["running", "waiting"] as const) {
      it(`${state}, queue: queued, nothing written or consumed`, () => {
        const outcome = decide(state, message(), "queue")
        assert.deepStrictEqual(outcome.reply, { _tag: "Queued" })
        assert.deepStrictEqual(outcome.records, [])
        assert.deepStrictEqual(outcome.consumes, [])
      })
      it(`${state}, steer: delivered to the running turn as a steer`, () => {
        const outcome = decide(state, message(), "steer")
        assert.deepStrictEqual(outcome.reply, { _tag: "Steered", turnId: running })
        const [record] = outcome.records
        assert.isTrue(record?._tag === "input_applied" && record.kind === "steer" && record.turnId === running)
        assert.deepStrictEqual(record?._tag === "input_applied" && record.detail, { text: "hello" })
      })
      it(`${state}, reject: SessionBusy naming the running turn, recorded as rejected`, () => {
        const outcome = decide(state, message(), "reject")
        assert.strictEqual(outcome.reply._tag, "Refused")
        const error = outcome.reply._tag === "Refused" ? outcome.reply.error : undefined
        assert.strictEqual(error?._tag, "SessionBusy")
        assert.strictEqual(error?.activeTurnId, running)
        assert.deepStrictEqual(outcome.records.map((r) => r._tag === "input_applied" && r.detail), [{ rejected: "busy" }])
      })
      it(`${state}, interrupt: interrupts the running turn, then starts the new one in the same commit`, () => {
        const outcome = decide(state, message(), "interrupt")
        assert.deepStrictEqual(outcome.interrupt, { turnId: running, reason: "superseded by a new message" })
        assert.deepStrictEqual(tags(outcome), ["turn_started"])
        assert.deepStrictEqual(outcome.reply, { _tag: "Started", turnId: next })
      })
      it(`${state}, waiting for the user: the message is the turn's answer, whatever the policy`, () => {
        for (const policy of ["queue", "reject", "interrupt"] as const) {
          const outcome = decide(state, message(), policy, true)
          assert.deepStrictEqual(outcome.reply, { _tag: "Steered", turnId: running })
          assert.isUndefined(outcome.interrupt)
        }
      })
    }
  })

  describe("steer", () => {
    it("idle: starts a turn with the steer's text", () => {
      const outcome = decide("idle", new Steer({ inputId: input(), text: "go" }))
      assert.deepStrictEqual(outcome.reply, { _tag: "Started", turnId: next })
      assert.strictEqual(outcome.start?.text, "go")
      assert.isUndefined(outcome.start?.run)
    })
    for (const state of ["running", "waiting"] as const) {
      for (const policy of ["queue", "reject"] as const) {
        it(`${state} (${policy}): delivered to the running turn, never refused`, () => {
          const outcome = decide(state, new Steer({ inputId: input(), text: "go" }), policy)
          assert.deepStrictEqual(outcome.reply, { _tag: "Steered", turnId: running })
        })
      }
    }
    it("closed: ignored", () => {
      assert.deepStrictEqual(decide("closed", new Steer({ inputId: input(), text: "go" })).reply, { _tag: "Applied" })
    })
  })

  describe("interrupt", () => {
    for (const state of ["running", "waiting"] as const) {
      it(`${state}, the running turn: interrupts it and records the outcome`, () => {
        const outcome = decide(state, new Interrupt({ inputId: input(), expectedTurnId: running, reason: "stop" }))
        assert.deepStrictEqual(outcome.interrupt, { turnId: running, reason: "stop" })
        assert.deepStrictEqual(outcome.reply, { _tag: "Interrupted", turnId: running, outcome: "interrupted" })
        assert.deepStrictEqual(outcome.records.map((r) => r._tag === "input_applied" && r.detail), [{ outcome: "interrupted" }])
      })
      it(`${state}, another turn that never ran: TurnMismatch naming the running one`, () => {
        const other = mint(makeTurnId)
        const outcome = decide(state, new Interrupt({ inputId: input(), expectedTurnId: other }))
        assert.isUndefined(outcome.interrupt)
        const error = outcome.reply._tag === "Refused" ? outcome.reply.error : undefined
        assert.strictEqual(error?._tag, "TurnMismatch")
        assert.strictEqual(error?.activeTurnId, running)
        assert.strictEqual(error?.expectedTurnId, other)
      })
    }
    it("idle, a turn that ended: already_ended, nothing interrupted", () => {
      const outcome = decide("idle", new Interrupt({ inputId: input(), expectedTurnId: endedTurn }))
      assert.deepStrictEqual(outcome.reply, { _tag: "Interrupted", turnId: endedTurn, outcome: "already_ended" })
      assert.isUndefined(outcome.interrupt)
    })
    it("idle, an unknown turn: TurnMismatch with no active turn", () => {
      const outcome = decide("idle", new Interrupt({ inputId: input(), expectedTurnId: mint(makeTurnId) }))
      const error = outcome.reply._tag === "Refused" ? outcome.reply.error : undefined
      assert.strictEqual(error?.activeTurnId, null)
    })
    it("the records that end an interrupted turn cancel its open callbacks first", () => {
      const records = Decisions.interruptRecords(states.waiting, running, "stop", Usage.zero)
      assert.deepStrictEqual(records.map((r) => r._tag), ["callback_resolved", "turn_ended"])
      assert.isTrue(records[0]?._tag === "callback_resolved" && records[0].resolution === "cancelled")
      assert.isTrue(records[1]?._tag === "turn_ended" && records[1].outcome === "interrupted" && records[1].reason === "stop")
    })
  })

  describe("callback_answer", () => {
    const answer = (fields: Partial<{ turnId: typeof running; operationId: typeof operationId }> = {}) =>
      new CallbackAnswer({
        inputId: input(),
        callbackId,
        turnId: fields.turnId ?? running,
        operationId: fields.operationId ?? operationId,
        result: { decision: "approve" }
      })
    const staleReason = (outcome: Decisions.Outcome) =>
      outcome.reply._tag === "Refused" && outcome.reply.error._tag === "StaleCallback" ? outcome.reply.error.reason : undefined

    it("waiting, the open callback: closes it as answered and resumes the turn", () => {
      const outcome = decide("waiting", answer())
      assert.deepStrictEqual(outcome.reply, { _tag: "Applied" })
      assert.deepStrictEqual(tags(outcome), ["callback_resolved", "input_applied"])
      assert.deepStrictEqual(outcome.resume, { callbackId, result: { decision: "approve" } })
    })
    it("waiting, another turn or operation: stale (mismatch), nothing resumed", () => {
      assert.strictEqual(staleReason(decide("waiting", answer({ turnId: endedTurn }))), "mismatch")
      assert.strictEqual(staleReason(decide("waiting", answer({ operationId: mint(makeOperationId) }))), "mismatch")
      assert.isUndefined(decide("waiting", answer({ turnId: endedTurn })).resume)
    })
    it("a callback answered already, or cancelled: stale with how it closed", () => {
      const answered = SessionState.apply(
        states.waiting,
        new CallbackResolved({ callbackId, turnId: running, resolution: "answered", result: { decision: "deny" } }),
        states.waiting.head + 1,
        0
      )
      assert.strictEqual(staleReason(Decisions.decide(answered, answer(), { busyPolicy: "queue", waitingForUser: false, nextTurnId: next })), "answered")
      const cancelled = SessionState.applyCommit(states.waiting, states.waiting.head + 1, 0, Decisions.interruptRecords(states.waiting, running, "x", Usage.zero))
      assert.strictEqual(staleReason(Decisions.decide(cancelled, answer(), { busyPolicy: "queue", waitingForUser: false, nextTurnId: next })), "cancelled")
    })
    it("a callback of a turn that ended since: stale with how it closed, or not_open if it never did", () => {
      const end = new TurnEnded({ turnId: running, outcome: "failed", failureCode: "internal", usage: Usage.zero })
      const after = (records: ReadonlyArray<RecordBody>) =>
        Decisions.decide(SessionState.applyCommit(states.waiting, states.waiting.head + 1, 0, [...records, end]), answer(), {
          busyPolicy: "queue",
          waitingForUser: false,
          nextTurnId: next
        })
      assert.strictEqual(staleReason(after([new CallbackResolved({ callbackId, turnId: running, resolution: "answered", result: {} })])), "answered")
      assert.strictEqual(staleReason(after([new CallbackResolved({ callbackId, turnId: running, resolution: "expired" })])), "cancelled")
      assert.strictEqual(staleReason(after([])), "not_open")
    })
    it("idle or running, a callback never opened: stale (not_open)", () => {
      assert.strictEqual(staleReason(decide("idle", answer())), "not_open")
      assert.strictEqual(staleReason(decide("running", answer())), "not_open")
    })
    it("closed: ignored", () => {
      assert.deepStrictEqual(decide("closed", answer()).reply, { _tag: "Applied" })
      assert.isUndefined(decide("closed", answer()).resume)
    })
  })

  describe("control", () => {
    for (const state of ["idle", "running", "waiting"] as const) {
      it(`${state}: rename and archive are recorded, and never touch the turn`, () => {
        const rename = decide(state, new Control({ inputId: input(), action: { _tag: "rename", title: "t" } }))
        assert.deepStrictEqual(tags(rename), ["renamed", "input_applied"])
        assert.isUndefined(rename.interrupt)
        const archive = decide(state, new Control({ inputId: input(), action: { _tag: "archive", archived: true } }))
        assert.deepStrictEqual(tags(archive), ["archived", "input_applied"])
      })
    }
    it("close: interrupts a running turn first, then closes", () => {
      const close = () => new Control({ inputId: input(), action: { _tag: "close" } })
      assert.deepStrictEqual(decide("running", close()).interrupt, { turnId: running, reason: "session closed" })
      assert.deepStrictEqual(tags(decide("running", close())), ["closed", "input_applied"])
      assert.isUndefined(decide("idle", close()).interrupt)
      assert.deepStrictEqual(decide("closed", close()).reply, { _tag: "Applied" })
    })
  })
})
