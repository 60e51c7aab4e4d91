/**
 * The two Server-Sent Event endpoints (HTTP.md "Event streams"), as streamed
 * bodies beside the `HttpApi` handlers:
 *
 * - `events`: the socket's own producer (`SessionRoutes.produceEvents`: the
 *   replay at the client's pace, then live events through a bounded buffer;
 *   one that overflows ends the stream `slow_consumer`) framed as SSE, each
 *   durable event with `id:` = its cursor. Every stream the server ends ends
 *   with `event: end` `{ reason, cursor }` (`replayed`, `closed`,
 *   `slow_consumer`, `shutdown`), the cursor being the last durable event
 *   written; `: ping` comments keep it open meanwhile.
 * - `callbacks`: a callback provider for the session's subtree; each
 *   callback it is offered goes out as `event: callback`, and stays open
 *   for the `answer` endpoint (or another provider) to answer.
 *
 * Each open stream holds one of its principal's `perPrincipal` slots, given
 * back when the stream ends however it ends.
 *
 * @since 0.3.0
 */
import { HttpServerResponse } from "@effect/platform"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Problem from "../http/Problem.js"
import * as Sse from "../http/Sse.js"
import type { CallbackKind, PendingCallback } from "../schema/Callback.js"
import { PendingCallback as PendingCallbackSchema } from "../schema/Callback.js"
import type { SessionId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import * as Schema from "effect/Schema"
import { eventFramePayload, type Deps, type Item, produceEvents, type Stop, toWireError } from "./SessionRoutes.js"

/** Stream tuning. */
export interface Limits {
  /** Open streams per principal (default 64); one more is `busy`. */
  readonly perPrincipal: number
  /** The longest an idle stream goes without a `: ping` (default 15 s). */
  readonly heartbeat: Duration.Duration
  /** Live events a stream may fall behind by before it ends `slow_consumer` (default 1024). */
  readonly eventBuffer: number
}

/** What an event stream is asked for. */
export interface EventRequest {
  readonly sessionId: SessionId
  readonly after: number
  readonly volatile: boolean
  readonly follow: boolean
}

const encoder = new TextEncoder()
const bytes = (text: string) => encoder.encode(text)

/** The key of a principal's slots: its tenancy and user. */
const keyOf = (principal: Principal) =>
  `${principal.customerId}/${principal.organizationId}/${principal.workspaceId}/${principal.userId ?? ""}`

const headers = { "cache-control": "no-cache", "x-accel-buffering": "no" }

const endFrame = (reason: Sse.EndReason, cursor: number) => Sse.encode("end", JSON.stringify({ reason, cursor }))

const encodeCallback = Schema.encodeSync(PendingCallbackSchema)

/** The streams of one listener: their slots, and the drain that ends them all. */
export const make = (deps: Deps, drain: Deferred.Deferred<void>, limits: Limits) => {
  const open = new Map<string, number>()
  let total = 0

  /** Takes a slot of `principal`'s, or fails `busy`. */
  const acquire = (principal: Principal) =>
    Effect.suspend(() => {
      const key = keyOf(principal)
      const used = open.get(key) ?? 0
      if (used >= limits.perPrincipal) {
        return Effect.fail(
          Problem.make(429, "busy", `at most ${limits.perPrincipal} event streams may be open per principal`, { retryable: true })
        )
      }
      open.set(key, used + 1)
      total++
      return Effect.succeed(
        Effect.sync(() => {
          const left = (open.get(key) ?? 1) - 1
          if (left <= 0) open.delete(key)
          else open.set(key, left)
          total--
        })
      )
    })

  /** The body of an event stream; `release` runs when it ends. */
  const eventBody = (principal: Principal, request: EventRequest) =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const items = yield* Queue.bounded<Item>(deps.eventBuffer)
      const stop = yield* Deferred.make<Stop>()
      yield* Effect.forkScoped(produceEvents(deps, principal, { ...request }, items, stop))
      let emitted = request.after
      let ended = false
      const finish = (reason: Sse.EndReason, text: string) => {
        ended = true
        return Chunk.of(bytes(text + endFrame(reason, emitted)))
      }
      const pull: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>> = Effect.gen(function*() {
        if (ended) return yield* Effect.fail(Option.none())
        let batch = yield* Queue.takeAll(items)
        if (Chunk.isEmpty(batch)) {
          // Only terminal signals race the take: an item lost to them ends the stream at the cursor written.
          const next = yield* Effect.raceFirst(
            Effect.map(Queue.take(items), Either.right),
            Effect.raceFirst(
              Effect.map(Deferred.await(stop), (reason) => Either.left<Sse.EndReason>(reason === "slow_consumer" ? "slow_consumer" : "shutdown")),
              Effect.as(Deferred.await(drain), Either.left<Sse.EndReason>("shutdown"))
            )
          )
          if (Either.isLeft(next)) return finish(next.left, "")
          batch = Chunk.of(next.right)
        }
        let text = ""
        for (const item of batch) {
          if (yield* Deferred.isDone(stop)) return finish("slow_consumer", text)
          if (yield* Deferred.isDone(drain)) return finish("shutdown", text)
          switch (item._tag) {
            case "event": {
              const event = item.event
              const data = JSON.stringify(eventFramePayload(event))
              if (event._tag === "durable") {
                text += Sse.encode(event.record._tag, data, event.cursor)
                emitted = event.cursor
              } else {
                text += Sse.encode(event._tag, data)
              }
              break
            }
            case "end":
              return finish(item.reason === "done" ? "replayed" : "closed", text)
            case "failed": {
              const wire = toWireError(item.error)
              const problem = Problem.ofKind(wire.kind, wire.message, { retryable: wire.retryable })
              return finish("shutdown", text + Sse.encode("error", JSON.stringify(problem)))
            }
            case "died":
              return finish("shutdown", text + Sse.encode("error", JSON.stringify(Problem.make(500, "internal", "internal error"))))
          }
        }
        return Chunk.of(bytes(text))
      })
      return Stream.repeatEffectChunkOption(pull)
    }))

  /** Pings merged in, ending with the body; the slot given back at the end. */
  const respond = (body: Stream.Stream<Uint8Array>, release: Effect.Effect<void>) =>
    HttpServerResponse.stream(
      Stream.merge(body, Stream.map(Stream.tick(limits.heartbeat), () => bytes(Sse.ping)), { haltStrategy: "left" }).pipe(
        Stream.ensuring(release)
      ),
      { contentType: "text/event-stream", headers }
    )

  return {
    /** How many streams are open. */
    openStreams: () => total,
    /** `GET /v1/sessions/{id}/events`. */
    events: (principal: Principal, request: EventRequest) =>
      Effect.gen(function*() {
        if (yield* Deferred.isDone(drain)) return yield* Effect.fail(Problem.make(503, "busy", "the daemon is shutting down", { retryable: true }))
        // Checked before the answer starts, so a missing session (or a cursor beyond its head) is a problem, not a stream.
        const session = yield* deps.sessions.get(principal, request.sessionId).pipe(
          Effect.mapError((error) => {
            const wire = toWireError(error)
            return Problem.ofKind(wire.kind, wire.message, { retryable: wire.retryable })
          })
        )
        if (request.after > session.headSeq) {
          return yield* Effect.fail(Problem.make(
            400,
            "invalid_payload",
            `cursor ${request.after} is beyond this session's last event (${session.headSeq}): it is not a cursor of this session`
          ))
        }
        const release = yield* acquire(principal)
        return respond(eventBody(principal, request), release)
      }),
    /** `GET /v1/sessions/{id}/callbacks/stream`. */
    callbacks: (principal: Principal, sessionId: SessionId, kinds: ReadonlyArray<CallbackKind>) =>
      Effect.gen(function*() {
        if (yield* Deferred.isDone(drain)) return yield* Effect.fail(Problem.make(503, "busy", "the daemon is shutting down", { retryable: true }))
        yield* deps.sessions.get(principal, sessionId).pipe(
          Effect.mapError((error) => Problem.ofKind(toWireError(error).kind, toWireError(error).message))
        )
        const release = yield* acquire(principal)
        return respond(callbackBody(deps, drain, principal, sessionId, kinds), release)
      })
  }
}

