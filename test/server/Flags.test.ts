/**
 * The flags table (`Messages.usage`) over every message type, against a
 * daemon serving the real session routes: a client frame of each type with
 * every combination of TERMINAL and SESSION_START is answered `invalid_flags`
 * exactly when the table gives its type other flags; a type only the server
 * sends is `unsupported_message_type`; the follow-ups (`*.cancel`) are checked
 * on an open stream (where SESSION_START means a second exchange on a busy
 * id, `invalid_id`); and every frame the server sends in all of this carries
 * the flags of its type's server role.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Frame from "../../src/protocol/Frame.js"
import * as Messages from "../../src/protocol/Messages.js"
import * as H from "./harness.js"

const { FLAG_SESSION_START: START, FLAG_TERMINAL: TERMINAL } = Frame
const COMBINATIONS = [0, TERMINAL, START, START | TERMINAL]

type Message = ReturnType<typeof H.decode>

/** Every frame the server sent in a test, to check against the table at the end. */
const sent: Array<Message> = []

const observe = (message: Message): Message => {
  sent.push(message)
  return message
}

const errorKind = (message: Message): string | undefined =>
  message.t === Messages.Type.error ? (message.payload as { kind: string }).kind : undefined

describe("the flags table", () => {
  it.scopedLive("every message type a client sends obeys it, every type only the server sends is unsupported", () =>
    Effect.gen(function*() {
      const { path, router } = yield* H.sessionDaemon
      const peer = yield* H.rawConnect({ path })
      const exchange = (id: number, flags: number, type: string, payload: unknown) =>
        Effect.map(peer.exchange(id, flags, type, payload), observe)
      let id = 1
      const types = Object.keys(Messages.usage)
      // The table covers every message type the protocol names.
      assert.sameMembers(types, Object.values(Messages.Type))

      for (const type of types) {
        const role = Messages.usage[type]!.client
        if (role === "request" || role === "stream") {
          // The routes are exchanged as the table says.
          if (!type.startsWith("core.") && type !== Messages.Type.hello) assert.strictEqual(router.route(type)?.kind, role, type)
        }
        for (const flags of COMBINATIONS) {
          const label = `${type} with flags ${flags}`
          if (role === "follow_up") continue
          // A stream opened by a good combination ends at once (the payload {} is invalid), so ids are not left open.
          const answer = yield* exchange(id++, flags, type, {})
          assert.strictEqual(Frame.hasFlag(answer.flags, TERMINAL), true, label)
          if (role === undefined) {
            assert.strictEqual(errorKind(answer), "unsupported_message_type", label)
          } else if (role === "shutdown" || flags !== Messages.roleFlags[role]) {
            assert.strictEqual(errorKind(answer), "invalid_flags", label)
            assert.strictEqual((answer.payload as { offending_type?: string }).offending_type, type, label)
          } else {
            assert.notStrictEqual(errorKind(answer), "invalid_flags", label)
          }
        }
      }

      // The follow-ups: a cancel with the wrong flags ends its stream with invalid_flags, with the right ones it cancels.
      const created = yield* exchange(id++, 0, Messages.Type.sessionCreate, { agent: "worker" })
      assert.strictEqual(created.t, Messages.Type.sessionCreated)
      const sessionId = (created.payload as { session: { id: string } }).session.id
      const streams = [
        { open: Messages.Type.sessionEvents, payload: { sessionId, follow: true }, cancel: Messages.Type.sessionEventsCancel },
        { open: Messages.Type.callbackProvide, payload: { sessionId, kinds: ["approval"] }, cancel: Messages.Type.callbackProvideCancel }
      ]
      for (const stream of streams) {
        assert.strictEqual(Messages.usage[stream.cancel]!.client, "follow_up")
        for (const flags of COMBINATIONS) {
          const label = `${stream.cancel} with flags ${flags}`
          const streamId = id++
          yield* peer.write(H.frame(streamId, START, stream.open, stream.payload))
          // Let the stream start; a ping on another id is answered once the open frame was dispatched.
          const pong = yield* exchange(id++, 0, Messages.Type.ping, {})
          assert.strictEqual(pong.t, Messages.Type.pong, label)
          yield* peer.write(H.frame(streamId, flags, stream.cancel, {}))
          // Skip what the stream sent before it ended (replayed events); its TERMINAL frame says how.
          let last = observe(yield* peer.nextMessage)
          while (!Frame.hasFlag(last.flags, TERMINAL)) last = observe(yield* peer.nextMessage)
          assert.strictEqual(last.id, streamId, label)
          if (flags === Messages.roleFlags.follow_up) {
            assert.isUndefined(errorKind(last), label)
            assert.strictEqual((last.payload as { reason?: string }).reason, "cancelled", label)
          } else if (Frame.hasFlag(flags, START)) {
            // SESSION_START opens an exchange: on an id in use that is `invalid_id` (docs/decisions/0005).
            assert.strictEqual(errorKind(last), "invalid_id", label)
          } else {
            assert.strictEqual(errorKind(last), "invalid_flags", label)
          }
        }
      }

      // A follow-up type on an id with no open stream is not a request.
      assert.strictEqual(errorKind(yield* exchange(id++, 0, Messages.Type.sessionEventsCancel, {})), "unsupported_message_type")
      // core.shutdown belongs on id 0 with SHUTDOWN; on another id, and without its flag, it is refused and the connection stays.
      assert.strictEqual(errorKind(yield* exchange(id++, 0, Messages.Type.shutdown, null)), "invalid_flags")
      assert.strictEqual((yield* exchange(id++, 0, Messages.Type.ping, {})).t, Messages.Type.pong)

      // What the server sent obeys the table too.
      for (const message of sent) {
        const role = Messages.usageOf(message.t)?.server
        assert.isDefined(role, `the server sent ${message.t}, which has no server role`)
        assert.strictEqual(message.flags, Messages.roleFlags[role!], `${message.t} sent with flags ${message.flags}`)
      }
      assert.isAbove(sent.length, 100)
    }), { timeout: 60_000 })
})
