/**
 * The store by hand: one session driven through the embedded SQLite store. A session actor
 * normally does this (docs/sessions.md); here the program plays its part, to show what the store
 * keeps: admit a message, take the lease, commit a turn, let go, then print the session and its log.
 *
 *   npx tsx examples/store-by-hand.ts [--store :memory: | --store PATH | PATH]   (default $TROUPE_HOME/troupe.db)
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, Config, Console, Effect, Option } from "effect"
import { homedir } from "node:os"
import { parseArgs } from "node:util"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Usage } from "../src/schema/Budget.js"
import { makeCommitId, makeInputId, makeOperationId, makeTurnId } from "../src/schema/Ids.js"
import { Message } from "../src/schema/Inbox.js"
import { Commit } from "../src/schema/Lease.js"
import { Principal } from "../src/schema/Principal.js"
import { OperationCompleted, OperationStarted, type RecordBody, TurnEnded, TurnStarted } from "../src/schema/Record.js"
import { SessionStore } from "../src/services/SessionStore.js"

// Who acts (three distinct UUIDs: customer, organization, workspace) and the agent frozen into the session.
const uuid = (n: number) => `00000000-0000-4000-8000-00000000000${n}`
const principal = new Principal({ customerId: uuid(1), organizationId: uuid(2), workspaceId: uuid(3) })
const agent = new Agent({ name: "demo", instructions: "Answer briefly.", model: new ModelRef({ name: "canned" }) })

const program = Effect.gen(function*() {
  const store = yield* SessionStore
  const session = yield* store.create({ principal, agent, title: "Quick start" }) // its log starts at seq 1
  // 1. Admit a command into the inbox: durable before anyone acts on it, idempotent per inputId.
  const message = new Message({ inputId: yield* makeInputId, text: "What is troupe?" })
  yield* store.push(session.id, message)
  // 2. Take the lease (the right to write) for 30 s; acquireRelease gives it back even on failure.
  yield* Effect.scoped(Effect.gen(function*() {
    const lease = yield* Effect.acquireRelease(
      Effect.flatMap(store.acquire(session.id, "quickstart", 30_000), Option.match({
        onNone: () => Effect.fail(new Error("the lease is held elsewhere")),
        onSome: Effect.succeed
      })),
      (lease) => Effect.orDie(store.release(lease))
    )
    // 3. One atomic commit: the whole turn, fenced by the lease epoch and the head we last saw.
    const [turnId, operationId] = [yield* makeTurnId, yield* makeOperationId]
    const reply = "An actor runtime for AI-agent sessions." // canned: no model is called
    const usage = new Usage({ ...Usage.zero, modelCalls: 1 })
    yield* store.append(new Commit({
      commitId: yield* makeCommitId, sessionId: session.id, owner: lease.owner, epoch: lease.epoch,
      expectedHeadSeq: session.headSeq,
      consumes: [message.inputId], // the message leaves the inbox in the same transaction
      records: [
        new TurnStarted({ turnId, inputId: message.inputId, text: message.text }),
        new OperationStarted({ operationId, turnId, kind: "model", name: agent.model.name, input: { messages: 1, tools: 0 } }),
        new OperationCompleted({ operationId, turnId, output: { text: reply } }),
        new TurnEnded({ turnId, outcome: "completed", output: reply, usage })
      ]
    }))
  }))
  // 4. Read back the session row and its whole log (the records after cursor 0).
  const current = yield* store.get(session.id)
  yield* Console.log(`session ${current.id}  status=${current.status}  headSeq=${current.headSeq}\n`)
  yield* Console.log("seq  tag                  details")
  for (const r of (yield* store.readLog(session.id, { after: 0 })).records) {
    yield* Console.log(`${String(r.seq).padStart(3)}  ${r.body._tag.padEnd(19)}  ${details(r.body)}`)
  }
})

const details = (body: RecordBody): string => {
  switch (body._tag) {
    case "session_created": return `agent=${body.agentName} title=${JSON.stringify(body.title)}`
    case "turn_started": return `${body.turnId} input=${body.inputId} ${JSON.stringify(body.text)}`
    case "operation_started": return `${body.operationId} ${body.kind} ${body.name}`
    case "operation_completed": return `${body.operationId} output=${JSON.stringify(body.output)}`
    case "turn_ended": return `${body.turnId} ${body.outcome} modelCalls=${body.usage.modelCalls}`
    default: return JSON.stringify(body)
  }
}

/** `--store X`, a bare `X`, or `$TROUPE_HOME/troupe.db`; a file's directory is created if missing. */
const storeFile = Effect.gen(function*() {
  const [fs, path] = [yield* FileSystem.FileSystem, yield* Path.Path]
  const args = yield* Effect.try({
    try: () => parseArgs({ options: { store: { type: "string" } }, allowPositionals: true }),
    catch: (cause) => new Error("usage: quickstart.ts [--store :memory: | --store PATH | PATH]", { cause })
  })
  const home = yield* Config.string("TROUPE_HOME").pipe(Config.withDefault(path.join(homedir(), ".troupe")))
  const file = args.values.store ?? args.positionals[0] ?? path.join(home, "troupe.db")
  if (file !== ":memory:") yield* fs.makeDirectory(path.dirname(path.resolve(file)), { recursive: true })
  return file
})

// An error and its causes on one line, e.g. "store unavailable during connect: PgClient: Failed to connect: …".
const reason = (e: unknown): string => {
  const inner = e instanceof Error && e.cause !== undefined ? reason(e.cause) : ""
  return e instanceof Error ? (e.message.includes(inner) ? e.message : `${e.message}: ${inner}`) : String(e)
}

Effect.gen(function*() {
  const file = yield* storeFile
  yield* Console.log(`store   ${file}`)
  yield* Effect.provide(program, SqliteSessionStore.layer({ filename: file }))
}).pipe(
  Effect.tapErrorCause((cause) => Console.error(`quickstart failed: ${reason(Cause.squash(cause))}`)),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true }) // the reason is printed; runMain still exits with 1
)
