/**
 * Structured output: an agent declares the schema of its final output
 * (`Agent.outputOf`); the runtime gives the model its JSON Schema, checks the
 * reply, sends one that does not match back with what is wrong, and
 * `awaitOutput` returns the value decoded with the same Effect Schema, typed.
 * The scripted model's first reply is off on purpose; it runs offline.
 *
 *   npx tsx examples/structured-output.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema } from "effect"
import { Agent, Principal, Sessions, SessionStore, Troupe } from "troupe"

const principal = new Principal.Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

const Invoice = Schema.Struct({
  customer: Schema.String,
  currency: Schema.Literal("EUR", "USD"),
  lines: Schema.Array(Schema.Struct({ item: Schema.String, amount: Schema.Number }))
})

const invoicer = new Agent.Agent({
  name: "invoicer",
  instructions: "Turn the order into an invoice.",
  model: new Agent.ModelRef({ name: "scripted" }),
  output: Agent.outputOf(Invoice, { name: "invoice", maxRetries: 2 })
})

const scripts = {
  agents: {
    invoicer: [
      JSON.stringify({ customer: "ACME", currency: "GBP", lines: [] }),
      JSON.stringify({ customer: "ACME", currency: "EUR", lines: [{ item: "tea", amount: 4.5 }, { item: "cake", amount: 3 }] })
    ]
  }
}

const program = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const store = yield* SessionStore.SessionStore
  const session = yield* sessions.create(principal, { agent: invoicer })
  const accepted = yield* sessions.send(principal, session.id, { text: "ACME ordered tea (4.50) and cake (3.00)." })
  // Typed as the schema's type: `invoice.lines` is an array of { item, amount }.
  const invoice = yield* sessions.awaitOutput(principal, session.id, accepted.turnId!, Invoice)
  const total = invoice.lines.reduce((sum, line) => sum + line.amount, 0)
  yield* Console.log(`invoice for ${invoice.customer}: ${invoice.lines.length} lines, ${total.toFixed(2)} ${invoice.currency}`)
  const { records } = yield* store.readLog(session.id)
  for (const { body } of records) if (body._tag === "output_rejected") yield* Console.log(`  rejected attempt ${body.attempt}: ${body.problems}`)
})

program.pipe(Effect.provide(Troupe.layerSqlite({ filename: ":memory:" }, { scripts })), NodeRuntime.runMain)
