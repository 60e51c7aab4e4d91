import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Duration, Effect, FastCheck as fc, Option, Schema, TestClock } from "effect"
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import { Agent, ModelRef, PermissionPolicy, ToolSpec } from "../src/schema/Agent.js"
import {
  CallbackId,
  CommitId,
  InputId,
  makeCallbackId,
  makeCommitId,
  makeInputId,
  makeOperationId,
  makeSessionId,
  makeTurnId,
  OperationId,
  SessionId,
  timestampOf,
  TurnId
} from "../src/schema/Ids.js"
import { Command, Message } from "../src/schema/Inbox.js"
import { canonical } from "../src/schema/Json.js"
import { decodePrincipal, Principal } from "../src/schema/Principal.js"
import { Usage } from "../src/schema/Budget.js"
import { ApprovalRequest, decodeApprovalResult } from "../src/schema/Callback.js"
import * as Operation from "../src/schema/Operation.js"
import * as Record from "../src/schema/Record.js"
import { RecordBody } from "../src/schema/Record.js"

const ids = () => ({ customerId: randomUUID(), organizationId: randomUUID(), workspaceId: randomUUID() })

describe("Principal", () => {
  it.effect("decodes three distinct UUIDs, with or without a userId", () =>
    Effect.gen(function*() {
      const input = ids()
      const decoded = yield* decodePrincipal(input)
      assert.instanceOf(decoded, Principal)
      assert.deepStrictEqual(decoded, new Principal(input))
      const withUser = yield* decodePrincipal({ ...input, userId: "user-1" })
      assert.strictEqual(withUser.userId, "user-1")
      // Upper-case UUIDs are UUIDs too.
      const upper = yield* decodePrincipal({ ...input, workspaceId: randomUUID().toUpperCase() })
      assert.match(upper.workspaceId, /^[0-9A-F-]{36}$/)
    }))

  it.effect("a non-UUID id is a ParseError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(decodePrincipal({ ...ids(), organizationId: "not-a-uuid" }))
      assert.strictEqual(error._tag, "ParseError")
      assert.include(error.message, "expected a UUID")
      const missing = yield* Effect.flip(decodePrincipal({ customerId: randomUUID(), organizationId: randomUUID() }))
      assert.strictEqual(missing._tag, "ParseError")
    }))

  it.effect("two equal ids are refused, whatever their case", () =>
    Effect.gen(function*() {
      const same = randomUUID()
      const error = yield* Effect.flip(decodePrincipal({ ...ids(), customerId: same, workspaceId: same }))
      assert.strictEqual(error._tag, "ParseError")
      assert.include(error.message, "three distinct UUIDs")
      const cased = yield* Effect.flip(
        decodePrincipal({ ...ids(), organizationId: same, workspaceId: same.toUpperCase() })
      )
      assert.strictEqual(cased._tag, "ParseError")
      assert.throws(() => new Principal({ customerId: same, organizationId: same, workspaceId: randomUUID() }))
    }))

  it.effect("an unknown field is refused by decodePrincipal", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(decodePrincipal({ ...ids(), workspaceID: randomUUID() }))
      assert.strictEqual(error._tag, "ParseError")
      assert.include(error.message, "workspaceID")
    }))

  it.effect("an unknown field is refused by a plain Schema decode of Principal too", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Schema.decodeUnknown(Principal)({ ...ids(), workspaceID: randomUUID() }))
      assert.include(error.message, "workspaceID")
    }))

  it.effect("an empty userId is refused", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(decodePrincipal({ ...ids(), userId: "" }))
      assert.strictEqual(error._tag, "ParseError")
    }))
})

