/**
 * An older client against a newer daemon (test/support/newerDaemon.ts: the
 * real routes and runtime on the real wire, with a newer version's records,
 * events, fields and callbacks): the Effect client, the Promise client and
 * the CLI each replay a stream holding a record kind they have never seen,
 * read summaries with fields they do not know, and a provider serves the
 * callbacks it can read past one it cannot.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Layer, Option, Ref, Stream } from "effect"
import { join } from "node:path"
import * as ForwardCompatible from "../../src/client/ForwardCompatible.js"
import * as PromiseClient from "../../src/client/PromiseClient.js"
import * as SessionClient from "../../src/client/SessionClient.js"
import type { PendingCallback } from "../../src/schema/Callback.js"
import { makeSessionId } from "../../src/schema/Ids.js"
import * as Server from "../../src/server/Server.js"
import * as AgentCatalog from "../../src/services/AgentCatalog.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"
import * as Cli from "../cli/harness.js"
import { deployCall, deployingAgent, deployTool } from "../support/deploy.js"
import * as Newer from "../support/newerDaemon.js"
import * as H from "../server/harness.js"

/** A newer daemon on a unix socket (trusted-local), in the test's scope. */
const newerDaemon = Effect.gen(function*() {
  const dir = yield* H.tempDir
  const path = join(dir, "agent.sock")
  const runs = yield* Ref.make(0)
  const runtime = Troupe.layerTest({
    scripts: { agents: { worker: [deployCall("c1"), "deployed it"] } },
    tools: Toolkit.layer([deployTool(runs)])
  })
  const app = Server.layer({ unix: { path } }).pipe(
    Layer.provide(Newer.routes()),
    Layer.provide(AgentCatalog.layer([deployingAgent("worker", "Deploys.")])),
    Layer.provide(H.localAuth),
    Layer.provide(runtime)
  )
  yield* Layer.build(app)
  return { path, dir, runs }
})

/** The kinds of a replay, `unknown:` before the kind of an event the client could not read. */
const kinds = (frames: ReadonlyArray<SessionClient.EventFrame>) =>
  frames.map(({ event }) =>
    event._tag === "unknown" ? `unknown:${event.kind}` : event._tag === "durable" ? event.record._tag : event._tag
  )

const EXPECTED = [
  "session_created",
  "turn_started",
  "unknown:sandbox_snapshot",
  "unknown:operation_started",
  "operation_started",
  "operation_completed",
  "operation_started",
  "callback_opened",
  "callback_resolved",
  "input_applied",
  "operation_completed",
  "operation_started",
  "operation_completed",
  "turn_ended"
]

