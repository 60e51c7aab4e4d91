/**
 * The tools a parent's model gets to build and drive a tree of sessions
 * (DESIGN §7): `agents.list_configs`, `agents.spawn`, `agents.list`,
 * `agents.send_message`, `agents.interrupt` and `agents.wait`. They are
 * offered only to a session whose subagent policy allows spawning.
 *
 * A spawn is one store transaction with the parent's records: the child, its
 * first message, the parent's `child_spawned` record and the tool call's start
 * and receipt, so a crash leaves all or none of them. The other tools are
 * reads, or admissions under an id derived from their operation, so running
 * them again after a crash is harmless (they declare idempotency `supported`).
 * A refusal of the policy reaches the model as a retryable tool error naming
 * the limit.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Agent, ToolSpec } from "../schema/Agent.js"
import type { Conflict, SpawnRefused } from "../schema/Errors.js"
import { type InputId, makeInputId, makeSessionId, type OperationId, type SessionId, TurnId } from "../schema/Ids.js"
import { Interrupt, Message } from "../schema/Inbox.js"
import type { ChildResultView, SpawnOutput, WaitOutput } from "../schema/Operation.js"
import { type ChildResultRecorded, ChildrenAwaited, type RecordBody } from "../schema/Record.js"
import type { RunOptions } from "../schema/Run.js"
import type { Session } from "../schema/Session.js"
import * as ProductEvent from "../schema/ProductEvent.js"
import type { AgentCatalog } from "../services/AgentCatalog.js"
import type * as Model from "../services/Model.js"
import type { Expectation, Refusals } from "../services/SessionHost.js"
import type { SessionStore, SpawnChild, Spawned } from "../services/SessionStore.js"
import type * as Telemetry from "../services/Telemetry.js"
import { errorOutcome, type ToolOutcome } from "../services/Tool.js"
import type { Runnable } from "../services/Toolkit.js"
import * as SessionState from "./SessionState.js"

/** The tool names. */
export const LIST_CONFIGS = "agents.list_configs"
export const SPAWN = "agents.spawn"
export const LIST = "agents.list"
export const SEND_MESSAGE = "agents.send_message"
export const INTERRUPT = "agents.interrupt"
export const WAIT = SessionState.WAIT_TOOL

const tool = (name: string, description: string, properties: Record<string, unknown>, required: ReadonlyArray<string>) =>
  new ToolSpec({
    name,
    description,
    parameters: { type: "object", properties, required, additionalProperties: false },
    sideEffect: name === LIST_CONFIGS || name === LIST || name === WAIT ? "read" : "write",
    idempotency: "supported",
    client: false
  })

const specs: ReadonlyArray<ToolSpec> = [
  tool(LIST_CONFIGS, "Lists the agents you may spawn as subagents, with what each is for.", {}, []),
  tool(SPAWN, "Spawns a subagent: a child session of the named agent, started with your message. Returns its session id and alias.", {
    agent: { type: "string", description: "The agent to spawn (see agents.list_configs)." },
    message: { type: "string", description: "The child's first message: its task." },
    title: { type: "string", description: "A short title for the child session." }
  }, ["agent", "message"]),
  tool(LIST, "Lists your subagents: id, alias, agent, status and last result.", {}, []),
  tool(SEND_MESSAGE, "Sends a subagent a message, which starts a new turn of it.", {
    session: { type: "string", description: "The subagent's session id or alias." },
    message: { type: "string", description: "The message." }
  }, ["session", "message"]),
  tool(INTERRUPT, "Interrupts exactly one turn of a subagent and waits for it to end; the subagent stays open.", {
    session: { type: "string", description: "The subagent's session id or alias." },
    turnId: { type: "string", description: "The turn to interrupt." },
    reason: { type: "string", description: "Why, for the record." }
  }, ["session", "turnId"]),
  tool(WAIT, "Waits until a result of your subagents arrives (of those named, or any), and returns the results.", {
    sessions: { type: "array", items: { type: "string" }, description: "Session ids or aliases to wait for; any if omitted." },
    timeoutMs: { type: "integer", minimum: 0, description: "How long to wait at most (default 300000)." }
  }, [])
]

/** The agents `session` may spawn, with their descriptions: its policy's `allowedAgents`, else its agent's subagents. */
export const spawnable = (session: Session): ReadonlyArray<{ readonly agent: string; readonly description: string }> => {
  const policy = session.subagentPolicy
  if (policy === null) return []
  const declared = new Map(session.agent.subagents.map((ref) => [ref.name, ref.description]))
  const names = policy.allowedAgents ?? [...declared.keys()]
  return names.map((agent) => ({ agent, description: declared.get(agent) ?? "" }))
}

