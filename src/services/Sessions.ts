/**
 * The public `Sessions` API: create sessions, send them messages, await and
 * interrupt turns, rename/archive/close, read summaries and snapshots, and
 * subscribe to their events from any cursor, list a session's children and
 * tree. Every method takes the caller's `Principal` and sees only sessions of
 * its tenancy (the whole triple: customer, organization and workspace);
 * anyone else's session is `SessionNotFound`, indistinguishable from one that
 * never existed. A child session takes no message, steer or close from
 * outside (`ChildControlForbidden`): only its parent's tools message it.
 *
 * `Sessions.layer` builds it from a `SessionStore` and a `SessionHost`;
 * `Troupe.ts` composes ready-made runtimes.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { Agent } from "../schema/Agent.js"
import type { Budgets } from "../schema/Budget.js"
import type { CallbackKind, PendingCallback } from "../schema/Callback.js"
import {
  BudgetExhausted,
  ChildControlForbidden,
  type Conflict,
  type InvalidCallbackAnswer,
  InvalidInput,
  InvalidOutput,
  SessionBusy,
  SessionClosed,
  SessionNotFound,
  type StaleCallback,
  type StoreUnavailable,
  TurnFailed,
  TurnInterrupted,
  TurnMismatch,
  TurnNotFound
} from "../schema/Errors.js"
import { Accepted, Durable, InterruptOutcome, type SessionEvent, Snapshot, TurnResult } from "../schema/Event.js"
import { type CallbackId, InputId, makeInputId, makeSessionId, type OperationId, type SessionId, type TurnId } from "../schema/Ids.js"
import { type Admission, Control, Interrupt, Message, Steer } from "../schema/Inbox.js"
import type { BusyPolicy, SubagentPolicy } from "../schema/Policy.js"
import type { Principal } from "../schema/Principal.js"
import type { LogRecord, TurnEnded } from "../schema/Record.js"
import { RunOptions } from "../schema/Run.js"
import type { ChildPage, ListScope, Session, SessionPage, SessionTree } from "../schema/Session.js"
import type { ToolsetRef } from "../schema/Toolset.js"
import * as Trusted from "../schema/Trusted.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import * as Prompt from "./Prompt.js"
import { CallbackBroker, type Handler, prepareAnswer } from "./CallbackBroker.js"
import { tenantOf } from "../internal/SessionDraft.js"
import * as Telemetry from "./Telemetry.js"
import { Decision, decisionOf, interested, type Refusals, SessionHost, type TurnInterest } from "./SessionHost.js"
import { type PageRequest, SessionStore } from "./SessionStore.js"
import { Signal, StoreSignals } from "./StoreSignals.js"
import { bindTo, Toolsets } from "./Toolsets.js"

/** What creating a session takes besides the principal. */
export interface CreateOptions {
  readonly agent: Agent
  readonly title?: string | undefined
  readonly idempotencyKey?: string | undefined
  readonly busyPolicy?: BusyPolicy | undefined
  readonly budgets?: Budgets | undefined
  readonly subagentPolicy?: SubagentPolicy | undefined
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
  /** Toolsets bound to the session, by id or name, beside its agent's (`Toolsets`); one its workspace does not see is `InvalidInput`. */
  readonly toolsets?: ReadonlyArray<ToolsetRef> | undefined
}

/** A message to send. */
export interface SendOptions {
  readonly text: string
  /** `queue` (default): a new turn, after the running one if any; `steer`: into the running turn. */
  readonly mode?: "queue" | "steer" | undefined
  /** Idempotency key of this send; a retry with the same id and text is not sent twice. */
  readonly inputId?: string | undefined
  readonly source?: string | undefined
  /** Overrides for the turn this message starts: permissions, model settings, budgets. */
  readonly run?: typeof RunOptions.Encoded | RunOptions | undefined
}

/** An answer to an open callback. */
export interface AnswerOptions {
  readonly callbackId: CallbackId
  /** For `approval`: `{ decision, reason? }`; for `client_tool`: `{ output, isError? }`. */
  readonly result: unknown
  /** When given, the callback must belong to this turn… */
  readonly turnId?: TurnId | undefined
  /** …and to this operation, or the answer is stale. */
  readonly operationId?: OperationId | undefined
}

/** Where an event subscription starts and what it carries. */
export interface EventOptions {
  /** The cursor of the last event the caller has (default 0: from the beginning). */
  readonly after?: number | undefined
  /** Include volatile assistant deltas (default false). */
  readonly volatile?: boolean | undefined
  /** Keep following live events after the replay (default true). */
  readonly follow?: boolean | undefined
}

type Lookup = SessionNotFound | StoreUnavailable

