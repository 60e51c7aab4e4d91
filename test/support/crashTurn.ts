/**
 * Run as a child process by test/CrashSafety.test.ts: one turn of an agent
 * with one server tool, on a SQLite file, that a parent kills with SIGKILL at
 * a chosen point and resumes in a fresh process.
 *
 *   crashTurn.ts FILE start|resume CRASH_POINT IDEMPOTENCY DIR
 *
 * - `start` creates a session, sends a message and runs the turn until the
 *   crash point, where it prints `CRASH-POINT <point>` and hangs forever so
 *   the parent can kill it exactly there. (A turn that ends instead prints
 *   `NO-CRASH` and exits 3.)
 * - `resume` only runs a host: the recovery poll picks the session up once
 *   the dead owner's lease expires. It waits for the turn to end and prints
 *   `RESULT <json>` (outcome and the turn's records), then exits 0.
 *
 * Crash points: `model-1` (inside the first model call, before it returns),
 * `tool-body` (inside the tool handler, after its side effect), `model-2`
 * (inside the second model call, after the tool's receipt was committed),
 * `between-turns` (after the turn ended; the `resume` process then sends a
 * second message and runs its turn too, so its model call shows the
 * conversation the restarted actor rebuilt).
 *
 * Side effects are counted in files of DIR: `side-effects` (one line per run
 * of the tool's body) and `model-calls` (one JSON line per model call: its
 * number in the turn, the process, and the tool messages it was sent).
 */
