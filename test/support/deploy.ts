/**
 * A server tool that needs approval, for suites that drive approval callbacks
 * (over the wire or through the client): `deploy`, counted per run, and agents
 * whose permission rule for it is `ask`.
 *
 * @since 0.1.0
 */
import { Effect, Ref, Schema } from "effect"
import { Agent, ModelRef, PermissionPolicy } from "../../src/schema/Agent.js"
import * as Tool from "../../src/services/Tool.js"

/** `deploy`: takes no arguments, answers "deployed", and counts its runs in `runs`. */
export const deployTool = (runs: Ref.Ref<number>) =>
  Tool.make({
    name: "deploy",
    description: "Deploys the service.",
    parameters: Schema.Struct({}),
    success: Schema.String,
    handler: () => Effect.as(Ref.update(runs, (n) => n + 1), "deployed")
  })

/** An agent on the scripted model that may call `deploy`, each call after an approval. */
export const deployingAgent = (name: string, description: string): Agent =>
  new Agent({
    name,
    description,
    instructions: `You are ${name}.`,
    model: new ModelRef({ name: "scripted" }),
    // Only the spec matters to an agent; the handler lives in the host's toolkit.
    tools: [deployTool(Ref.unsafeMake(0)).spec],
    permissions: new PermissionPolicy({ rules: { deploy: "ask" } })
  })

/** A scripted reply that calls `deploy` with the call id `id`. */
export const deployCall = (id: string) => ({ toolCalls: [{ id, name: "deploy", arguments: "{}" }] })
