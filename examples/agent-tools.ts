/**
 * The agent loop embedded: a server tool behind an `ask` permission, the
 * approvals answered by a callback provider, and a budget that stops a turn.
 * The scripted model plays the model, so it runs offline; give the runtime
 * `model: Layer.orDie(OpenAiCompatibleModel.layerConfig())` to use a real one
 * (docs/models.md).
 *
 *   npx tsx examples/agent-tools.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Option, Schema } from "effect"
import { Agent, Budget, type Callback, Principal, Sessions, Tool, Toolkit, Troupe } from "troupe"

const principal = new Principal.Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

// A server tool: this process runs its handler. Its side effect is external and
// repeating it is not safe, so after a crash an unfinished call is never re-run.
const deploy = Tool.make({
  name: "deploy",
  description: "Deploys the current build to an environment.",
  parameters: Schema.Struct({ env: Schema.Literal("staging", "production") }),
  success: Schema.Struct({ url: Schema.String }),
  metadata: { sideEffect: "external", idempotency: "unsupported" },
  handler: ({ env }) =>
    Console.log(`  [deploy] running for ${env}`).pipe(Effect.as({ url: `https://${env}.example.com` }))
})

// The agent carries the tool's contract; every call of `deploy` asks for approval first.
const agent = new Agent.Agent({
  name: "deployer",
  instructions: "Deploy when asked.",
  model: new Agent.ModelRef({ name: "scripted" }),
  tools: [deploy.spec],
  permissions: new Agent.PermissionPolicy({ default: "allow", rules: { deploy: "ask" } })
})

// What the scripted model answers, one reply per model call, across the session's turns.
const deployTo = (id: string, env: string) => ({ toolCalls: [{ id, name: "deploy", arguments: JSON.stringify({ env }) }] })
const script = [
  deployTo("call-1", "staging"), "Deployed to https://staging.example.com.",
  deployTo("call-2", "production"), "I may not deploy to production.",
  deployTo("call-3", "staging"), "(never reached: the budget stops the turn first)"
]

// A provider answers approval callbacks of the session (and of any descendant).
// Typed by kind: an approval callback in, an approval answer out (a wrong shape would end the provider).
const approve = (callback: Callback.CallbackOf<"approval">) =>
  Effect.gen(function*() {
    const { env } = JSON.parse(callback.request.arguments) as { env: string }
    const answer = env === "production"
      ? { decision: "deny" as const, reason: "production needs a human" }
      : { decision: "approve" as const }
    yield* Console.log(`  [approval] ${callback.request.toolName} ${callback.request.arguments}: ${answer.decision}`)
    return Option.some(answer)
  })

const program = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const session = yield* sessions.create(principal, { agent, title: "Deployments" })
  // Serves until the enclosing scope closes.
  yield* Effect.forkScoped(sessions.provideCallbacks(principal, session.id, ["approval"], approve))

  const turn = (text: string, run?: Sessions.SendOptions["run"]) =>
    Effect.gen(function*() {
      yield* Console.log(`> ${text}`)
      const accepted = yield* sessions.send(principal, session.id, { text, run })
      const result = yield* sessions.awaitTurn(principal, session.id, accepted.turnId!)
      const { modelCalls, toolCalls } = result.usage
      yield* Console.log(`  completed: ${result.output} (modelCalls=${modelCalls} toolCalls=${toolCalls})`)
    }).pipe(
      Effect.catchTags({
        BudgetExhausted: (e) => Console.log(`  failed: budget ${e.dimension} exhausted (limit ${e.limit}, observed ${e.observed})`),
        TurnFailed: (e) => Console.log(`  failed: ${e.failureCode}`)
      })
    )

  yield* turn("Ship it to staging.")
  yield* turn("Now production.")
  // Run options override the agent for one turn: here a budget of no tool calls at all.
  yield* turn("Staging again, without tools.", { budgets: new Budget.Budgets({ toolCalls: 0 }) })
})

program.pipe(
  Effect.scoped,
  Effect.provide(Troupe.layerSqlite({ filename: ":memory:" }, {
    scripts: { agents: { deployer: script } },
    tools: Toolkit.layer([deploy])
  })),
  NodeRuntime.runMain
)
