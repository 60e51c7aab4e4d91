/**
 * Helpers for the session-actor suites: a `Model` whose calls the test holds
 * and releases by hand, store wrappers that misbehave on purpose (stalled
 * renewals, a "crash" that never releases its lease), log readers and a
 * bounded scheduler spin for waiting on background fibers.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Chunk, Deferred, Effect, Layer, Option, Queue, Ref, Stream } from "effect"
import type { ModelError } from "../../src/schema/Errors.js"
import type { SessionEvent } from "../../src/schema/Event.js"
import type { SessionId, TurnId } from "../../src/schema/Ids.js"
import type { LogRecord, TurnEnded, TurnStarted } from "../../src/schema/Record.js"
import * as Model from "../../src/services/Model.js"
import { SessionStore } from "../../src/services/SessionStore.js"

/** One model call the test is holding. */
export interface HeldCall {
  /** The request the turn sent. */
  readonly request: Model.Request
  /** The newest user message of the request (the turn's text, or its last steer). */
  readonly text: string
  /** Lets the call reply with `reply`. */
  readonly release: (reply: string) => Effect.Effect<void>
  /** Lets the call fail with a model error. */
  readonly fail: (error: ModelError) => Effect.Effect<void>
  /** Completed when the call was interrupted while held (its `onInterrupt` ran). */
  readonly interrupted: Deferred.Deferred<void>
}

/** A model whose calls are held (per `hold`) until the test releases them. */
export interface GatedModel {
  readonly layer: Layer.Layer<Model.Model>
  /** Held calls, in the order they arrived. */
  readonly held: Queue.Dequeue<HeldCall>
  /** Every request made so far, held or not, in call order. */
  readonly requests: Ref.Ref<ReadonlyArray<Model.Request>>
}

/** The newest user message of a request. */
export const lastUser = (request: Model.Request): string => {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role === "user") return message.content
  }
  return ""
}

const reply = (text: string): Stream.Stream<Model.Event> =>
  Stream.make(
    Model.Event.TextDelta({ text }),
    Model.Event.UsageEvent({ inputTokens: 1, outputTokens: 1 }),
    Model.Event.Finish({ reason: "stop" })
  )

/**
 * A model that holds every call for which `hold(request)` is true until the
 * test releases it; other calls answer `You said: <last user text>` at once.
 */
export const gatedModel = (hold: (request: Model.Request) => boolean = () => true): Effect.Effect<GatedModel> =>
  Effect.gen(function*() {
    const held = yield* Queue.unbounded<HeldCall>()
    const requests = yield* Ref.make<ReadonlyArray<Model.Request>>([])
    const stream = (request: Model.Request): Stream.Stream<Model.Event, ModelError> =>
      Stream.unwrap(Effect.gen(function*() {
        yield* Ref.update(requests, (all) => [...all, request])
        const text = lastUser(request)
        if (!hold(request)) return reply(`You said: ${text}`)
        const gate = yield* Deferred.make<string, ModelError>()
        const interrupted = yield* Deferred.make<void>()
        yield* Queue.offer(held, {
          request,
          text,
          release: (answer) => Effect.asVoid(Deferred.succeed(gate, answer)),
          fail: (error) => Effect.asVoid(Deferred.fail(gate, error)),
          interrupted
        })
        const answer = yield* Deferred.await(gate).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
        return reply(answer)
      }))
    return { layer: Layer.succeed(Model.Model, Model.Model.of({ stream })), held, requests }
  })

/** Whether a request carries `text` as one of its user messages. */
export const mentions = (request: Model.Request, text: string): boolean =>
  request.messages.some((message) => message.role === "user" && message.content === text)

/**
 * Lets background fibers run until `check` holds, yielding to the scheduler
 * at most `limit` times; dies (failing the test) when it never holds. No
 * clock moves: this waits for work that needs no time, only turns of the
 * scheduler.
 */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  what: string,
  limit = 10_000
): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    for (let i = 0; i < limit; i++) {
      if (yield* check) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage(`never happened: ${what}`)
  })

