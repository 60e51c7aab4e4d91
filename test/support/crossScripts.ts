/**
 * The agents and scripted replies of the cross-process tests, shared by the
 * test and its child process (test/support/crossHost.ts): a message starting
 * "pick" makes the turn call the client tool `pick` (a callback), "final"
 * ends with "the end", anything else ends at once; `lead` spawns a `worker`
 * naps (a server tool that holds its host's busy slot) while the result comes.
 */
import { Agent, ModelRef, SubagentRef, ToolSpec } from "../../src/schema/Agent.js"
import { Effect, Schema } from "effect"
import type { Scripts } from "../../src/layers/ScriptedModel.js"
import { Principal } from "../../src/schema/Principal.js"
import * as Tool from "../../src/services/Tool.js"

/** The principal of the child process's session, which the test shares. */
export const owner = new Principal({
  customerId: "00000000-0000-4000-8000-0000000000c1",
  organizationId: "00000000-0000-4000-8000-0000000000c2",
  workspaceId: "00000000-0000-4000-8000-0000000000c3"
})

const pick = new ToolSpec({
  name: "pick",
  description: "The client picks.",
  parameters: { type: "object" },
  sideEffect: "none",
  idempotency: "unknown",
  client: true
})

/** The agent of most sessions: one client tool. */
export const crossAgent = new Agent({ name: "shared", instructions: "x", model: new ModelRef({ name: "scripted" }), tools: [pick] })

/** A child's agent. */
export const worker = new Agent({ name: "worker", instructions: "Work.", model: new ModelRef({ name: "scripted" }) })

/** A server tool that keeps its turn busy (and its host's busy slot taken) for 1.5 s. */
export const nap = Tool.make({
  name: "nap",
  description: "Naps.",
  parameters: Schema.Struct({}),
  success: Schema.String,
  handler: () => Effect.as(Effect.sleep("1500 millis"), "rested")
})

/** A parent that delegates to a worker and naps meanwhile: the worker's result reaches the napping turn. */
export const lead = new Agent({
  name: "lead",
  instructions: "Delegate.",
  model: new ModelRef({ name: "scripted" }),
  tools: [nap.spec],
  subagents: [new SubagentRef({ name: "worker", description: "does the work" })]
})

const call = (id: string, name: string, args: object) => ({ id, name, arguments: JSON.stringify(args) })

/** The replies. */
export const crossScripts: Scripts = {
  agents: {
    lead: [
      { toolCalls: [call("s1", "agents.spawn", { agent: "worker", message: "do x" })] },
      { toolCalls: [call("n1", "nap", {})] },
      "the worker is done"
    ]
  },
  fallback: (request) => {
    const last = request.messages[request.messages.length - 1]!
    if (last.role === "user" && last.content.startsWith("pick")) return { toolCalls: [{ id: "p", name: "pick", arguments: "{}" }] }
    if (last.role === "user" && last.content.startsWith("final")) return "the end"
    return `done after ${request.messages.length} messages`
  }
}