/** The body of a callback provider stream: each callback offered to it as an SSE `callback`, then `end`. */
const callbackBody = (
  deps: Deps,
  drain: Deferred.Deferred<void>,
  principal: Principal,
  sessionId: SessionId,
  kinds: ReadonlyArray<CallbackKind>
): Stream.Stream<Uint8Array> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    // Bounded: a provider whose client does not read holds its callbacks, it does not buffer them.
    const offered = yield* Queue.bounded<PendingCallback>(64)
    const provider = yield* Effect.forkScoped(
      deps.sessions.provideCallbacks(principal, sessionId, kinds, (callback) =>
        Effect.as(Queue.offer(offered, callback), Option.none()))
    )
    let ended = false
    const pull: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>> = Effect.gen(function*() {
      if (ended) return yield* Effect.fail(Option.none())
      const next = yield* Effect.raceFirst(
        Effect.map(Queue.take(offered), Either.right),
        Effect.raceFirst(
          Effect.as(Deferred.await(drain), Either.left("shutdown" as const)),
          Effect.as(Fiber.await(provider), Either.left("closed" as const))
        )
      )
      if (Either.isLeft(next)) {
        ended = true
        return Chunk.of(bytes(endFrame(next.left, 0)))
      }
      const callback = next.right
      return Chunk.of(bytes(Sse.encode("callback", JSON.stringify({ callback: encodeCallback(callback), parentId: callback.parentSessionId }))))
    })
    return Stream.repeatEffectChunkOption(pull)
  }))

/** The streams of a listener. */
export type Streams = ReturnType<typeof make>