/** What the `Sessions` port offers. */
export interface Service {
  readonly create: (principal: Principal, options: CreateOptions) => Effect.Effect<Session, Conflict | StoreUnavailable | InvalidInput>
  readonly get: (principal: Principal, sessionId: SessionId) => Effect.Effect<Session, Lookup>
  readonly list: (
    principal: Principal,
    options?: {
      readonly scope?: ListScope | undefined
      readonly includeArchived?: boolean | undefined
      readonly cursor?: string | undefined
      readonly limit?: number | undefined
    }
  ) => Effect.Effect<SessionPage, Lookup | InvalidInput>
  /**
   * A session's direct children, newest first, archived ones included, with
   * each one's alias, agent name and `agentPath`; `cursor` from the previous
   * page's `nextCursor` (valid only for this session's children and caller).
   */
  readonly children: (
    principal: Principal,
    sessionId: SessionId,
    page?: PageRequest
  ) => Effect.Effect<ChildPage, Lookup | InvalidInput>
  /**
   * A session and its whole subtree (parents before children; archived ones
   * only with `includeArchived`); more than 10,000 sessions below it is
   * `InvalidInput`: page with `list({ scope: { tree } })`.
   */
  readonly tree: (
    principal: Principal,
    sessionId: SessionId,
    options?: { readonly includeArchived?: boolean | undefined }
  ) => Effect.Effect<SessionTree, Lookup | InvalidInput>
  /**
   * Admits a message and reports what the session did with it: started a
   * turn (with its id and cursor), queued it, or steered the running turn.
   * `SessionBusy` when the session's busy policy is `reject`. A child
   * session is messaged only by its parent's tools: `ChildControlForbidden`.
   */
  readonly send: (
    principal: Principal,
    sessionId: SessionId,
    options: SendOptions
  ) => Effect.Effect<Accepted, Lookup | SessionClosed | SessionBusy | Conflict | InvalidInput | ChildControlForbidden>
  /**
   * Waits for a turn to end: its result, or `TurnFailed` / `TurnInterrupted`;
   * `TurnNotFound` for a turn id that is neither running nor in the log.
   * `after` (a cursor before the turn started, e.g. `Accepted.cursor - 1`)
   * spares a scan of the log for a turn that already ended.
   */
  readonly awaitTurn: (
    principal: Principal,
    sessionId: SessionId,
    turnId: TurnId,
    options?: { readonly after?: number | undefined }
  ) => Effect.Effect<TurnResult, Lookup | TurnNotFound | TurnFailed | TurnInterrupted | BudgetExhausted>
  /**
   * `awaitTurn` for an agent with an output schema (`Agent.outputOf`): the
   * turn's output decoded with `schema`, typed. An output that does not
   * decode is `InvalidOutput` (the turn itself completed).
   */
  readonly awaitOutput: <A, I>(
    principal: Principal,
    sessionId: SessionId,
    turnId: TurnId,
    schema: Schema.Schema<A, I>,
    options?: { readonly after?: number | undefined }
  ) => Effect.Effect<A, Lookup | TurnNotFound | TurnFailed | TurnInterrupted | BudgetExhausted | InvalidOutput>
  /** Interrupts exactly `expectedTurnId`; any other turn is `TurnMismatch`. */
  readonly interrupt: (
    principal: Principal,
    sessionId: SessionId,
    expectedTurnId: TurnId,
    reason?: string
  ) => Effect.Effect<InterruptOutcome, Lookup | TurnMismatch | SessionClosed>
  /**
   * Renames a session: a metadata-only write through the store (no lease, no
   * log record), so it works on closed sessions, on children, and while
   * another process drives the session; alias, lineage and turns are untouched.
   */
  readonly rename: (principal: Principal, sessionId: SessionId, title: string) => Effect.Effect<Session, Lookup | SessionClosed>
  /** Archives or unarchives a session, metadata-only like `rename`. */
  readonly archive: (principal: Principal, sessionId: SessionId, archived: boolean) => Effect.Effect<Session, Lookup | SessionClosed>
  /**
   * Closes the session (interrupting a running turn); it accepts nothing
   * more. Its children are not closed. A child is closed only by its
   * tree, never from outside: `ChildControlForbidden`.
   */
  readonly close: (
    principal: Principal,
    sessionId: SessionId
  ) => Effect.Effect<Session, Lookup | SessionClosed | ChildControlForbidden>
  readonly snapshot: (principal: Principal, sessionId: SessionId) => Effect.Effect<Snapshot, Lookup>
  /** The session's open callbacks, oldest first. */
  readonly callbacks: (principal: Principal, sessionId: SessionId) => Effect.Effect<ReadonlyArray<PendingCallback>, Lookup>
  /**
   * Answers an open callback. The first answer admitted wins; an answer to a
   * closed or unknown callback, a second answer, or one whose turn or
   * operation does not match is `StaleCallback`; a result of the wrong shape
   * for the callback's kind is `InvalidInput`.
   */
  readonly answerCallback: (
    principal: Principal,
    sessionId: SessionId,
    answer: AnswerOptions
  ) => Effect.Effect<void, Lookup | StaleCallback | InvalidInput | SessionClosed>
  /**
   * Serves the callbacks of `kinds` opened in the session or any descendant
   * (nearest provider first) until interrupted: fork it in the scope that
   * should own the provider. Fails with the handler's first error, or with
   * `InvalidCallbackAnswer` for its first answer of the wrong shape (the
   * callback stays open for the next provider or a manual answer).
   */
  readonly provideCallbacks: <E, K extends CallbackKind = CallbackKind>(
    principal: Principal,
    sessionId: SessionId,
    kinds: ReadonlyArray<K>,
    handler: Handler<E, K>
  ) => Effect.Effect<never, E | InvalidCallbackAnswer | Lookup>
  /**
   * The session's events after `after`: the log replayed, then live events,
   * with no gap and no duplicate.
   */
  readonly events: (
    principal: Principal,
    sessionId: SessionId,
    options?: EventOptions
  ) => Stream.Stream<SessionEvent, Lookup>
  /**
   * Sends a message and waits for the turn it starts (after the running one,
   * if it is queued): the turn's answer with its usage, `output` decoded with
   * `options.output` when given (the agent's output schema), typed. The
   * turn's failure, interruption or exhausted budget are its errors.
   */
  readonly prompt: <A = string, I = string>(
    principal: Principal,
    sessionId: SessionId,
    input: Prompt.Input,
    options?: Prompt.Options<A, I>
  ) => Effect.Effect<Prompt.Result<A>, Prompt.Error>
  /**
   * `prompt` as a stream: the events of the turn the message starts (from its
   * `turn_started` to its `turn_ended`, with the streamed text unless
   * `volatile: false`), then its result (`_tag: "prompt_result"`).
   */
  readonly promptStream: <A = string, I = string>(
    principal: Principal,
    sessionId: SessionId,
    input: Prompt.Input,
    options?: Prompt.Options<A, I>
  ) => Stream.Stream<Prompt.Item<A>, Prompt.Error>
  /** These methods for one principal: each without its first argument. */
  readonly as: (principal: Principal) => Scoped
}

