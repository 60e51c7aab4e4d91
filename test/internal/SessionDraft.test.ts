/**
 * A create request's fingerprint is the canonical text of the whole request
 * (what the stores keep beside an idempotency key, and compare on a retry),
 * whether or not its agent's part was made before for the same `Agent` value;
 * an agent's stored JSON text is its encoding's, the first time and again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { agentJson, fingerprint } from "../../src/internal/SessionDraft.js"
import { Agent, ModelRef } from "../../src/schema/Agent.js"
import { Budgets } from "../../src/schema/Budget.js"
import type { SessionId } from "../../src/schema/Ids.js"
import { canonical } from "../../src/schema/Json.js"
import { SubagentPolicy } from "../../src/schema/Policy.js"
import { Principal } from "../../src/schema/Principal.js"
import type { CreateSession } from "../../src/services/SessionStore.js"

const principal = new Principal({
  customerId: "00000000-0000-4000-8000-000000000001",
  organizationId: "00000000-0000-4000-8000-000000000002",
  workspaceId: "00000000-0000-4000-8000-000000000003"
})
const agent = new Agent({ name: "a", instructions: "be brief", model: new ModelRef({ name: "m" }) })
const helper = new Agent({ name: "helper", instructions: "help", model: new ModelRef({ name: "m" }), handoffs: [agent] })

/** The fingerprint as it was defined before its agent part was kept: canonical text of every field. */
const whole = (input: CreateSession) =>
  canonical({
    principal: Schema.encodeSync(Principal)(input.principal),
    agent: Schema.encodeSync(Agent)(input.agent),
    title: input.title ?? null,
    parentId: input.parentId ?? null,
    alias: input.alias ?? null,
    busyPolicy: input.busyPolicy ?? "queue",
    budgets: input.budgets ? Schema.encodeSync(Budgets)(input.budgets) : null,
    subagentPolicy: input.subagentPolicy ? Schema.encodeSync(SubagentPolicy)(input.subagentPolicy) : null,
    metadata: input.metadata ?? {}
  })

describe("SessionDraft.fingerprint", () => {
  it("is the canonical text of the whole request, the first time and again", () => {
    const inputs: ReadonlyArray<CreateSession> = [
      { principal, agent },
      { principal, agent, title: "t", alias: "x", busyPolicy: "reject", metadata: { z: 1, a: { c: [2, 1], b: null } } },
      {
        principal,
        agent: helper,
        parentId: "ses_01J00000000000000000000000" as SessionId,
        budgets: new Budgets({ toolCalls: 3, totalTokens: 100 }),
        subagentPolicy: new SubagentPolicy({ maxDepth: 2 })
      }
    ]
    for (const input of inputs) {
      assert.strictEqual(fingerprint(input), whole(input))
      assert.strictEqual(fingerprint(input), whole(input))
    }
    // An equal agent in another value, and another agent: each its own text.
    const same = new Agent({ name: "a", instructions: "be brief", model: new ModelRef({ name: "m" }) })
    assert.strictEqual(fingerprint({ principal, agent: same }), fingerprint({ principal, agent }))
    assert.notStrictEqual(fingerprint({ principal, agent: helper }), fingerprint({ principal, agent }))
  })

  it("agentJson is the JSON text of the encoded agent, the first time and again", () => {
    for (const a of [agent, helper, agent]) assert.strictEqual(agentJson(a), JSON.stringify(Schema.encodeSync(Agent)(a)))
  })
})