describe("ForwardCompatible", () => {
  it.live("an older client replays a newer daemon's stream on every client: unknown kinds pass through, the stream goes on", () =>
    Effect.scoped(Effect.gen(function*() {
      const { dir, path, runs } = yield* newerDaemon
      const client = yield* SessionClient.connect(path, { timeout: "5 seconds" })

      // Summaries with fields this client does not know, in the session, its agent and its tools.
      const session = yield* client.create({ agent: "worker", title: "deploy" })
      assert.strictEqual((yield* client.get(session.id)).agent.tools[0]!.name, "deploy")
      assert.strictEqual((yield* client.snapshot(session.id)).session.title, "deploy")
      assert.isFalse("region" in (yield* client.get(session.id)), "an unknown field is dropped, not kept")

      // A provider serves the callback it can read and leaves the newer one open.
      const offered = yield* Ref.make<ReadonlyArray<string>>([])
      const provider = yield* client.provideCallbacks(session.id, ["approval"], (callback: PendingCallback) =>
        Effect.as(Ref.update(offered, (all) => [...all, callback.callbackId]), Option.some({ decision: "approve" }))
      ).pipe(Effect.fork)

      // Live: every event of the turn, the unknown ones (the volatile one too) among them, up to its end.
      const live = yield* client.events(session.id, { volatile: true }).pipe(
        Stream.takeUntil(({ event }) => event._tag === "durable" && event.record._tag === "turn_ended"),
        Stream.runCollect,
        Effect.fork
      )
      yield* client.send(session.id, { text: "deploy" })
      const liveFrames = Chunk.toReadonlyArray(yield* Fiber.join(live))
      yield* Fiber.interrupt(provider)
      assert.strictEqual(yield* Ref.get(runs), 1, "approved by the provider")
      assert.notInclude(yield* Ref.get(offered), "cb_future")
      assert.lengthOf(yield* Ref.get(offered), 1)
      const progress = liveFrames.find(({ event }) => event._tag === "unknown" && event.kind === "tool_progress")
      assert.isDefined(progress, "an unknown volatile event passes through")
      assert.isUndefined(progress!.cursor)
      assert.deepStrictEqual(kinds(liveFrames.filter(({ cursor }) => cursor !== undefined)), EXPECTED)

      // Replayed, through the Effect client.
      const replay = Chunk.toReadonlyArray(yield* Stream.runCollect(client.events(session.id, { follow: false })))
      assert.deepStrictEqual(kinds(replay), EXPECTED)
      assert.deepStrictEqual(replay.map(({ cursor }) => cursor), EXPECTED.map((_, i) => i + 1), "every cursor, gap-free")
      const future = replay[2]!.event
      assert.instanceOf(future, ForwardCompatible.Unknown)
      assert.deepStrictEqual(future, new ForwardCompatible.Unknown({
        kind: "sandbox_snapshot",
        cursor: 3,
        raw: (future as ForwardCompatible.Unknown).raw
      }))
      const raw = (future as ForwardCompatible.Unknown).raw as { record: Record<string, unknown> }
      assert.deepStrictEqual(raw.record, { _tag: "sandbox_snapshot", turnId: raw.record.turnId, snapshotId: "snap_1", bytes: 4096 })
      const ended = replay.at(-1)!.event
      assert.isTrue(ended._tag === "durable" && ended.record._tag === "turn_ended" && ended.record.output === "deployed it")
      assert.isFalse("traceId" in (ended as { record: object }).record, "an unknown field of a known record is dropped")
      // Replayed, through the Promise client.
      const promised = yield* Effect.promise(() => PromiseClient.connect(path, { timeout: "5 seconds" }))
      const promisedKinds = yield* Effect.promise(async () => {
        const seen: Array<SessionClient.EventFrame> = []
        for await (const frame of await promised.events(session.id, { follow: false })) seen.push(frame)
        await promised.disconnect()
        return kinds(seen)
      })
      assert.deepStrictEqual(promisedKinds, EXPECTED)

      // Replayed, through the CLI: a line for each event, the unknown ones with their kind and payload.
      const env = Cli.envFor(dir)
      const text = yield* Cli.ok(["sessions", "events", session.id, "--socket", path], env)
      const lines = text.stdout.trim().split("\n")
      assert.lengthOf(lines, EXPECTED.length, text.stdout)
      assert.match(lines[2]!, /^#3 \S+ sandbox_snapshot \(not known to this client\) .*"snapshotId":"snap_1"/)
      assert.match(lines[3]!, /^#4 \S+ operation_started \(not known to this client\) .*"kind":"sandbox"/)
      assert.match(lines.at(-1)!, /^#14 \S+ turn_ended \S+ completed "deployed it"/)
      const json = Cli.jsonLines((yield* Cli.ok(["sessions", "events", session.id, "--socket", path, "--json"], env)).stdout)
      assert.lengthOf(json, EXPECTED.length)
      assert.deepStrictEqual((json[2] as { record: unknown }).record, raw.record, "--json prints an unknown event as received")
      assert.strictEqual((json.at(-1) as { record: { _tag: string } }).record._tag, "turn_ended")
      const show = yield* Cli.ok(["sessions", "show", session.id, "--socket", path], env)
      assert.include(show.stdout, session.id)
    })), { timeout: 60_000 })

  it.effect("decodes by the rule: a known kind it cannot read, or a new kind, is Unknown; a broken envelope is still an error", () =>
    Effect.gen(function*() {
      const decode = ForwardCompatible.decodeEventFrame
      const sessionId = yield* makeSessionId
      const durable = (record: unknown, cursor: unknown = 1) => ({ cursor, event: { _tag: "durable", sessionId, cursor, at: 5, record } })
      const kindOf = (payload: unknown) => {
        const decoded = decode(payload)
        return Either.isLeft(decoded) ? "error" : decoded.right.event._tag === "unknown" ? `unknown:${decoded.right.event.kind}` : decoded.right.event._tag
      }
      assert.strictEqual(kindOf(durable({ _tag: "renamed", title: "t" })), "durable")
      assert.strictEqual(kindOf(durable({ _tag: "renamed", title: 1 })), "unknown:renamed")
      assert.strictEqual(kindOf(durable({ _tag: "sandbox_snapshot" })), "unknown:sandbox_snapshot")
      assert.strictEqual(kindOf({ event: { _tag: "tool_progress", sessionId, fraction: 1 } }), "unknown:tool_progress")
      // Broken, not newer.
      assert.strictEqual(kindOf(durable({})), "error", "a record without a kind")
      assert.strictEqual(kindOf({ event: durable({ _tag: "new" }).event }), "error", "a durable event without its cursor")
      assert.strictEqual(kindOf({ cursor: 2, event: durable({ _tag: "new" }).event }), "error", "two cursors")
      assert.strictEqual(kindOf({ event: { _tag: "tool_progress" } }), "error", "no session")
      assert.strictEqual(kindOf({ cursor: "1", event: { _tag: "delta", sessionId } }), "error")
      assert.strictEqual(kindOf({ event: 42 }), "error")
      assert.strictEqual(kindOf([]), "error")
      const callback = ForwardCompatible.decodeCallbackOpen({ callback: { callbackId: "cb_1", kind: "elicitation" } })
      assert.isTrue(Either.isRight(callback) && ForwardCompatible.isUnknown(callback.right) && callback.right.kind === "elicitation")
      assert.isTrue(Either.isLeft(ForwardCompatible.decodeCallbackOpen({ callback: { kind: "approval" } })), "no callback id")
    }))
})
