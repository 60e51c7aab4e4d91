/**
 * Handoffs and an agent used as a tool: a triage agent hands the turn to a
 * billing agent (`handoffs`), which asks a refund checker, run as a child
 * session through `Agent.asTool`, and answers the user itself. A guardrail
 * checks the user's message first. The log tells who spoke when; the scripted
 * model plays every agent, so it runs offline.
 *
 *   npx tsx examples/handoffs.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { Agent, Guardrails, Principal, Sessions, SessionStore, Troupe } from "troupe"

const principal = new Principal.Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

const model = new Agent.ModelRef({ name: "scripted" })

// Runs as a child session for each call; its final output is the tool's result.
const refundChecker = new Agent.Agent({ name: "refund_checker", instructions: "Say whether the order may be refunded.", model })

const billing = new Agent.Agent({
  name: "billing",
  description: "Refunds, invoices and payments.",
  instructions: "Settle billing questions. Check refunds with check_refund.",
  model,
  tools: [Agent.asTool(refundChecker, { name: "check_refund", description: "Whether an order may be refunded." })]
})

// The model of triage gets a `transfer_to_billing` tool; calling it moves the turn to billing.
const triage = new Agent.Agent({
  name: "triage",
  instructions: "Find out what the user needs and hand over to the right agent.",
  model,
  handoffs: [billing],
  inputGuardrails: ["no_card_numbers"]
})

const noCardNumbers = Guardrails.make("no_card_numbers", ({ text }) =>
  Effect.succeed(/\b\d{16}\b/.test(text) ? Guardrails.block("the message holds a card number") : Guardrails.allow))

const scripts = {
  agents: {
    triage: [{ toolCalls: [{ id: "t1", name: "transfer_to_billing", arguments: JSON.stringify({ reason: "a refund" }) }] }],
    billing: [
      { toolCalls: [{ id: "c1", name: "check_refund", arguments: JSON.stringify({ input: "order 1042" }) }] },
      "Order 1042 is refunded; the money is back within five days."
    ],
    refund_checker: ["Order 1042 may be refunded: it was paid 3 days ago."]
  }
}

const program = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const store = yield* SessionStore.SessionStore
  const session = yield* sessions.create(principal, { agent: triage, title: "Support" })

  const refund = yield* sessions.send(principal, session.id, { text: "I want a refund for order 1042." })
  const result = yield* sessions.awaitTurn(principal, session.id, refund.turnId!)
  yield* Console.log(`answer: ${result.output}`)
  const { records } = yield* store.readLog(session.id)
  for (const { body } of records) {
    if (body._tag === "handoff") yield* Console.log(`  handoff ${body.from} -> ${body.to} (${body.reason})`)
    if (body._tag === "child_spawned") yield* Console.log(`  ran ${body.agentName} as a tool`)
    if (body._tag === "operation_completed" && typeof body.output === "string") yield* Console.log(`  tool result: ${body.output}`)
  }

  // The guardrail stops a message before any model sees it.
  const card = yield* sessions.send(principal, session.id, { text: "My card is 4111111111111111." })
  const blocked = yield* sessions.awaitTurn(principal, session.id, card.turnId!).pipe(Effect.flip)
  if (blocked._tag === "TurnFailed") yield* Console.log(`blocked: ${blocked.failureCode} ${JSON.stringify(blocked.failure)}`)
})

program.pipe(
  Effect.provide(Troupe.layerSqlite({ filename: ":memory:" }, { scripts, guardrails: Guardrails.layer([noCardNumbers]) })),
  NodeRuntime.runMain
)