describe("ids", () => {
  it.effect("a clock that reads fractions of a millisecond (a TestClock moved by jittered sleeps) still mints valid ids", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust(Duration.millis(2754.165819))
      const ids = [yield* makeSessionId, yield* makeTurnId, yield* makeSessionId]
      for (const id of ids) assert.match(id, /^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$/, id)
      assert.isTrue(Schema.is(SessionId)(ids[2]))
    }))

  it.effect("minted ids match their schemas and only their own", () =>
    Effect.gen(function*() {
      const minted: ReadonlyArray<readonly [string, (u: unknown) => boolean, string]> = [
        [yield* makeSessionId, Schema.is(SessionId), "ses_"],
        [yield* makeTurnId, Schema.is(TurnId), "turn_"],
        [yield* makeOperationId, Schema.is(OperationId), "op_"],
        [yield* makeCallbackId, Schema.is(CallbackId), "cb_"],
        [yield* makeCommitId, Schema.is(CommitId), "commit_"]
      ]
      for (const [id, valid, prefix] of minted) {
        assert.isTrue(valid(id), `${id} should be a valid id`)
        assert.isTrue(id.startsWith(prefix))
        assert.strictEqual(id.length, prefix.length + 26)
      }
      assert.isFalse(Schema.is(TurnId)(minted[0]?.[0]))
      assert.isFalse(Schema.is(SessionId)(minted[1]?.[0]))
      const input = yield* makeInputId
      assert.isTrue(Schema.is(InputId)(input))
      assert.isTrue(input.startsWith("in_"))
    }))

  it.effect("malformed ids are refused", () =>
    Effect.gen(function*() {
      const good = yield* makeSessionId
      const body = good.slice(4)
      for (
        const bad of [
          "",
          body,
          `ses_${body.toLowerCase()}`,
          `ses_${body.slice(1)}`,
          `ses_${body}0`,
          `ses_U${body.slice(1)}`, // Crockford base32 has no I, L, O or U.
          `turn_${body}`,
          ` ${good}`
        ]
      ) {
        assert.isFalse(Schema.is(SessionId)(bad), `${JSON.stringify(bad)} should not be a SessionId`)
      }
      const error = yield* Effect.flip(Schema.decodeUnknown(SessionId)("ses_nope"))
      assert.include(error.message, "expected a SessionId")
    }))

  it.effect("ids minted in the same millisecond sort in creation order", () =>
    Effect.gen(function*() {
      // TestClock stands still, so all 1,000 share one timestamp.
      const sessions: Array<string> = []
      const turns: Array<string> = []
      for (let i = 0; i < 1_000; i++) {
        sessions.push(yield* makeSessionId)
        // Interleaving another kind must not break either sequence.
        if (i % 3 === 0) turns.push(yield* makeTurnId)
      }
      assert.strictEqual(new Set(sessions).size, 1_000)
      assert.deepStrictEqual(sessions.slice().sort(), sessions)
      assert.deepStrictEqual(turns.slice().sort(), turns)
      assert.strictEqual(new Set(sessions.map(timestampOf)).size, 1)
    }))

  it.effect("ids sort in creation order across milliseconds, and never go backwards with the clock", () =>
    Effect.gen(function*() {
      const minted: Array<string> = []
      for (let i = 0; i < 200; i++) {
        if (i % 7 === 0) yield* TestClock.adjust(1)
        minted.push(yield* makeSessionId)
      }
      assert.deepStrictEqual(minted.slice().sort(), minted)
      yield* TestClock.setTime(0)
      const afterRewind = yield* makeSessionId
      assert.isTrue(afterRewind > minted[minted.length - 1]!)
    }))

  it.effect("timestampOf recovers the clock time an id was minted at", () =>
    Effect.gen(function*() {
      // Later than anything minted so far in this file: ids never go backwards in time.
      const t = Date.UTC(2100, 0, 1, 12, 30, 15, 123)
      yield* TestClock.setTime(t)
      assert.strictEqual(timestampOf(yield* makeSessionId), t)
      assert.strictEqual(timestampOf(yield* makeCommitId), t)
      yield* TestClock.adjust(1_234)
      assert.strictEqual(timestampOf(yield* makeTurnId), t + 1_234)
      assert.strictEqual(timestampOf(yield* makeInputId), t + 1_234)
    }))
})

