/**
 * The `CallbackBroker` hands open callbacks to the providers registered on a
 * session or any of its ancestors, nearest first, and admits their answers.
 *
 * A provider is registered by `provide`, which serves for as long as it runs:
 * interrupting it (closing the scope it was forked in) withdraws it, and a
 * handler failure ends it with that error. A handler returns `Some(result)` to
 * answer or `None` to leave the callback to the next provider up the tree (or
 * to a manual answer). Answers go through the session's inbox like every other
 * command, admitted by `SessionStore.admitAnswer`: the store admits one answer
 * per callback, so the first admitted answer wins and later ones are stale at
 * once, whichever process or provider sends them.
 *
 * Providers see callbacks opened by this host's actors as they open, and, when
 * they register, every callback still open in their session's tree (including
 * those a crashed host left behind).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import {
  type AnswerOf,
  answerSchema,
  CallbackRequest,
  type CallbackKind,
  type Handler,
  type OpenCallback,
  PendingCallback
} from "../schema/Callback.js"
import * as CallbackHandlers from "../schema/CallbackHandlers.js"
import {
  type InvalidCallbackAnswer,
  InvalidInput,
  type SessionNotFound,
  StaleCallback,
  type StoreUnavailable
} from "../schema/Errors.js"
import { type CallbackId, makeInputId, type OperationId, type SessionId, type TurnId } from "../schema/Ids.js"
import { CallbackAnswer } from "../schema/Inbox.js"
import { failure } from "../schema/ProductEvent.js"
import { closedReason, SessionStore } from "./SessionStore.js"
import { StoreSignals } from "./StoreSignals.js"
import { Telemetry } from "./Telemetry.js"

/** A provider's handler, typed by the kinds it serves (`Callback.Handler`). */
export type { Handler }

/** What an answer must match besides its callback id. */
export interface AnswerMatch {
  readonly turnId?: TurnId | undefined
  readonly operationId?: OperationId | undefined
}

/** The port. */
export class CallbackBroker extends Context.Tag("troupe/CallbackBroker")<
  CallbackBroker,
  {
    /**
     * Serves callbacks of `kinds` opened in `sessionId`'s tree until
     * interrupted; fails with the handler's first error, or with
     * `InvalidCallbackAnswer` (counted as `provider.failed`) for its first
     * answer of the wrong shape.
     */
    readonly provide: <E, K extends CallbackKind = CallbackKind>(
      sessionId: SessionId,
      kinds: ReadonlyArray<K>,
      handler: Handler<E, K>
    ) => Effect.Effect<never, E | InvalidCallbackAnswer | SessionNotFound | StoreUnavailable>
    /** Offers a just-opened callback to the providers of its session's ancestry (returns at once). */
    readonly dispatch: (callback: OpenCallback) => Effect.Effect<void>
    /** Stops offering a callback that was closed. */
    readonly withdraw: (callbackId: CallbackId) => Effect.Effect<void>
    /** The typed view of an open callback, with its place in the session tree. */
    readonly describe: (callback: OpenCallback) => Effect.Effect<PendingCallback, SessionNotFound | StoreUnavailable>
    /**
     * Sessions whose inbox received an answer from a provider: the host takes
     * them and wakes their actors.
     */
    readonly answered: Queue.Dequeue<SessionId>
  }
>() {}

/**
 * Checks an answer against the session's open callbacks and its kind's answer
 * schema, and builds the inbox command that carries it. The final check is the
 * store's, in the transaction that admits it (`SessionStore.admitAnswer`: one
 * answer per callback); this one refuses early and decodes the result.
 */
