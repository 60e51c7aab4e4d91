/**
 * A tree of sessions: a lead agent spawns two researchers through the
 * `agents.*` tools its model is offered, waits for their results, and answers
 * from them. Each child is a whole session of its own (log, inbox, lease);
 * the lead's log holds only `child_spawned` and `child_result` records. The
 * scripted model plays every agent, so it runs offline.
 *
 *   npx tsx examples/subagents.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { Agent, Principal, Sessions, SessionStore, Troupe } from "troupe"

const principal = new Principal.Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})

// The agents a lead may spawn, by name: the runtime's catalog (`Troupe.layer({ agents })`).
const researcher = new Agent.Agent({
  name: "researcher",
  instructions: "Research one question and answer in a sentence.",
  model: new Agent.ModelRef({ name: "scripted" })
})
// Declaring subagents gives a root session of this agent a default policy (10 child turns).
const lead = new Agent.Agent({
  name: "lead",
  instructions: "Split the question, delegate each part, then answer.",
  model: new Agent.ModelRef({ name: "scripted" }),
  subagents: [new Agent.SubagentRef({ name: "researcher", description: "answers one research question" })]
})

const spawn = (id: string, message: string) => ({ id, name: "agents.spawn", arguments: JSON.stringify({ agent: "researcher", message }) })
const scripts = {
  agents: {
    lead: [
      { toolCalls: [spawn("s1", "Who wrote Effect?"), spawn("s2", "What is an actor?")] },
      { toolCalls: [{ id: "w1", name: "agents.wait", arguments: JSON.stringify({ sessions: ["researcher-1", "researcher-2"] }) }] },
      "Both researchers answered; see their results above."
    ],
    researcher: ["An answer from the researcher."]
  }
}

const program = Effect.gen(function*() {
  const sessions = yield* Sessions.Sessions
  const store = yield* SessionStore.SessionStore
  const root = yield* sessions.create(principal, { agent: lead, title: "Research" })
  yield* Console.log(`lead ${root.id}: policy ${JSON.stringify(root.subagentPolicy)}`)
  const accepted = yield* sessions.send(principal, root.id, { text: "Tell me about Effect and actors." })
  const result = yield* sessions.awaitTurn(principal, root.id, accepted.turnId!)
  yield* Console.log(`lead answered: ${result.output}`)

  // The tree, from the root down.
  const tree = yield* sessions.tree(principal, root.id)
  for (const node of tree.nodes) yield* Console.log(`  ${node.agentPath.join(" / ")} (${node.alias}): ${node.session.status}`)
  // What the lead's log says about its children: their spawns and results, never their transcripts.
  const { records } = yield* store.readLog(root.id)
  for (const { body } of records) {
    if (body._tag === "child_spawned") yield* Console.log(`  spawned ${body.alias}`)
    if (body._tag === "child_result") yield* Console.log(`  result ${body.outcome}: ${body.output}`)
  }
})

program.pipe(
  Effect.provide(Troupe.layerSqlite({ filename: ":memory:" }, { agents: [researcher], scripts })),
  NodeRuntime.runMain
)
