import { Effect } from "effect"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { Principal } from "../src/schema/Principal.js"
import { Sessions } from "../src/services/Sessions.js"
import * as Troupe from "../src/Troupe.js"

const principal = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

const program = Effect.gen(function*() {
  const sessions = yield* Sessions
  const agent = new Agent({ name: "demo", instructions: "Be brief.", model: new ModelRef({ name: "scripted" }) })
  const session = yield* sessions.create(principal, { agent })
  const accepted = yield* sessions.send(principal, session.id, { text: "hello" })
  const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!)
  console.log(result.output, result.usage.totalTokens)
})

Effect.runPromise(program.pipe(Effect.provide(Troupe.layerSqlite({ filename: ":memory:" }))))
