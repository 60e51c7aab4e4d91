/**
 * Quick start: a troupe runtime embedded in a program. It keeps its sessions in
 * the SQLite file $TROUPE_HOME/troupe.db (~/.troupe by default) and answers with
 * the built-in scripted model, so it runs offline. It creates a session whose
 * agent has one tool, sends it messages, and prints the session's events as
 * they happen: each turn calls the model, runs the tool it asks for, and calls
 * the model again with the tool's result.
 *
 *   npx tsx examples/quickstart.ts [--store :memory: | --store PATH] [MESSAGE ...]
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema, Stream } from "effect"
import { mkdirSync } from "node:fs"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { parseArgs } from "node:util"
import { Agent, type Event, type Model, Principal, Sessions, Tool, Troupe } from "troupe"

const { positionals, values } = parseArgs({ allowPositionals: true, options: { store: { type: "string" } } })
const home = process.env.TROUPE_HOME ?? join(homedir(), ".troupe")
const filename = values.store ?? join(home, "troupe.db")
if (filename !== ":memory:") mkdirSync(dirname(filename), { recursive: true })
const messages = positionals.length > 0 ? positionals : ["What is troupe?", "And what is a turn?"]

// A tool: its parameters are a Schema (the model sees the JSON Schema), its handler runs on this host.
const wordCount = Tool.make({
  name: "word_count",
  description: "Counts the words of a text.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.Number,
  metadata: { sideEffect: "none", idempotency: "supported" },
  handler: ({ text }) => Effect.succeed(text.split(/\s+/).filter(Boolean).length)
})
// The agent is frozen into the session when it is created: the tool's spec goes into it, its handler
// stays here (the runtime it is given to registers it). No model named: the runtime's default.
const agent = Agent.make({ name: "demo", instructions: "Answer briefly.", tools: [wordCount] })
// The scripted model stands in for a real one: it asks for the tool, then answers with its result.
const demoModel = (request: Model.Request) => {
  const last = request.messages[request.messages.length - 1]!
  const asked = [...request.messages].reverse().find((m) => m.role === "user")?.content ?? ""
  return last.role === "tool"
    ? `You said: ${asked} (${last.content} words)`
    : { toolCalls: [{ id: "call-1", name: "word_count", arguments: JSON.stringify({ text: asked }) }] }
}

const show = (event: Event.SessionEvent | Sessions.PromptResult) => {
  if (event._tag === "prompt_result") return Effect.void
  if (event._tag === "assistant_delta") return Effect.sync(() => process.stdout.write(event.text))
  const record = event.record
  switch (record._tag) {
    case "turn_started":
      return Effect.sync(() => process.stdout.write(`[${event.cursor}] you:  ${record.text}\n      demo: `))
    case "turn_ended":
      return Console.log(`\n[${event.cursor}] turn ${record.outcome} (${record.usage.totalTokens} tokens)`)
    case "operation_started":
      return record.kind === "tool"
        ? Effect.sync(() => process.stdout.write(`[${record.name} ${(record.input as { arguments: string }).arguments}] `))
        : Effect.void // the model call behind the streamed text
    case "operation_completed":
      return Effect.void
    default:
      return Console.log(`[${event.cursor}] ${record._tag}`)
  }
}

const program = Effect.gen(function*() {
  // The principal of this user: the one `troupe run` and `troupe sessions` act as.
  const sessions = (yield* Sessions.Sessions).as(Principal.local)
  const session = yield* sessions.create({ agent, title: "Quick start" })
  yield* Console.log(`session ${session.id} in ${filename}`)
  // Each message: its turn's events as they happen (with the streamed text), then its result.
  for (const text of messages) yield* Stream.runForEach(sessions.promptStream(session.id, text), show)
  const summary = yield* sessions.get(session.id)
  yield* Console.log(`\nsession ${summary.id}: ${summary.status}, ${summary.headSeq} events in its log`)
})

program.pipe(
  Effect.provide(Troupe.layerSqlite({ filename }, {
    host: { idleTimeout: "1 second" },
    agents: [agent],
    scripts: { fallback: demoModel }
  })),
  Effect.tapErrorCause((cause) => Console.error("quickstart failed:", cause)),
  NodeRuntime.runMain
)