/** The tools offered to `session`: none unless its policy allows it to spawn some agent. */
export const specsFor = (session: Session): ReadonlyArray<ToolSpec> => (spawnable(session).length > 0 ? specs : [])

/** What the tools run on, given by the actor for one turn. */
export interface Env {
  readonly session: Session
  readonly turnId: TurnId
  readonly state: () => SessionState.SessionState
  readonly store: SessionStore["Type"]
  readonly catalog: AgentCatalog["Type"]
  readonly telemetry: Telemetry.Telemetry["Type"]
  /** Wakes a session's actor (the child a message or interrupt went to). */
  readonly wake: (sessionId: SessionId) => Effect.Effect<void>
  /** Registers interest in the decision on an input, before it is pushed. */
  readonly expect: <K extends keyof Refusals>(sessionId: SessionId, inputId: InputId, kind: K) => Effect.Effect<Expectation<K>>
  /** The actor's spawn: `records` (the tool call's start and receipt) commit with the child. */
  readonly commitSpawn: (
    spawn: Omit<SpawnChild, "principal" | "commit">,
    records: ReadonlyArray<RecordBody>
  ) => Effect.Effect<Spawned, SpawnRefused | Conflict>
  /** The actor's write path for this turn's records (`agents.wait` marks the turn parked there and back). */
  readonly commit: (records: ReadonlyArray<RecordBody>) => Effect.Effect<void>
  /** Parks the turn (its busy slot goes to others) until a child result may have arrived. */
  readonly awaitResult: Effect.Effect<void>
  /** Why the actor interrupted this turn, once it did (an agent tool's child is interrupted for the same reason). */
  readonly interruptReason?: (() => string | undefined) | undefined
  /**
   * The run options of the messages sent to children: the parent turn's permission layers bind them
   * (`ToolPolicy.childRun`). A function, not a getter: a getter in the object literal that makes the
   * env (once per turn) takes V8's slow path for the whole object.
   */
  readonly childRun?: (() => RunOptions | undefined) | undefined
}

const SpawnArgs = Schema.Struct({ agent: Schema.String, message: Schema.String, title: Schema.optional(Schema.String) })
const SendArgs = Schema.Struct({ session: Schema.String, message: Schema.String })
const InterruptArgs = Schema.Struct({ session: Schema.String, turnId: TurnId, reason: Schema.optional(Schema.String) })
const WaitArgs = Schema.Struct({
  sessions: Schema.optional(Schema.Array(Schema.String)),
  timeoutMs: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 86_400_000)))
})

/** A tool call's argument text decoded with `schema`; what does not decode is the tool error the model sees. */
export const args = <A, I>(schema: Schema.Schema<A, I>, text: string): Effect.Effect<A, ToolOutcome> =>
  Effect.try(() => JSON.parse(text) as unknown).pipe(
    Effect.flatMap(Schema.decodeUnknown(schema)),
    Effect.mapError((error) => errorOutcome(`invalid arguments: ${error instanceof Error ? error.message : String(error)}`))
  )

/** A refusal of the tree's policy, as the model reads it: retryable, naming the limit. */
export const refusalOutcome = (refusal: SpawnRefused): ToolOutcome => ({
  output: {
    error: `the subagent policy refuses this: ${refusal.reason}${refusal.limit === undefined ? "" : ` (limit ${refusal.limit})`}`,
    limit: refusal.reason,
    retryable: true
  },
  isError: true
})

const resultView = (result: ChildResultRecorded, alias: string | null): ChildResultView => ({
  sessionId: result.childSessionId,
  alias,
  turnId: result.turnId,
  outcome: result.outcome,
  ...(result.output === undefined ? {} : { output: result.output }),
  ...(result.failureCode === undefined ? {} : { failureCode: result.failureCode }),
  ...(result.reason === undefined ? {} : { reason: result.reason })
})

const ok = (output: unknown): ToolOutcome => ({ output, isError: false })

/** A tool that runs within the turn: every one but `agents.spawn`. */
type Run = (env: Env, call: Model.ToolCall, operationId: OperationId) => Effect.Effect<ToolOutcome>

/** `env.session`'s child by id or alias; an unknown one is the tool error the model sees. */
const childOf = (env: Env, idOrAlias: string) =>
  env.store.findChild(env.session.principal, env.session.id, idOrAlias).pipe(
    Effect.mapError((error) =>
      error._tag === "SessionNotFound" ? errorOutcome(`you have no subagent ${idOrAlias}`) : errorOutcome(error.message)
    )
  )

const refused = (env: Env, refusal: SpawnRefused) =>
  Effect.as(env.telemetry.emit(ProductEvent.subagentRefused(refusal.reason)), refusalOutcome(refusal))

