import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { Agent, Principal, Sessions, Troupe } from "troupe"

const agent = Agent.make({ name: "demo", instructions: "Be brief." })

const program = Effect.gen(function*() {
  const sessions = (yield* Sessions.Sessions).as(Principal.local)
  const session = yield* sessions.create({ agent })
  const answer = yield* sessions.prompt(session.id, "hello")
  yield* Console.log(answer.output, answer.usage.totalTokens)
})

program.pipe(Effect.provide(Troupe.layerSqlite({ filename: ":memory:" })), NodeRuntime.runMain)