describe("canonical JSON", () => {
  it("is independent of key order at every depth", () => {
    const a = { b: 1, a: { d: [{ f: 1, e: 2 }], c: null }, z: "x" }
    const b = { z: "x", a: { c: null, d: [{ e: 2, f: 1 }] }, b: 1 }
    assert.strictEqual(canonical(a), canonical(b))
    assert.strictEqual(canonical(a), `{"a":{"c":null,"d":[{"e":2,"f":1}]},"b":1,"z":"x"}`)
  })

  it("keeps array order and drops undefined members", () => {
    assert.notStrictEqual(canonical([1, 2]), canonical([2, 1]))
    assert.strictEqual(canonical({ a: 1, b: undefined }), canonical({ a: 1 }))
    assert.strictEqual(canonical("text"), `"text"`)
    assert.strictEqual(canonical(null), "null")
  })

  it("makes equal commands compare equal whatever order their fields were given in", () => {
    const encode = Schema.encodeSync(Command)
    const inputId = InputId.make("in-1")
    const one = new Message({ inputId, text: "hi", source: "cli" })
    const two = new Message({ source: "cli", text: "hi", inputId })
    assert.strictEqual(canonical(encode(one)), canonical(encode(two)))
    assert.notStrictEqual(canonical(encode(one)), canonical(encode(new Message({ inputId, text: "hi" }))))
  })
})

describe("InputId", () => {
  it("accepts 1 to 128 printable ASCII characters without spaces", () => {
    for (const good of ["a", "in-123", "msg_01HZX", "!~", "x".repeat(128), "a/b:c@d"]) {
      assert.isTrue(Schema.is(InputId)(good), `${JSON.stringify(good)} should be an InputId`)
    }
  })

  it("refuses empty, too long, whitespace and non-ASCII ids", () => {
    for (const bad of ["", "x".repeat(129), "has space", "tab\there", "new\nline", "ümlaut", "emoji🙂", "\u007f"]) {
      assert.isFalse(Schema.is(InputId)(bad), `${JSON.stringify(bad)} should not be an InputId`)
    }
    assert.throws(() => InputId.make(""))
  })
})

describe("Agent", () => {
  it("decoding fills every default", () => {
    const decoded = Schema.decodeUnknownSync(Agent)({
      name: "assistant",
      instructions: "Help.",
      model: { name: "scripted" }
    })
    assert.strictEqual(decoded.description, "")
    assert.deepStrictEqual(decoded.tools, [])
    assert.deepStrictEqual(decoded.permissions, new PermissionPolicy({ default: "allow", rules: {} }))
    assert.strictEqual(decoded.noToolPolicy, "finish")
    assert.strictEqual(decoded.maxCycles, 16)
    assert.deepStrictEqual(decoded.subagents, [])
    assert.strictEqual(decoded.budgets, undefined)
    assert.deepStrictEqual(
      decoded,
      new Agent({ name: "assistant", instructions: "Help.", model: new ModelRef({ name: "scripted" }) })
    )
  })

  it("tool specs default to an external side effect, unknown idempotency, host-run", () => {
    const agent = Schema.decodeUnknownSync(Agent)({
      name: "assistant",
      instructions: "Help.",
      model: { name: "scripted" },
      tools: [{ name: "search", description: "Search", parameters: { type: "object" } }]
    })
    const [tool] = agent.tools
    assert.instanceOf(tool, ToolSpec)
    assert.strictEqual(tool.sideEffect, "external")
    assert.strictEqual(tool.idempotency, "unknown")
    assert.strictEqual(tool.client, false)
  })

  it("encoding and decoding round-trip", () => {
    const agent = new Agent({
      name: "planner",
      instructions: "Plan.",
      model: new ModelRef({ name: "scripted" }),
      permissions: new PermissionPolicy({ default: "ask", rules: { search: "allow" } }),
      maxCycles: 3
    })
    const encoded = Schema.encodeSync(Agent)(agent)
    assert.deepStrictEqual(Schema.decodeUnknownSync(Agent)(JSON.parse(JSON.stringify(encoded))), agent)
  })

  it("refuses bad names and out-of-range maxCycles", () => {
    const base = { instructions: "x", model: { name: "scripted" } }
    for (const bad of [{ ...base, name: "1agent" }, { ...base, name: "has space" }, { ...base, name: "ok", maxCycles: 0 }]) {
      assert.throws(() => Schema.decodeUnknownSync(Agent)(bad))
    }
  })
})