/** The whole log of a session, every page. */
export const logOf = (sessionId: SessionId) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const out: Array<LogRecord> = []
    let after = 0
    for (;;) {
      const page = yield* store.readLog(sessionId, { after, limit: 1000 })
      out.push(...page.records)
      after = page.cursor
      if (!page.more) return out
    }
  })

/** The `turn_started` records of a log, in order. */
export const startsOf = (log: ReadonlyArray<LogRecord>): Array<TurnStarted> =>
  log.flatMap((record) => (record.body._tag === "turn_started" ? [record.body] : []))

/** The `turn_ended` records of a log, in order. */
export const endsOf = (log: ReadonlyArray<LogRecord>): Array<TurnEnded> =>
  log.flatMap((record) => (record.body._tag === "turn_ended" ? [record.body] : []))

/** The `turn_ended` records of one turn (a correct log has at most one). */
export const endsOfTurn = (log: ReadonlyArray<LogRecord>, turnId: TurnId): Array<TurnEnded> =>
  endsOf(log).filter((ended) => ended.turnId === turnId)

/**
 * Walks a log and checks turns never overlap: between a `turn_started` and its
 * `turn_ended` no other turn starts, and no turn ends twice or before it started.
 */
export const assertTurnsSerial = (log: ReadonlyArray<LogRecord>): void => {
  let open: TurnId | undefined
  const ended = new Set<TurnId>()
  for (const record of log) {
    const body = record.body
    if (body._tag === "turn_started") {
      assert.isUndefined(open, `turn ${body.turnId} started at seq ${record.seq} while ${open} was active`)
      open = body.turnId
    } else if (body._tag === "turn_ended") {
      assert.strictEqual(body.turnId, open, `turn ${body.turnId} ended at seq ${record.seq} but ${open} was active`)
      assert.isFalse(ended.has(body.turnId), `turn ${body.turnId} ended twice`)
      ended.add(body.turnId)
      open = undefined
    }
  }
}

/**
 * Collects the durable events of `stream` up to and including the first one
 * `last` accepts. Volatile deltas are dropped.
 */
export const collectUntil = <E, R>(
  stream: Stream.Stream<SessionEvent, E, R>,
  last: (record: LogRecord["body"]) => boolean
) =>
  stream.pipe(
    Stream.filter((event) => event._tag === "durable"),
    Stream.takeUntil((event) => event._tag === "durable" && last(event.record)),
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray)
  )

/** A store whose lease renewals can be stalled: they wait while the gate is closed. */
export interface StallableStore {
  readonly layer: Layer.Layer<SessionStore>
  /** Renewals wait (as on a network partition between host and store) until `resume`. */
  readonly stall: Effect.Effect<void>
  readonly resume: Effect.Effect<void>
}

/** Wraps a store so the test can stall its lease renewals. */
export const stallable = (store: SessionStore["Type"]): Effect.Effect<StallableStore> =>
  Effect.gen(function*() {
    const gate = yield* Effect.makeLatch(true)
    return {
      layer: Layer.succeed(
        SessionStore,
        SessionStore.of({
          ...store,
          renew: (lease, ttl) => Effect.zipRight(gate.await, store.renew(lease, ttl)),
          renewAll: (leases, ttl) => Effect.zipRight(gate.await, store.renewAll(leases, ttl))
        })
      ),
      stall: gate.close,
      resume: gate.open
    }
  })

/**
 * A store that never gives a lease back: what a host that crashed (rather
 * than shut down) leaves behind, since its finalizers never ran.
 */
export const neverReleases = <E, R>(layer: Layer.Layer<SessionStore, E, R>): Layer.Layer<SessionStore, E, R> =>
  Layer.effect(
    SessionStore,
    Effect.map(SessionStore, (store) =>
      SessionStore.of({ ...store, release: () => Effect.void, releaseIdle: () => Effect.succeed(true) }))
  ).pipe(Layer.provide(layer))

/** A value or a dying test. */
export const some = <A>(option: Option.Option<A>, what: string): Effect.Effect<A> =>
  Option.match(option, { onNone: () => Effect.dieMessage(`expected ${what}`), onSome: Effect.succeed })