/** Sends `command` to a child and waits for its actor's decision (at most 30 s, else it is just admitted). */
const submit = <K extends "message" | "interrupt">(
  env: Env,
  childId: SessionId,
  inputId: InputId,
  kind: K,
  push: Effect.Effect<unknown, ToolOutcome>
) =>
  Effect.acquireUseRelease(
    env.expect(childId, inputId, kind),
    (decision) =>
      Effect.zipRight(
        Effect.zipRight(push, env.wake(childId)),
        decision.await.pipe(Effect.timeoutOption(Duration.seconds(30)), Effect.either)
      ),
    (decision) => Effect.sync(() => decision.withdraw())
  )

/** `agents.list_configs`: the agents this session may spawn. */
const listConfigs: Run = (env) => Effect.succeed(ok({ agents: spawnable(env.session) }))

/** `agents.list`: this session's children, each with its last result. */
const list: Run = (env) =>
  Effect.gen(function*() {
    const page = yield* env.store.children(env.session.principal, env.session.id, { limit: 500 })
    const known = env.state().children
    return ok({
      children: page.items.map((item) => {
        const last = HashMap.get(known, item.session.id).pipe(Option.flatMap((entry) => Option.fromNullable(entry.last)))
        return {
          sessionId: item.session.id,
          alias: item.alias,
          agent: item.agent,
          status: item.session.status,
          ...(Option.isSome(last) ? { lastResult: resultView(last.value, item.alias) } : {})
        }
      })
    })
  }).pipe(Effect.catchAll((error) => Effect.succeed(errorOutcome(error.message))))

/** `agents.send_message`: a message to a child, which starts (or queues) a turn of it. */
const sendMessage: Run = (env, call, operationId) =>
  Effect.gen(function*() {
    const { session } = env
    const { message, session: target } = yield* args(SendArgs, call.arguments)
    const found = yield* childOf(env, target)
    // One admission per tool call, whoever runs it again.
    const inputId = `send:${operationId}` as InputId
    const decided = yield* submit(env, found.id, inputId, "message", env.store.admitChildTurn({
      principal: session.principal,
      parentId: session.id,
      childId: found.id,
      message: new Message({ inputId, text: message, run: env.childRun?.() }, true)
    }).pipe(Effect.mapError((error) => error._tag === "SpawnRefused" ? refusalOutcome(error) : errorOutcome(error.message))))
    if (decided._tag === "Left") return ok({ sessionId: found.id, busy: true })
    const decision = Option.getOrUndefined(decided.right)
    return ok({
      sessionId: found.id,
      ...(decision?._tag === "Started" ? { turnId: decision.turnId } : { queued: decision?._tag === "Queued" })
    })
  }).pipe(Effect.catchAll((outcome) => Effect.succeed(outcome)))

/** `agents.interrupt`: one turn of a child, waited for until it ends. */
const interrupt: Run = (env, call, operationId) =>
  Effect.gen(function*() {
    const { reason, session: target, turnId } = yield* args(InterruptArgs, call.arguments)
    const found = yield* childOf(env, target)
    const inputId = `interrupt:${operationId}` as InputId
    const decided = yield* submit(env, found.id, inputId, "interrupt", env.store.push(
      found.id,
      new Interrupt({ inputId, expectedTurnId: turnId, reason }, true)
    ).pipe(Effect.mapError((error) => errorOutcome(error.message))))
    if (decided._tag === "Left") return errorOutcome(`turn_mismatch: the running turn of ${target} is ${decided.left.activeTurnId ?? "none"}`)
    const decision = Option.getOrUndefined(decided.right)
    return ok({ outcome: decision?._tag === "Interrupted" ? decision.outcome : "requested" })
  }).pipe(Effect.catchAll((outcome) => Effect.succeed(outcome)))

/**
 * Marks the turn parked in `agents.wait` around an effect, so the session shows
 * `waiting` meanwhile: the first call to wait marks it (unless the log says it
 * is already, as a resumed turn may find it), the last to return clears it, one
 * at a time. Not cleared when interrupted: the actor's interrupt records clear
 * it, and a stopping host leaves it for the turn resumed elsewhere.
 */
const parking = (env: Env) => {
  let parked = env.state().active?.waitParked === true
  let waiting = 0
  const marking = Effect.unsafeMakeSemaphore(1)
  const mark = (to: boolean) => env.commit([new ChildrenAwaited({ turnId: env.turnId, parked: to }, true)])
  const park = marking.withPermits(1)(Effect.suspend(() => {
    waiting++
    if (parked) return Effect.void
    parked = true
    return mark(true)
  }))
  const unpark = marking.withPermits(1)(Effect.suspend(() => {
    waiting--
    if (waiting > 0 || !parked) return Effect.void
    parked = false
    return mark(false)
  }))
  return <A>(effect: Effect.Effect<A>) => Effect.zipRight(park, Effect.tap(effect, () => unpark))
}

