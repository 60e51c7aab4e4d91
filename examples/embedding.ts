import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { Agent, Principal, Sessions, Troupe } from "troupe"

const principal = new Principal.Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const agent = new Agent.Agent({ name: "demo", instructions: "Be brief.", model: new Agent.ModelRef({ name: "scripted" }) })

const program = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const session = yield* sessions.create(principal, { agent })
  const accepted = yield* sessions.send(principal, session.id, { text: "hello" })
  const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!)
  yield* Console.log(result.output, result.usage.totalTokens)
})

program.pipe(Effect.provide(Troupe.layerSqlite({ filename: ":memory:" })), NodeRuntime.runMain)