/** A completed turn's answer (`prompt`; the last item of `promptStream`). */
export type PromptResult<A = string> = Prompt.Result<A>

/** A method of `Service` without its principal. */
type Unscoped<F> = F extends (principal: Principal, ...rest: infer Rest) => infer R ? (...rest: Rest) => R : never

/** The methods whose type parameters are spelled out in `Scoped`. */
type Generic = "awaitOutput" | "provideCallbacks" | "prompt" | "promptStream" | "as"

/** `Sessions` for one principal (`sessions.as(principal)`): the same methods, without their first argument. */
export type Scoped =
  & { readonly [K in Exclude<keyof Service, Generic>]: Unscoped<Service[K]> }
  & {
    readonly principal: Principal
    readonly awaitOutput: <A, I>(
      sessionId: SessionId,
      turnId: TurnId,
      schema: Schema.Schema<A, I>,
      options?: { readonly after?: number | undefined }
    ) => Effect.Effect<A, Lookup | TurnNotFound | TurnFailed | TurnInterrupted | BudgetExhausted | InvalidOutput>
    readonly provideCallbacks: <E, K extends CallbackKind = CallbackKind>(
      sessionId: SessionId,
      kinds: ReadonlyArray<K>,
      handler: Handler<E, K>
    ) => Effect.Effect<never, E | InvalidCallbackAnswer | Lookup>
    readonly prompt: <A = string, I = string>(
      sessionId: SessionId,
      input: Prompt.Input,
      options?: Prompt.Options<A, I>
    ) => Effect.Effect<Prompt.Result<A>, Prompt.Error>
    readonly promptStream: <A = string, I = string>(
      sessionId: SessionId,
      input: Prompt.Input,
      options?: Prompt.Options<A, I>
    ) => Stream.Stream<Prompt.Item<A>, Prompt.Error>
  }

/** The port. */
export class Sessions extends Context.Tag("troupe/Sessions")<Sessions, Service>() {}

/** `api`'s methods bound to `principal`. */
export const scoped = (api: Omit<Service, "as">, principal: Principal): Scoped => ({
  principal,
  create: (options) => api.create(principal, options),
  get: (sessionId) => api.get(principal, sessionId),
  list: (options) => api.list(principal, options),
  children: (sessionId, page) => api.children(principal, sessionId, page),
  tree: (sessionId, options) => api.tree(principal, sessionId, options),
  send: (sessionId, options) => api.send(principal, sessionId, options),
  awaitTurn: (sessionId, turnId, options) => api.awaitTurn(principal, sessionId, turnId, options),
  awaitOutput: (sessionId, turnId, schema, options) => api.awaitOutput(principal, sessionId, turnId, schema, options),
  interrupt: (sessionId, expectedTurnId, reason) => api.interrupt(principal, sessionId, expectedTurnId, reason),
  rename: (sessionId, title) => api.rename(principal, sessionId, title),
  archive: (sessionId, archived) => api.archive(principal, sessionId, archived),
  close: (sessionId) => api.close(principal, sessionId),
  snapshot: (sessionId) => api.snapshot(principal, sessionId),
  callbacks: (sessionId) => api.callbacks(principal, sessionId),
  answerCallback: (sessionId, answer) => api.answerCallback(principal, sessionId, answer),
  provideCallbacks: (sessionId, kinds, handler) => api.provideCallbacks(principal, sessionId, kinds, handler),
  events: (sessionId, options) => api.events(principal, sessionId, options),
  prompt: (sessionId, input, options) => api.prompt(principal, sessionId, input, options),
  promptStream: (sessionId, input, options) => api.promptStream(principal, sessionId, input, options)
})