import { Effect, Layer, Schema, Stream } from "effect"
import { appendFileSync, writeSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import { Agent, Idempotency, ModelRef } from "../../src/schema/Agent.js"
import { Principal } from "../../src/schema/Principal.js"
import { LogRecord } from "../../src/schema/Record.js"
import * as Model from "../../src/services/Model.js"
import { Sessions } from "../../src/services/Sessions.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import * as Tool from "../../src/services/Tool.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Troupe from "../../src/Troupe.js"

/** Where a `start` process stops for good. */
export const CrashPoint = Schema.Literal("model-1", "tool-body", "model-2", "between-turns")
/** @since 0.1.0 */
export type CrashPoint = typeof CrashPoint.Type

/** The line a `start` process prints when it reaches its crash point. */
export const marker = (point: CrashPoint) => `CRASH-POINT ${point}`

/** The prefix of the line a `resume` process prints its result on. */
export const RESULT = "RESULT "

/** The call id the model gives its one tool call. */
export const CALL_ID = "call_1"

/** The final text of the turn. */
export const FINAL = "all done"

/** One line of the model-calls file. */
export interface ModelCallLine {
  readonly call: number
  readonly pid: number
  readonly mode: "start" | "resume"
  /** The contents of the tool messages the model was sent. */
  readonly tools: ReadonlyArray<string>
  /** Every message the model was sent. */
  readonly messages: ReadonlyArray<Model.Message>
}

/** The second message the `resume` process sends after a `between-turns` crash. */
export const SECOND = "record again"

/** What a `resume` process prints. */
export interface ResumeResult {
  readonly outcome: "completed" | "failed" | "interrupted"
  readonly output?: string | undefined
  readonly error?: string | undefined
  /** The tags of the turn's records, in log order. */
  readonly tags: ReadonlyArray<string>
  /** The tool operation's records: started, completed (with output) and unknown. */
  readonly tool: ReadonlyArray<{ readonly tag: string; readonly output?: unknown; readonly isError?: boolean }>
  /** Every record of the log, encoded. */
  readonly records: ReadonlyArray<unknown>
}

const principal = new Principal({
  customerId: "00000000-0000-4000-8000-00000000c001",
  organizationId: "00000000-0000-4000-8000-00000000c002",
  workspaceId: "00000000-0000-4000-8000-00000000c003"
})

const main = () => {
  const [filename, mode, rawPoint, rawIdempotency, dir] = process.argv.slice(2)
  if (!filename || (mode !== "start" && mode !== "resume") || !rawPoint || !rawIdempotency || !dir) {
    console.error("usage: crashTurn FILE start|resume CRASH_POINT IDEMPOTENCY DIR")
    process.exit(2)
  }
  const point = Schema.decodeUnknownSync(CrashPoint)(rawPoint)
  const idempotency = Schema.decodeUnknownSync(Idempotency)(rawIdempotency)
  const sideEffects = join(dir, "side-effects")
  const modelCalls = join(dir, "model-calls")

  // Synchronous, so the parent sees the marker only after every file write before it.
  const say = (line: string) => writeSync(1, `${line}\n`)
  /** In the `start` process at `at`: tell the parent, then wait to be killed. */
  const crashHere = (at: CrashPoint) =>
    mode === "start" && point === at
      ? Effect.zipRight(Effect.sync(() => say(marker(at))), Effect.never)
      : Effect.void

  const tool = Tool.make({
    name: "record",
    description: "Records a note somewhere outside the runtime.",
    parameters: Schema.Struct({ note: Schema.String }),
    success: Schema.Struct({ recorded: Schema.String }),
    metadata: { sideEffect: "external", idempotency },
    handler: ({ note }) =>
      Effect.sync(() => appendFileSync(sideEffects, `${process.pid} ${note}\n`)).pipe(
        Effect.zipRight(crashHere("tool-body")),
        Effect.as({ recorded: note })
      )
  })

  // Replies depend on the request, not on a per-process position, so a resumed
  // process that reuses the first reply gets the second one from its first call.
  const scripted = ScriptedModel.make({
    fallback: (request) =>
      request.messages.some((m) => m.role === "tool")
        ? FINAL
        : { text: "", toolCalls: [{ id: CALL_ID, name: tool.name, arguments: JSON.stringify({ note: "hello" }) }] }
  })
  const model = Layer.effect(
    Model.Model,
    Effect.map(scripted, (inner) =>
      Model.Model.of({
        stream: (request) =>
          Stream.unwrap(Effect.sync(() => {
            const call = 1 + request.messages.filter((m) => m.role === "assistant").length
            const tools = request.messages.flatMap((m) => (m.role === "tool" ? [m.content] : []))
            const line: ModelCallLine = { call, pid: process.pid, mode, tools, messages: request.messages }
            appendFileSync(modelCalls, `${JSON.stringify(line)}\n`)
            // The call is in flight: nothing of it has reached the turn yet.
            const hang = crashHere(call === 1 ? "model-1" : "model-2")
            return Stream.concat(Stream.drain(Stream.fromEffect(hang)), inner.stream(request))
          }))
      }))
  )

  const runtime = Troupe.layerSqlite({ filename }, {
    host: { leaseTtl: "1 second", pollInterval: "200 millis", owner: `crash-${mode}-${process.pid}` },
    tools: Toolkit.layer([tool]),
    model
  })

  const start = Effect.gen(function*() {
    const sessions = yield* Sessions
    const agent = new Agent({
      name: "crasher",
      instructions: "Record a note, then say you are done.",
      model: new ModelRef({ name: "scripted" }),
      tools: [tool.spec]
    })
    const session = yield* sessions.create(principal, { agent })
    const accepted = yield* sessions.send(principal, session.id, { text: "record hello" })
    // Reaching here means the crash point was never reached: the parent fails the test.
    const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!, { after: accepted.cursor! - 1 })
    yield* crashHere("between-turns")
    say(`NO-CRASH ${JSON.stringify(result.output)}`)
    return 3
  })

  const resume = Effect.gen(function*() {
    const sessions = yield* Sessions
    const store = yield* SessionStore
    const page = yield* sessions.list(principal)
    const session = page.items[0]
    if (session === undefined || page.items.length !== 1) return yield* Effect.dieMessage("expected one session")
    // The turn the killed process started is the first of the log.
    const before = yield* store.readLog(session.id, { limit: 10_000 })
    const started = before.records.find((r) => r.body._tag === "turn_started")
    if (started === undefined || started.body._tag !== "turn_started") {
      return yield* Effect.dieMessage("the killed process started no turn")
    }
    const turnId = started.body.turnId
    const ended = yield* sessions.awaitTurn(principal, session.id, turnId, { after: 0 }).pipe(
      Effect.map((r) => ({ outcome: "completed" as const, output: r.output })),
      Effect.catchTags({
        TurnFailed: (e) => Effect.succeed({ outcome: "failed" as const, error: `${e.failureCode} ${JSON.stringify(e.failure)}` }),
        TurnInterrupted: (e) => Effect.succeed({ outcome: "interrupted" as const, error: e.reason }),
        BudgetExhausted: (e) => Effect.succeed({ outcome: "failed" as const, error: e.dimension })
      })
    )
    if (point === "between-turns") {
      const second = yield* sessions.send(principal, session.id, { text: SECOND })
      yield* Effect.orDie(sessions.awaitTurn(principal, session.id, second.turnId!))
    }
    const log = yield* store.readLog(session.id, { limit: 10_000 })
    const mine = log.records.filter((r) => "turnId" in r.body && r.body.turnId === turnId)
    const toolOps = new Set<string>()
    for (const r of mine) {
      if (r.body._tag === "operation_started" && r.body.kind === "tool") toolOps.add(r.body.operationId)
    }
    const result: ResumeResult = {
      ...ended,
      tags: mine.map((r) => r.body._tag),
      tool: mine.flatMap((r): ResumeResult["tool"] => {
        const body = r.body
        if (!("operationId" in body) || body.operationId === undefined || !toolOps.has(body.operationId)) return []
        return body._tag === "operation_completed"
          ? [{ tag: body._tag, output: body.output, isError: body.isError }]
          : [{ tag: body._tag }]
      }),
      records: log.records.map((r) => Schema.encodeSync(LogRecord)(r))
    }
    say(`${RESULT}${JSON.stringify(result)}`)
    return 0
  })

  const body: Effect.Effect<number, unknown, Sessions | SessionStore> = mode === "start" ? start : resume
  const program = body.pipe(
    Effect.timeoutFail({ duration: "40 seconds", onTimeout: () => new Error(`${mode} timed out`) }),
    Effect.provide(runtime)
  )
  Effect.runPromise(program).then(
    (code) => process.exit(code),
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}

// Run only as a script: the test imports its names.
if (process.argv[1] === fileURLToPath(import.meta.url)) main()
