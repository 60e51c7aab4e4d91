import { assert, describe, it } from "@effect/vitest"
import * as Equal from "effect/Equal"
import { commandOf, commandText, decodeCommand, encodeCommand } from "../../../src/layers/sql/Rows.js"
import { CallbackId, InputId, OperationId, TurnId } from "../../../src/schema/Ids.js"
import { CallbackAnswer, Control, Interrupt, Message, Steer } from "../../../src/schema/Inbox.js"
import { canonical } from "../../../src/schema/Json.js"
import { RunOptions } from "../../../src/schema/Run.js"

const inputId = InputId.make("in-1")

// Commands of every kind, plain and not (a message or steer with and without optional fields).
const commands = [
  new Message({ inputId, text: "hello" }),
  new Message({ inputId, text: "with \"quotes\" and ünïcode\n", source: "cli", excludeFromAnalytics: true }),
  new Message({ inputId, text: "x", excludeFromAnalytics: false }),
  new Message({ inputId, text: "run", run: new RunOptions({ maxCycles: 3 }) }),
  // As Sessions.send builds it: the optional fields present, undefined.
  new Message({ inputId, text: "sent", source: undefined, run: undefined, excludeFromAnalytics: undefined }),
  new Steer({ inputId, text: "steer", source: "api" }),
  new Steer({ inputId, text: "steer" }),
  new Interrupt({ inputId, expectedTurnId: TurnId.make("turn_01M93XRYVJDAJKRFM8CMJ0H20P"), reason: "stop" }),
  new CallbackAnswer({
    inputId,
    callbackId: CallbackId.make("cb_01M93XRYVJDAJKRFM8CMJ0H20P"),
    turnId: TurnId.make("turn_01M93XRYVJDAJKRFM8CMJ0H20P"),
    operationId: OperationId.make("op_01M93XRYVJDAJKRFM8CMJ0H20P"),
    result: { approved: true, b: [1, { z: 1, a: 2 }] }
  }),
  new Control({ inputId, action: { _tag: "rename", title: "t" } })
]

// The inbox compares commands by this text: the plain path must write exactly what the schema's encoder does.
describe("commandText", () => {
  for (const command of commands) {
    it(`${command._tag}${"run" in command && command.run !== undefined ? " with run options" : ""}: the encoder's canonical text`, () => {
      assert.strictEqual(commandText(command), canonical(encodeCommand(command)))
    })
  }

  it("a field present as undefined is absent from the text, as the encoder's canonical form drops it", () => {
    const text = commandText(new Message({ inputId, text: "sent", run: undefined, excludeFromAnalytics: undefined }))
    assert.deepStrictEqual(JSON.parse(text), { _tag: "message", inputId: "in-1", text: "sent" })
  })

  it("a message with run options keeps the encoder's form of them", () => {
    const text = commandText(new Message({ inputId, text: "run", run: new RunOptions({ maxCycles: 3 }) }))
    assert.deepStrictEqual(JSON.parse(text).run, { maxCycles: 3 })
  })
})

// The inbox's read revives a plain message or steer without the schema: it must build what decoding does.
describe("commandOf", () => {
  for (const command of commands) {
    it(`${command._tag} ${JSON.stringify(command)}`, () => {
      const text = commandText(command)
      const revived = commandOf(text)
      const decoded = decodeCommand(JSON.parse(text))
      assert.strictEqual(Object.getPrototypeOf(revived), Object.getPrototypeOf(decoded))
      assert.deepStrictEqual(Reflect.ownKeys(revived), Reflect.ownKeys(decoded))
      assert.strictEqual(JSON.stringify(revived), JSON.stringify(decoded))
      assert.deepStrictEqual(revived, decoded)
    })
  }

  it("a field besides the plain ones takes the schema: a bad run is refused, an unknown key dropped", () => {
    assert.throws(() => commandOf(JSON.stringify({ _tag: "message", inputId: "in-1", text: "x", run: { maxCycles: -1 } })))
    const extra = commandOf(JSON.stringify({ _tag: "steer", inputId: "in-1", text: "x", extra: 1 }))
    assert.deepStrictEqual(Reflect.ownKeys(extra), ["inputId", "text", "_tag"])
    assert.isTrue(Equal.equals(extra, new Steer({ inputId, text: "x" })))
  })
})