export const prepareAnswer = (
  sessionId: SessionId,
  callbackId: CallbackId,
  result: unknown,
  match: AnswerMatch = {}
): Effect.Effect<CallbackAnswer, StaleCallback | InvalidInput | StoreUnavailable, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const open = (yield* store.openCallbacks(sessionId)).find((c) => c.callbackId === callbackId)
    if (open === undefined) {
      return yield* new StaleCallback({ sessionId, callbackId, reason: yield* closedReason(store.readLog, sessionId, callbackId) })
    }
    if (
      (match.turnId !== undefined && match.turnId !== open.turnId) ||
      (match.operationId !== undefined && match.operationId !== open.operationId)
    ) {
      return yield* new StaleCallback({ sessionId, callbackId, reason: "mismatch" })
    }
    const schema = answerSchema[open.kind] as Schema.Schema<unknown, unknown>
    const decoded = yield* Schema.decodeUnknown(schema)(result).pipe(
      // One plain line (the CLI and the wire show it as it is): what the kind's answer is, not the schema's tree.
      Effect.mapError(() => new InvalidInput({ what: "callback answer", reason: expectedAnswer[open.kind] }))
    )
    return new CallbackAnswer({
      inputId: yield* makeInputId,
      callbackId,
      turnId: open.turnId,
      operationId: open.operationId,
      result: yield* Effect.orDie(Schema.encode(schema)(decoded))
    }, true)
  })

/** What an answer of each kind looks like, said to a caller who sent another shape. */
const expectedAnswer: { readonly [K in CallbackKind]: string } = {
  approval: `not an approval answer: expected { decision: "approve" | "approve_session" | "deny", reason?: string }`,
  client_tool: "not a client_tool answer: expected { output: <the tool's result, any JSON>, isError?: boolean }"
}

interface Job {
  readonly callback: PendingCallback
  readonly reply: Deferred.Deferred<Option.Option<AnswerOf>>
}

interface Provider {
  readonly sessionId: SessionId
  readonly kinds: ReadonlySet<CallbackKind>
  readonly jobs: Queue.Queue<Job>
  /** Done when the provider stops; its pending jobs count as unanswered. */
  readonly done: Deferred.Deferred<void>
  /** Callbacks already offered to it, so it sees each once. */
  readonly offered: Set<CallbackId>
}

interface Place {
  readonly parentId: SessionId | null
  readonly agentPath: ReadonlyArray<string>
}

const decodeRequest = Schema.decodeUnknown(CallbackRequest)