/**
 * How long a command decided by another process's actor is followed in the
 * log (its actor notices it within its inbox poll); a message waiting behind a
 * running turn there leaves no record until its turn starts, so a send is
 * followed for less, then answered `admitted`.
 */
const crossProcessWait = Duration.seconds(30)
const queuedWait = Duration.seconds(2)

/** How often the log is read again when no signal of another process's commit came (a lost one). */
const backstop = Duration.millis(250)
const eventsBackstop = Duration.seconds(1)

/** Run options from plain data or a `RunOptions`; out-of-range values are `InvalidInput`, never a crash. */
const decodeRun = (run: unknown) =>
  Schema.decodeUnknown(RunOptions)(run instanceof RunOptions ? Schema.encodeSync(RunOptions)(run) : run).pipe(
    Effect.mapError((error) => new InvalidInput({ what: "run options", reason: error.message }))
  )


/** A caller's input id, checked. */
const decodeInputId = (inputId: string) =>
  Schema.decodeUnknown(InputId)(inputId).pipe(
    Effect.mapError((error) => new InvalidInput({ what: "inputId", reason: error.message }))
  )

/** The message a send pushes, with its run options decoded. */
const messageOf = (inputId: InputId, options: SendOptions): Effect.Effect<Message, InvalidInput> =>
  options.run === undefined
    ? messageWith(inputId, options, undefined)
    : Effect.flatMap(decodeRun(options.run), (run) => messageWith(inputId, options, run))

const messageWith = (inputId: InputId, options: SendOptions, run: RunOptions | undefined): Effect.Effect<Message> =>
  // The fiber ref read in place: one step, as `Telemetry.isExcluded` is.
  Effect.withFiberRuntime<Message>((fiber) =>
    Effect.succeed(Trusted.make(Message, {
      inputId,
      text: options.text,
      source: options.source,
      run,
      // Events the turn causes keep the caller's analytics preference.
      excludeFromAnalytics: fiber.getFiberRef(Telemetry.excluded) ? true : undefined
    }))
  )

/** What a send answers once its input is decided (`none`: a duplicate, or taken by no actor here). */
const acceptedOf = (sessionId: SessionId, inputId: InputId, decision: Option.Option<Decision>): Accepted => {
  if (Option.isNone(decision)) return Trusted.make(Accepted, { sessionId, inputId, disposition: "admitted" })
  const decided = decision.value
  switch (decided._tag) {
    case "Started":
      return Trusted.make(Accepted, {
        sessionId,
        inputId,
        disposition: "started",
        turnId: decided.turnId,
        cursor: decided.cursor
      })
    case "Steered":
      return Trusted.make(Accepted, { sessionId, inputId, disposition: "steered", turnId: decided.turnId })
    case "Queued":
      return Trusted.make(Accepted, { sessionId, inputId, disposition: "queued" })
    default:
      return Trusted.make(Accepted, { sessionId, inputId, disposition: "admitted" })
  }
}