describe("record JSON", () => {
  it("fromJsonText refuses text of an unknown record type with a ParseError", () => {
    assert.throws(() => Record.fromJsonText(JSON.stringify({ _tag: "nonsense" })), /nonsense|Expected/)
  })


  it.effect("toJsonText equals the schema encoding for every record type, and decodes back", () =>
    Effect.gen(function*() {
      const turnId = yield* makeTurnId
      const operationId = yield* makeOperationId
      const callbackId = yield* makeCallbackId
      const sessionId = yield* makeSessionId
      const inputId = InputId.make("in-1")
      const usage = new Usage({ ...Usage.zero, inputTokens: 3, toolCallsByName: { echo: 1 } })
      const bodies: ReadonlyArray<RecordBody> = [
        new Record.SessionCreated({ agentName: "a", parentId: null, title: "t" }),
        new Record.TurnStarted({ turnId, inputId, text: "hi" }),
        new Record.TurnEnded({
          turnId,
          outcome: "failed",
          failureCode: "budget_exhausted",
          failure: { _tag: "BudgetExhausted", dimension: "toolCalls", limit: 1, observed: 2 },
          usage
        }),
        new Record.InputApplied({ inputId, kind: "steer", turnId }),
        new Record.OperationStarted({ operationId, turnId, kind: "tool", name: "echo", input: { callId: "c1", arguments: '{"x":[1,"2"]}', requestedBy: operationId } }),
        new Record.OperationCompleted({ operationId, turnId, output: "ok", isError: false }),
        new Record.OperationUnknown({ operationId, turnId }),
        new Record.CallbackOpened({ callbackId, turnId, operationId, kind: "approval", request: new ApprovalRequest({ toolName: "echo", callId: "c1", arguments: "{}" }) }),
        new Record.CallbackResolved({ callbackId, turnId, resolution: "answered", result: { approved: true } }),
        new Record.ChildSpawned({ childSessionId: sessionId, agentName: "b", alias: null }),
        new Record.ChildResultRecorded({ childSessionId: sessionId, turnId, outcome: "completed", output: "done" }),
        new Record.ChildrenAwaited({ turnId, parked: true }),
        new Record.Renamed({ title: "new" }),
        new Record.Archived({ archived: true }),
        new Record.Closed({}),
        new Record.ContextCompacted({
          turnId,
          mode: "micro",
          messagesBefore: 9,
          tokensBefore: 900,
          tokensAfter: 300,
          archived: [{ index: 2, callId: "c1", toolName: "echo", artifactId: operationId, turnId, seq: 7, chars: 4000, marker: "<archived_tool_result …>" }]
        }),
        new Record.ContextCompacted({
          turnId,
          mode: "summary",
          messagesBefore: 9,
          tokensBefore: 900,
          tokensAfter: 100,
          replaced: 6,
          summary: "<conversation_summary>…</conversation_summary>",
          operationId
        }),
        new Record.HandoffRecorded({ turnId, operationId, from: "triage", to: "billing", reason: "a refund" }),
        new Record.GuardrailChecked({ turnId, stage: "output", guardrail: "no_secrets", allowed: false, reason: "a key" }),
        new Record.OutputRejected({ turnId, operationId, attempt: 1, problems: "$.total: missing total" })
      ]
      assert.strictEqual(new Set(bodies.map((body) => body._tag)).size, RecordBody.members.length)
      for (const body of bodies) {
        const text = Record.toJsonText(body)
        assert.deepStrictEqual(JSON.parse(text), Schema.encodeSync(RecordBody)(body), body._tag)
        assert.deepStrictEqual(Schema.decodeUnknownSync(RecordBody)(JSON.parse(text)), body, body._tag)
        assert.deepStrictEqual(Record.fromJsonText(text), body, body._tag)
        const revived = Record.fromJsonText(text)
        assert.strictEqual(revived.constructor, body.constructor, body._tag)
        if (revived._tag === "turn_ended") assert.instanceOf(revived.usage, Usage)
      }
    }))
})