/** Builds the broker; dispatches run in fibers owned by the enclosing scope. */
export const make = Effect.gen(function*() {
  const store = yield* SessionStore
  const signals = yield* StoreSignals
  const telemetry = yield* Telemetry
  const providers = new Map<SessionId, Array<Provider>>()
  const dispatches = yield* FiberMap.make<CallbackId>()
  const answered = yield* Queue.unbounded<SessionId>()
  // Where a session sits in its tree never changes, so it is read once.
  const places = new Map<SessionId, Place>()

  const placeOf = (sessionId: SessionId) =>
    Effect.suspend(() => {
      const known = places.get(sessionId)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(store.get(sessionId), (session) => {
        const place = { parentId: session.parentId, agentPath: session.agentPath }
        if (places.size > 100_000) places.clear()
        places.set(sessionId, place)
        return place
      })
    })

  /** The session and its ancestors, nearest first. */
  const ancestry = (sessionId: SessionId) =>
    Effect.gen(function*() {
      const chain: Array<SessionId> = []
      let current: SessionId | null = sessionId
      while (current !== null && chain.length < 1000) {
        chain.push(current)
        current = (yield* placeOf(current)).parentId
      }
      return chain
    })

  const describe = (callback: OpenCallback) =>
    Effect.gen(function*() {
      const place = yield* placeOf(callback.sessionId)
      const request = yield* Effect.orDie(decodeRequest(callback.request))
      // The expiry is in the `callback_opened` record only (the store's open-callback row has none): one read a callback.
      const opened = yield* store.readLog(callback.sessionId, { after: callback.openedSeq - 1, limit: 1 })
      const body = opened.records[0]?.body
      const expiresAt = body?._tag === "callback_opened" && body.callbackId === callback.callbackId ? body.expiresAt : undefined
      return new PendingCallback({
        callbackId: callback.callbackId,
        sessionId: callback.sessionId,
        parentSessionId: place.parentId,
        agentPath: place.agentPath,
        turnId: callback.turnId,
        operationId: callback.operationId,
        kind: callback.kind,
        request,
        openedAt: callback.openedAt,
        expiresAt
      }, true)
    })

  /** Admits a provider's answer; a stale one (someone answered first, anywhere) is dropped. */
  const admit = (callback: PendingCallback, result: unknown) =>
    prepareAnswer(callback.sessionId, callback.callbackId, result, callback).pipe(
      Effect.flatMap((command) => store.admitAnswer(callback.sessionId, command)),
      Effect.zipRight(Queue.offer(answered, callback.sessionId)),
      Effect.catchTags({
        StaleCallback: () => Effect.void,
        SessionClosed: () => Effect.void
      }),
      Effect.catchAll((error) =>
        Effect.logWarning("a provider's callback answer was not admitted", error).pipe(
          Effect.annotateLogs({ sessionId: callback.sessionId, callbackId: callback.callbackId })
        )
      ),
      Effect.provideService(SessionStore, store)
    )

  /** Offers one callback to one provider; `None` if it declines or stops first. */
  const offer = (provider: Provider, callback: PendingCallback) =>
    Effect.gen(function*() {
      if (provider.offered.has(callback.callbackId)) return Option.none()
      provider.offered.add(callback.callbackId)
      const reply = yield* Deferred.make<Option.Option<AnswerOf>>()
      yield* Queue.offer(provider.jobs, { callback, reply })
      return yield* Effect.raceFirst(Deferred.await(reply), Effect.as(Deferred.await(provider.done), Option.none()))
    })

  const dispatch = (open: OpenCallback) =>
    FiberMap.run(
      dispatches,
      open.callbackId,
      Effect.gen(function*() {
        const callback = yield* describe(open)
        const chain = yield* ancestry(open.sessionId)
        for (const sessionId of chain) {
          for (const provider of providers.get(sessionId) ?? []) {
            if (!provider.kinds.has(open.kind)) continue
            const answer = yield* offer(provider, callback)
            if (Option.isSome(answer)) return yield* admit(callback, answer.value)
          }
        }
      }).pipe(Effect.catchAll((error) => Effect.logWarning("callback dispatch failed", error)))
    ).pipe(Effect.asVoid)

  /** Every session of `sessionId`'s tree, itself first. */
  const tree = (sessionId: SessionId) =>
    Effect.gen(function*() {
      const root = yield* store.get(sessionId)
      const ids: Array<SessionId> = [sessionId]
      let cursor: string | undefined
      for (;;) {
        const page = yield* store.list({
          principal: root.principal,
          scope: { tree: sessionId },
          includeArchived: true,
          cursor,
          limit: 500
        }).pipe(Effect.catchTag("InvalidInput", Effect.die))
        for (const session of page.items) if (session.id !== sessionId) ids.push(session.id)
        if (page.nextCursor === undefined) return ids
        cursor = page.nextCursor
      }
    })

  /** Offers the callbacks open in `id` now to the provider (each once), and admits its answers. */
  const offerOpen = (provider: Provider, id: SessionId) =>
    Effect.flatMap(store.openCallbacks(id), (open) =>
      Effect.forEach(open, (callback) =>
        provider.kinds.has(callback.kind) && !provider.offered.has(callback.callbackId)
          ? describe(callback).pipe(
            Effect.flatMap((pending) =>
              Effect.flatMap(offer(provider, pending), (answer) =>
                Option.isSome(answer) ? admit(pending, answer.value) : Effect.void)
            )
          )
          : Effect.void, { discard: true }))

  /**
   * Watches every session of the provider's tree (and children spawned into it
   * later) for commits by other processes, and offers the callbacks they open:
   * a provider here serves callbacks opened by an actor anywhere. The nearest
   * provider comes first within each process; between processes, the first
   * answer admitted wins.
   */
  const followTree = (provider: Provider, sessions: ReadonlyArray<SessionId>) =>
    Effect.gen(function*() {
      const changed = yield* Queue.sliding<SessionId>(1024)
      const watched = new Set<SessionId>()
      const watchOne = (id: SessionId) =>
        watched.has(id) ? Effect.void : Effect.gen(function*() {
          watched.add(id)
          const changes = yield* signals.watch(id)
          yield* Queue.take(changes).pipe(
            Effect.flatMap((signal) => (signal._tag === "Log" || signal._tag === "Missed" ? Queue.offer(changed, id) : Effect.void)),
            Effect.forever,
            Effect.forkScoped
          )
        })
      yield* Effect.forEach(sessions, watchOne, { discard: true })
      for (;;) {
        const ids = new Set([yield* Queue.take(changed), ...(yield* Queue.takeAll(changed))])
        yield* Effect.forEach(ids, (id) => offerOpen(provider, id), { discard: true }).pipe(
          // A commit may have spawned a child: the tree is read again, and its new sessions watched and offered.
          Effect.zipRight(Effect.flatMap(tree(provider.sessionId), (now) =>
            Effect.forEach(now, (child) =>
              watched.has(child) ? Effect.void : Effect.zipRight(watchOne(child), offerOpen(provider, child)), { discard: true })
          )),
          Effect.catchAll((error) => Effect.logWarning("could not follow the open callbacks of a session tree", error))
        )
      }
    })

  const provide = <E, K extends CallbackKind>(sessionId: SessionId, kinds: ReadonlyArray<K>, handler: Handler<E, K>) =>
    Effect.scoped(Effect.gen(function*() {
      const sessions = yield* tree(sessionId)
      const provider: Provider = {
        sessionId,
        kinds: new Set(kinds),
        jobs: yield* Queue.unbounded<Job>(),
        done: yield* Deferred.make<void>(),
        offered: new Set()
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => providers.set(sessionId, [...(providers.get(sessionId) ?? []), provider])),
        () =>
          Effect.zipRight(
            Effect.sync(() => {
              const rest = (providers.get(sessionId) ?? []).filter((p) => p !== provider)
              if (rest.length > 0) providers.set(sessionId, rest)
              else providers.delete(sessionId)
            }),
            Deferred.succeed(provider.done, undefined)
          )
      )
      // What is already open in the tree (opened before, or by a host that crashed) is offered now…
      yield* Effect.forkScoped(Effect.forEach(sessions, (id) => offerOpen(provider, id), { discard: true }).pipe(
        Effect.catchAll((error) => Effect.logWarning("could not read the open callbacks of a session tree", error))
      ))
      // …and what actors in other processes open in it from now on, as their commits are signalled.
      if (signals.shared) yield* Effect.forkScoped(followTree(provider, sessions))
      for (;;) {
        const job = yield* Queue.take(provider.jobs)
        const answer = yield* handler(job.callback as Parameters<typeof handler>[0])
        if (Option.isSome(answer)) {
          // A wrong shape ends the provider, as a handler's failure does: left open, the callback goes to the next one.
          const checked = CallbackHandlers.check(job.callback, answer.value)
          if (checked._tag === "Left") {
            yield* telemetry.emit(failure("provider.failed", "invalid_input"))
            return yield* checked.left
          }
          yield* Deferred.succeed(job.reply, Option.some(checked.right))
        } else {
          yield* Deferred.succeed(job.reply, answer)
        }
      }
    }))

  return CallbackBroker.of({
    provide,
    dispatch,
    withdraw: (callbackId) =>
      Effect.zipRight(
        // A closed callback is never offered again: providers forget it, so a long-lived one does not grow.
        Effect.sync(() => {
          for (const list of providers.values()) for (const provider of list) provider.offered.delete(callbackId)
        }),
        FiberMap.remove(dispatches, callbackId)
      ),
    describe,
    answered
  })
})

/** The broker as a layer over the store. */
export const layer: Layer.Layer<CallbackBroker, never, SessionStore | StoreSignals | Telemetry> = Layer.scoped(CallbackBroker, make)