/** Builds the API over the store and host in context. */
export const make = Effect.gen(function*() {
  const store = yield* SessionStore
  const host = yield* SessionHost
  const broker = yield* CallbackBroker
  const telemetry = yield* Telemetry.Telemetry
  const signals = yield* StoreSignals
  const toolsets = yield* Toolsets
  const missed = Signal.Missed({ sessionId: "" as SessionId })

  /** Keeps a session's tenancy and parent, which never change, so later ownership checks skip the store. */
  const remember = (session: Session) => {
    if (tenants.size > 100_000) tenants.clear()
    tenants.set(session.id, { tenant: tenantOf(session.principal), parentId: session.parentId })
  }

  const owned = (principal: Principal, sessionId: SessionId) =>
    store.get(sessionId).pipe(
      Effect.tap(remember),
      Effect.filterOrFail(
        (session) => tenantOf(session.principal) === tenantOf(principal),
        () => new SessionNotFound({ sessionId })
      )
    )

  const open = (principal: Principal, sessionId: SessionId) =>
    Effect.filterOrFail(owned(principal, sessionId), (s) => s.status !== "closed", () => new SessionClosed({ sessionId }))

  /**
   * Admits a command by `admit` and waits for the actor's decision on it:
   * refused only as its kind may be. When no actor here decides (another
   * process holds the lease), the decision is read from the log as that
   * process's actor writes it, for at most `crossProcessWait`; past it the
   * command is just admitted. `admit` is made when it runs, so the
   * caller's frames, kept while it waits for the decision, hold the thunk
   * and not the store call's whole effect.
   */
  const admitted = <K extends keyof Refusals, E>(
    sessionId: SessionId,
    inputId: InputId,
    kind: K,
    admit: () => Effect.Effect<Admission, E>
  ) =>
    interested(host.expect(sessionId, inputId, kind), (decision) =>
      Effect.flatMap(Effect.suspend(admit), (admission) =>
        admission.duplicate
          ? Effect.succeed(Option.none<Decision>())
          : Effect.zipRight(
            host.wake(sessionId),
            Effect.flatMap(decision.await, (decided) =>
              // An answer the store admitted will be applied, whoever applies it: nothing to follow.
              decided._tag === "Admitted" && kind !== "callback_answer"
                ? Effect.map(
                  decidedElsewhere(sessionId, inputId, kind === "message" ? queuedWait : crossProcessWait) as Effect.Effect<
                    Decision,
                    Refusals[K]
                  >,
                  Option.some
                )
                : Effect.succeed(Option.some(decided)))
          )))

  /** Pushes a command and waits for the actor's decision on it. */
  const submit = <C extends Message | Steer | Interrupt | Control>(sessionId: SessionId, command: C) =>
    admitted(sessionId, command.inputId, command._tag as C["_tag"], () => store.push(sessionId, command))

  /**
   * Reads the log after `after` until `pick` finds a record, then runs what it
   * returns: page by page, then again at each signal of another process's
   * commit (watched before the first read, so none is missed), or every
   * `backstop` should a signal be lost.
   */
  const untilInLog = <A, E>(
    sessionId: SessionId,
    after: number,
    pick: (record: LogRecord) => Effect.Effect<A, E> | undefined
  ) =>
    Effect.scoped(Effect.gen(function*() {
      const changes = yield* signals.watch(sessionId)
      let cursor = after
      for (;;) {
        const page = yield* store.readLog(sessionId, { after: cursor, limit: 1000 })
        for (const record of page.records) {
          const found = pick(record)
          if (found !== undefined) return yield* found
        }
        cursor = page.cursor
        if (page.more) continue
        yield* nextChange(changes, cursor)
      }
    }))

  /** Waits for a signal that the log grew past `cursor` (or may have), at most `backstop`. */
  const nextChange = (changes: Queue.Dequeue<Signal>, cursor: number) =>
    Effect.gen(function*() {
      for (;;) {
        const signal = yield* Queue.take(changes)
        if (signal._tag === "Missed" || (signal._tag === "Log" && signal.seq > cursor)) return
      }
    }).pipe(Effect.timeoutOption(backstop), Effect.asVoid)

  /** Follows the log for the record that states the decision on `inputId`, from the start, then as it grows. */
  const decidedElsewhere = (sessionId: SessionId, inputId: InputId, wait: Duration.Duration) =>
    untilInLog(sessionId, 0, (record) => decisionOf(record, inputId)).pipe(
      Effect.timeoutTo({ duration: wait, onTimeout: () => Decision.Admitted(), onSuccess: (decision: Decision) => decision }),
      Effect.catchTag("StoreUnavailable", () => Effect.succeed(Decision.Admitted()))
    )

  /** `submit` for a command under an id minted here: a fresh id never conflicts with an admitted one. */
  const submitMinted = <C extends Interrupt | Control>(sessionId: SessionId, command: C) =>
    submit(sessionId, command).pipe(Effect.catchTag("Conflict", Effect.die))

  // A session's tenancy (the whole principal triple) and parent never change, so
  // ownership checks can skip the store once seen.
  const tenants = new Map<SessionId, { readonly tenant: string; readonly parentId: SessionId | null }>()
  const authorize = (principal: Principal, sessionId: SessionId): Effect.Effect<void, Lookup> => {
    const known = tenants.get(sessionId)
    if (known !== undefined) {
      return known.tenant === tenantOf(principal)
        ? Effect.void
        : Effect.fail(new SessionNotFound({ sessionId }))
    }
    return Effect.asVoid(owned(principal, sessionId))
  }

  /**
   * Ownership, and that the session is not a child: from outside, a child
   * takes no message, steer or close (only its parent's tools message it).
   */
  const drivable = (
    principal: Principal,
    sessionId: SessionId,
    action: ChildControlForbidden["action"]
  ): Effect.Effect<void, Lookup | ChildControlForbidden> => {
    const refuse = (parentId: SessionId | null) =>
      parentId === null ? Effect.void : Effect.fail(new ChildControlForbidden({ sessionId, parentId, action }))
    const known = tenants.get(sessionId)
    // Seen before (its tenancy and parent never change): decided here, with no store read and no further step.
    if (known !== undefined) {
      return known.tenant === tenantOf(principal) ? refuse(known.parentId) : Effect.fail(new SessionNotFound({ sessionId }))
    }
    return Effect.flatMap(owned(principal, sessionId), (session) => refuse(session.parentId))
  }

  /**
   * Puts live events of a session in log order after a cursor: events already
   * seen are dropped, and a gap (the live buffer dropped events) is filled from
   * the log, so followers see every durable event once.
   */
  const makeFollower = (sessionId: SessionId, after: number) => {
    let last = after
    const backfill = (upTo: number) =>
      Effect.gen(function*() {
        const out: Array<SessionEvent> = []
        while (last < upTo) {
          const page = yield* store.readLog(sessionId, { after: last, limit: 1000 })
          for (const record of page.records) out.push(Durable.fromRecord(record))
          last = page.cursor
          if (!page.more) break
        }
        return out
      })
    return {
      /** The cursor of the last durable event delivered. */
      cursor: () => last,
      /** Records that the log was read up to `cursor` by other means. */
      advance: (cursor: number) => {
        last = cursor
      },
      /** Every durable event after the last delivered, read from the log up to its head. */
      catchUp: backfill(Number.MAX_SAFE_INTEGER),
      /** The events a live event stands for, in order (possibly none, possibly several). */
      admit: (event: SessionEvent): Effect.Effect<ReadonlyArray<SessionEvent>, StoreUnavailable> => {
        if (event._tag === "assistant_delta") return Effect.succeed([event])
        if (event.cursor <= last) return Effect.succeed([])
        if (event.cursor === last + 1) {
          last = event.cursor
          return Effect.succeed([event])
        }
        return backfill(event.cursor)
      }
    }
  }

  /** Reads the log after `after` for the end of `turnId`; returns it or the cursor reached. */
  /** The end of `turnId` after `after`, if the log has it; and whether the part read shows the turn start. */
  const scanForEnd = (sessionId: SessionId, turnId: TurnId, after: number) =>
    Effect.gen(function*() {
      let cursor = after
      let started = false
      for (;;) {
        const page = yield* store.readLog(sessionId, { after: cursor, limit: 500 })
        for (const record of page.records) {
          if (record.body._tag === "turn_started" && record.body.turnId === turnId) started = true
          if (record.body._tag === "turn_ended" && record.body.turnId === turnId) {
            return { ended: Option.some(record.body), cursor: record.seq, started }
          }
        }
        cursor = page.cursor
        if (!page.more) return { ended: Option.none<TurnEnded>(), cursor, started }
      }
    })

  /**
   * Waits for the `turn_ended` record of `turnId`, looking after cursor `after`.
   * Turn ids are minted when a turn starts, so a turn that is neither in the
   * log nor running does not exist: `TurnNotFound`, rather than waiting forever.
   */
  const findTurnEnd = (sessionId: SessionId, turnId: TurnId, after: number): Effect.Effect<TurnEnded, Lookup | TurnNotFound> =>
    Effect.suspend(() => {
      // Just ended by the actor here (a fast turn ends before its sender asks): at once.
      const ended = host.endedHere(sessionId, turnId)
      if (ended !== undefined) return Effect.succeed(ended)
      // Interest first, then the log: an end before the read is in the log, an end after it is announced.
      return interested(host.turnEnded(sessionId, turnId), (announced) =>
        // Running here: its end is announced, or its actor stops first and the end is in the log.
        announced.runningHere
          ? announcedOrInLog(announced, sessionId, turnId, after)
          : notRunningHere(announced, sessionId, turnId, after))
    })

  /** `findTurnEnd` for a turn no actor here runs: in the log, or run by another process (or about to be, here). */
  const notRunningHere = (announced: TurnInterest, sessionId: SessionId, turnId: TurnId, after: number) =>
    Effect.gen(function*() {
      const first = yield* scanForEnd(sessionId, turnId, after)
      if (Option.isSome(first.ended)) return first.ended.value
      // Started and not ended in the log: active. Else the session row says whether it runs.
      if (!first.started && (yield* store.get(sessionId)).activeTurnId !== turnId) {
        // It may have ended between the scan and the read.
        const again = yield* scanForEnd(sessionId, turnId, first.cursor)
        if (Option.isSome(again.ended)) return again.ended.value
        return yield* new TurnNotFound({ sessionId, turnId })
      }
      if (yield* host.drives(sessionId)) return yield* announcedOrInLog(announced, sessionId, turnId, first.cursor)
      // Another process runs the turn: found in the log, unless an actor here takes it over and announces it.
      const announcedHere = Effect.flatMap(announced.await, Option.match({ onNone: () => Effect.never, onSome: Effect.succeed }))
      return yield* Effect.raceFirst(announcedHere, endElsewhere(sessionId, turnId, first.cursor))
    })

  /**
   * The end of a turn the actor here drives, as it announces it; should that actor stop first
   * (its lease lost, the session handed over), as whoever goes on with the turn commits it.
   */
  const announcedOrInLog = (announced: TurnInterest, sessionId: SessionId, turnId: TurnId, after: number) =>
    Effect.flatMap(
      announced.await,
      Option.match({ onSome: Effect.succeed, onNone: () => endElsewhere(sessionId, turnId, after) })
    )

  /** Follows the log for the end of `turnId` after `after`: a turn another process runs. */
  const endElsewhere = (sessionId: SessionId, turnId: TurnId, after: number) =>
    untilInLog(sessionId, after, (record) =>
      record.body._tag === "turn_ended" && record.body.turnId === turnId ? Effect.succeed(record.body) : undefined
    ).pipe(Effect.orDie)

  /** The session's events after `options.after`, subscribed to (here and elsewhere) when this runs. */
  const subscribe = (
    principal: Principal,
    sessionId: SessionId,
    options: EventOptions & { readonly liveOnly?: boolean | undefined } = {}
  ) =>
    Effect.gen(function*() {
      yield* authorize(principal, sessionId)
      // Subscribe before reading the log, so nothing published meanwhile is missed: here, and by other processes.
      const live = yield* host.live(sessionId)
      // Deltas from other processes only for a follower that shows them (on SQLite the writer pays for each one).
      const changes = yield* signals.watch(sessionId, { deltas: options.volatile === true && options.follow !== false })
      const follower = makeFollower(sessionId, options.after ?? 0)
      const replay = Stream.paginateChunkEffect(undefined, () =>
        Effect.map(store.readLog(sessionId, { after: follower.cursor(), limit: 500 }), (page) => {
          follower.advance(page.cursor)
          return [
            Chunk.unsafeFromArray<SessionEvent>(page.records.map(Durable.fromRecord)),
            page.more ? Option.some(undefined) : Option.none()
          ] as const
        }))
      if (options.follow === false) return replay
      // Another process's commits arrive as signals (and, should one be lost, as the backstop's tick):
      // the log is read up to them, through the same follower, so nothing is missed or doubled.
      const elsewhere = signals.shared
        ? Stream.merge(Stream.fromQueue(changes), Stream.map(Stream.fromSchedule(Schedule.spaced(eventsBackstop)), () => missed))
        : Stream.empty
      const follow = Stream.merge(Stream.fromQueue(live), elsewhere).pipe(
        Stream.mapEffect((item): Effect.Effect<ReadonlyArray<SessionEvent>, StoreUnavailable> => {
          switch (item._tag) {
            case "assistant_delta":
              return options.volatile ? follower.admit(item) : Effect.succeed([])
            case "durable":
              return follower.admit(item)
            case "Deltas":
              return Effect.succeed(options.volatile ? item.events : [])
            case "Log":
              return item.seq > follower.cursor() ? follower.catchUp : Effect.succeed([])
            case "Missed":
              return follower.catchUp
            case "Inbox":
              return Effect.succeed([])
          }
        }),
        Stream.flattenIterables
      )
      // Live only (a prompt's stream, subscribed before its send): deltas stay in order with the records,
      // and a record missed live is read from the log by the follower, as a gap.
      return options.liveOnly === true ? follow : Stream.concat(replay, follow)
    })

  const events = (principal: Principal, sessionId: SessionId, options: EventOptions = {}) =>
    Stream.unwrapScoped(subscribe(principal, sessionId, options))

  const resultOf = (
    sessionId: SessionId,
    ended: TurnEnded
  ): Effect.Effect<TurnResult, TurnFailed | TurnInterrupted | BudgetExhausted> => {
    switch (ended.outcome) {
      case "completed":
        return Effect.succeed(
          Trusted.make(TurnResult, {
            sessionId,
            turnId: ended.turnId,
            output: ended.output ?? "",
            publicFinalMessage: ended.publicFinalMessage ?? ended.output ?? "",
            usage: ended.usage
          })
        )
      case "failed": {
        const failure = ended.failure
        if (ended.failureCode === "budget_exhausted" && failure?._tag === "BudgetExhausted") {
          const { _tag, ...fields } = failure
          return Effect.fail(new BudgetExhausted({ ...fields, sessionId, turnId: ended.turnId }))
        }
        return Effect.fail(
          new TurnFailed({
            sessionId,
            turnId: ended.turnId,
            failureCode: ended.failureCode ?? "internal",
            failure: ended.failure,
            usage: ended.usage
          })
        )
      }
      case "interrupted":
        return Effect.fail(new TurnInterrupted({ sessionId, turnId: ended.turnId, reason: ended.reason }))
    }
  }

  const control = (principal: Principal, sessionId: SessionId, action: Control["action"]) =>
    Effect.gen(function*() {
      yield* open(principal, sessionId)
      const inputId = yield* makeInputId
      yield* submitMinted(sessionId, new Control({ inputId, action }, true))
      return yield* store.get(sessionId)
    })

  const awaitTurn: Sessions["Type"]["awaitTurn"] = (principal, sessionId, turnId, options = {}) => {
    const endAfter = (after: number) =>
      Effect.flatMap(findTurnEnd(sessionId, turnId, after), (ended) => resultOf(sessionId, ended))
    const after = options.after
    if (after === undefined) {
      // A running turn's end is still ahead of the head; otherwise it is somewhere in the log.
      return Effect.flatMap(owned(principal, sessionId), (session) => endAfter(session.activeTurnId === turnId ? session.headSeq : 0))
    }
    return tenants.get(sessionId)?.tenant === tenantOf(principal)
      ? endAfter(after)
      : Effect.flatMap(authorize(principal, sessionId), () => endAfter(after))
  }

  const api: Omit<Service, "as" | "prompt" | "promptStream"> = {
    create: (principal, options) =>
      Effect.flatMap(makeSessionId, (sessionId) => {
        const created = options.toolsets === undefined || options.toolsets.length === 0
          ? store.create({ ...options, principal, sessionId })
          : Effect.flatMap(toolsets.bind(principal, options.toolsets), (bound) =>
            store.create({ ...options, agent: bindTo(options.agent, bound), principal, sessionId }))
        return Effect.flatMap(created, (session) => {
          remember(session)
          // Only a session the store has persisted is a started one; a replay (another id) started before.
          return session.id === sessionId
            ? Effect.as(telemetry.emit(ProductEvent.sessionStarted(session.parentId === null ? "root" : "child")), session)
            : Effect.succeed(session)
        })
      }).pipe(
        // One handler for both (a step fewer than `catchTag` then `tapError`).
        Effect.catchAll((error) =>
          error._tag === "SessionNotFound"
            ? Effect.die(error)
            : Effect.zipRight(telemetry.emit(ProductEvent.failure("session.failed", ProductEvent.categoryOf(error))), Effect.fail(error))
        )
      ),
    get: owned,
    list: (principal, options = {}) =>
      store.list({
        principal,
        scope: options.scope ?? "roots",
        includeArchived: options.includeArchived,
        cursor: options.cursor,
        limit: options.limit
      }),
    send: (principal, sessionId, options) =>
      Effect.gen(function*() {
        // A closed session refuses the push itself (SessionClosed), so only ownership (and the tree) is checked here.
        yield* drivable(principal, sessionId, options.mode === "steer" ? "steer" : "message")
        const inputId = yield* (options.inputId === undefined ? makeInputId : decodeInputId(options.inputId))
        const command = options.mode === "steer"
          ? new Steer({ inputId, text: options.text, source: options.source }, true)
          : yield* messageOf(inputId, options)
        // An idle actor here may take a message in memory and record it with its turn's start, in one commit.
        const offered = command._tag === "message" ? yield* host.offer(sessionId, command) : Option.none<Decision>()
        return acceptedOf(sessionId, inputId, Option.isSome(offered) ? offered : yield* submit(sessionId, command))
      }),
    awaitTurn,
    awaitOutput: (principal, sessionId, turnId, schema, options) =>
      Effect.flatMap(awaitTurn(principal, sessionId, turnId, options), (result) =>
        Effect.try({ try: () => JSON.parse(result.output) as unknown, catch: (error) => String(error) }).pipe(
          Effect.flatMap((json) => Effect.mapError(Schema.decodeUnknown(schema)(json), (error) => error.message)),
          Effect.mapError((reason) => new InvalidOutput({ sessionId, turnId, reason }))
        )),
    interrupt: (principal, sessionId, expectedTurnId, reason) =>
      Effect.gen(function*() {
        yield* open(principal, sessionId)
        const inputId = yield* makeInputId
        const decision = yield* submitMinted(sessionId, new Interrupt({ inputId, expectedTurnId, reason }, true))
        if (Option.isSome(decision) && decision.value._tag === "Interrupted") {
          return new InterruptOutcome({ sessionId, turnId: decision.value.turnId, outcome: decision.value.outcome }, true)
        }
        return new InterruptOutcome({ sessionId, turnId: expectedTurnId, outcome: "requested" }, true)
      }),
    // Metadata only, straight through the store: no lease, no record, any status (decision 0008).
    rename: (principal, sessionId, title) => store.updateMetadata(principal, sessionId, { title }),
    archive: (principal, sessionId, archived) => store.updateMetadata(principal, sessionId, { archived }),
    close: (principal, sessionId) =>
      Effect.zipRight(drivable(principal, sessionId, "close"), control(principal, sessionId, { _tag: "close" })),
    children: (principal, sessionId, page) => store.children(principal, sessionId, page),
    tree: (principal, sessionId, options) => store.tree(principal, sessionId, options),
    snapshot: (principal, sessionId) =>
      Effect.gen(function*() {
        const session = yield* owned(principal, sessionId)
        const pending = yield* store.readInbox(sessionId)
        const callbacks = yield* store.openCallbacks(sessionId)
        return new Snapshot({
          session,
          cursor: session.headSeq,
          pendingInputs: pending.length,
          openCallbacks: callbacks.length
        }, true)
      }),
    events,
    callbacks: (principal, sessionId) =>
      Effect.gen(function*() {
        yield* authorize(principal, sessionId)
        const open = yield* store.openCallbacks(sessionId)
        return yield* Effect.forEach(open, broker.describe)
      }),
    answerCallback: (principal, sessionId, answer) =>
      Effect.gen(function*() {
        yield* open(principal, sessionId)
        const command = yield* prepareAnswer(sessionId, answer.callbackId, answer.result, answer).pipe(
          Effect.provideService(SessionStore, store)
        )
        // The store admits one answer per callback: a second one is StaleCallback here, at once.
        yield* admitted(sessionId, command.inputId, "callback_answer", () => store.admitAnswer(sessionId, command)).pipe(
          Effect.catchTag("Conflict", Effect.die)
        )
      }),
    provideCallbacks: (principal, sessionId, kinds, handler) =>
      Effect.zipRight(authorize(principal, sessionId), broker.provide(sessionId, kinds, handler))
  }
  const prompts = Prompt.make({ get: owned, send: api.send, subscribe, awaitTurn, resultOf })
  const service: Omit<Service, "as"> = { ...api, ...prompts }
  return Sessions.of({ ...service, as: (principal) => scoped(service, principal) })
})

/** The API over a store and a host. */
export const layer: Layer.Layer<
  Sessions,
  never,
  SessionStore | SessionHost | CallbackBroker | Telemetry.Telemetry | StoreSignals | Toolsets
> = Layer.effect(
  Sessions,
  make
)