/** `agents.wait`: the children's results that arrived (of those named, or any), parking the turn until one does. */
const waitParked = (parkedIn: ReturnType<typeof parking>): Run => (env, call) =>
  Effect.gen(function*() {
    const { sessions, timeoutMs } = yield* args(WaitArgs, call.arguments)
    const state = env.state()
    const wanted = sessions === undefined ? undefined : new Set<string>()
    for (const name of sessions ?? []) {
      const byName = [...HashMap.values(state.children)].find((c) => c.childSessionId === name || c.alias === name)
      if (byName === undefined) return errorOutcome(`you have no subagent ${name}`)
      wanted!.add(byName.childSessionId)
    }
    const arrived = () =>
      (env.state().active?.results ?? []).filter((result) => wanted === undefined || wanted.has(result.childSessionId))
    const waitForOne = Effect.gen(function*() {
      while (arrived().length === 0) yield* env.awaitResult
    })
    const timedOut = arrived().length > 0
      ? false
      : Option.isNone(yield* parkedIn(Effect.timeoutOption(waitForOne, Duration.millis(timeoutMs ?? 300_000))))
    const aliases = env.state().children
    return ok({
      results: arrived().map((result) =>
        resultView(result, HashMap.get(aliases, result.childSessionId).pipe(Option.map((c) => c.alias), Option.getOrNull))
      ),
      ...(timedOut ? { timedOut: true } : {})
    } satisfies WaitOutput)
  }).pipe(Effect.catchAll((outcome) => Effect.succeed(outcome)))

/**
 * `agents.spawn`: the child and the call's records in one commit. On a
 * refusal nothing was written, and the records go back to wait for the next
 * commit.
 */
const spawn = (
  env: Env,
  call: Model.ToolCall,
  operationId: OperationId,
  records: (outcome: ToolOutcome) => ReadonlyArray<RecordBody>
): Effect.Effect<{ readonly outcome: ToolOutcome; readonly written: boolean }> =>
  Effect.gen(function*() {
    const { session } = env
    const parsed = yield* args(SpawnArgs, call.arguments)
    const name = parsed.agent
    const definition = env.catalog.get(name)
    if (Option.isNone(definition)) return { outcome: errorOutcome(`no agent named ${name} is known to this host`), written: false }
    // A child inherits its parent's client tools, unless its own agent defines a tool of that name.
    const own = new Set(definition.value.tools.map((t) => t.name))
    const inherited = session.agent.tools.filter((t) => t.client && !own.has(t.name))
    const agent = inherited.length === 0
      ? definition.value
      : new Agent({ ...definition.value, tools: [...definition.value.tools, ...inherited] }, true)
    const sessionId = yield* makeSessionId
    const alias = `${name}-${HashMap.size(env.state().children) + 1}`
    const outcome = ok({ sessionId, alias } satisfies SpawnOutput)
    const spawned = yield* env.commitSpawn({
      agent,
      message: new Message({ inputId: yield* makeInputId, text: parsed.message, run: env.childRun?.() }, true),
      sessionId,
      alias,
      title: parsed.title,
      turnId: env.turnId,
      operationId
    }, records(outcome)).pipe(Effect.either)
    if (spawned._tag === "Left") {
      const error = spawned.left
      return { outcome: error._tag === "SpawnRefused" ? yield* refused(env, error) : errorOutcome(error.message), written: false }
    }
    yield* env.telemetry.emit(ProductEvent.sessionStarted("child"))
    yield* env.wake(sessionId)
    return { outcome, written: true }
  }).pipe(Effect.catchAll((outcome) => Effect.succeed({ outcome, written: false })))

const runnables = new Map<string, Run>([
  [LIST_CONFIGS, listConfigs],
  [LIST, list],
  [SEND_MESSAGE, sendMessage],
  [INTERRUPT, interrupt]
])

/** The tools of one turn of `env.session`. */
export const make = (env: Env) => {
  // `agents.wait` keeps, for the turn, how many of its calls wait (the parked mark).
  const wait = waitParked(parking(env))
  return {
    /** Spawns: the child and the call's records (`records` of the outcome) in one commit. */
    spawn: (call: Model.ToolCall, operationId: OperationId, records: (outcome: ToolOutcome) => ReadonlyArray<RecordBody>) =>
      spawn(env, call, operationId, records),
    /** The runnable tool of that name (every one but `agents.spawn`), when this session is offered them. */
    get: (name: string, call: Model.ToolCall, operationId: OperationId): Runnable | undefined => {
      const run = name === WAIT ? wait : runnables.get(name)
      const spec = specs.find((s) => s.name === name)
      return run === undefined || spec === undefined ? undefined : { spec, run: () => run(env, call, operationId) }
    }
  }
}

/** The tools of one turn. */
export type SubagentTools = ReturnType<typeof make>