describe("operation outputs", () => {
  const legacy: ReadonlyArray<{ readonly body: { readonly _tag: string; readonly output?: unknown; readonly result?: unknown } }> =
    readFileSync(new URL("./fixtures/legacy-log-0.1.jsonl", import.meta.url), "utf8").trim().split("\n").map((line) => JSON.parse(line))

  it("a model reply decodes by its schema, an older one's missing fields as empty, anything else as none", () => {
    const replies = legacy.flatMap(({ body }) =>
      body._tag === "operation_completed" && typeof body.output === "object" && body.output !== null && "toolCalls" in body.output
        ? [body.output]
        : []
    )
    assert.isAbove(replies.length, 5)
    for (const reply of replies) assert.deepStrictEqual(Operation.decodeModelReply(reply), Option.some(reply as Operation.ModelReplyOutput))
    assert.deepStrictEqual(
      Operation.decodeModelReply({ text: "hi" }),
      Option.some({ text: "hi", toolCalls: [], inputTokens: 0, outputTokens: 0 })
    )
    assert.deepStrictEqual(Operation.decodeModelReply({ toolCalls: [{ id: "c1", name: "x", arguments: "{}" }] }).pipe(Option.map((r) => r.toolCalls)), Option.some([{ id: "c1", name: "x", arguments: "{}" }]))
    assert.isTrue(Option.isNone(Operation.decodeModelReply("record a ok")))
    assert.isTrue(Option.isNone(Operation.decodeModelReply({ text: 1, toolCalls: [] })))
    assert.isTrue(Option.isNone(Operation.decodeModelReply({ text: "", toolCalls: [{ id: "c1" }], inputTokens: 1, outputTokens: 0 })))
  })

  it("the hand check of a whole reply agrees with the schema, on any value the schema's arbitrary makes and on broken ones", () => {
    const schemaSays = Schema.decodeUnknownOption(Operation.ModelReplyOutput)
    const reply = Arbitrary.make(Schema.typeSchema(Operation.ModelReplyOutput))
    const broken = fc.tuple(reply, fc.constantFrom("text", "toolCalls", "inputTokens", "outputTokens", "finishReason"), fc.anything())
      .map(([value, key, junk]) => ({ ...value, [key]: junk }))
    fc.assert(
      fc.property(fc.oneof(reply, broken), (value) => {
        assert.deepStrictEqual(Operation.decodeModelReply(value).pipe(Option.map((r) => ({ ...r }))), schemaSays(value))
      }),
      { numRuns: 300 }
    )
  })

  it("an agents.wait result, a spawn and an approval decode by their schemas; a failure does not", () => {
    const result = { sessionId: "ses_01M8RCWX0K3ZXD8YDE9TQE7GKH", alias: "w-1", turnId: "turn_01M8RCWX0G87NKM393EXAXJ56W", outcome: "completed", output: "done" }
    assert.deepStrictEqual(Operation.decodeWait({ results: [result] }).pipe(Option.map((w) => w.results.map((r) => r.turnId))), Option.some([result.turnId]))
    assert.isTrue(Option.isNone(Operation.decodeWait({ error: "you have no subagent x" })))
    assert.deepStrictEqual(Operation.decodeSpawn({ sessionId: result.sessionId, alias: "w-1" }).pipe(Option.map((s) => s.alias)), Option.some("w-1"))
    const approvals = legacy.flatMap(({ body }) => body._tag === "callback_resolved" && body.result !== undefined ? [body.result] : [])
    assert.deepStrictEqual(
      approvals.map((r) => Option.map(decodeApprovalResult(r), (a) => ("decision" in a ? a.decision : "expired"))),
      [Option.some("approve_session"), Option.none()]
    )
    assert.deepStrictEqual(Option.map(decodeApprovalResult({ expired: true, expiresAt: 5 }), (a) => "expired" in a), Option.some(true))
    assert.deepStrictEqual(Operation.decodeSummary({ summary: "s", inputTokens: 3, outputTokens: 1, rejected: true }).pipe(Option.map((s) => s.rejected)), Option.some(true))
  })
})
