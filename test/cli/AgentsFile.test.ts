/**
 * The agents file: a file declaring every field decodes into the same
 * `Agent` values as the code form (deep equality, and the same stored
 * encoding); a bad value of each field is an error naming its path; the
 * printed JSON Schema accepts the full file and refuses a bad one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as AgentsFile from "../../src/cli/AgentsFile.js"
import * as AgentsFileSchema from "../../src/cli/AgentsFileSchema.js"
import { Agent, asTool, ModelRef, ModelSettings, OutputSpec, PermissionPolicy, SubagentRef, ToolSpec } from "../../src/schema/Agent.js"
import { Budgets } from "../../src/schema/Budget.js"
import { CompactionSettings } from "../../src/schema/Compaction.js"
import * as JsonSchemaValidator from "../../src/schema/JsonSchemaValidator.js"
import { ApprovalSettings, SubagentPolicy } from "../../src/schema/Policy.js"

const FULL = {
  agents: [
    {
      name: "lead",
      description: "Leads.",
      instructions: "Delegate.",
      model: { name: "gpt-test", settings: { temperature: 0.5, maxOutputTokens: 500 } },
      tools: [
        {
          name: "publish",
          description: "Publishes.",
          parameters: { type: "object", properties: { text: { type: "string" } } },
          sideEffect: "write",
          idempotency: "supported",
          capabilities: ["network"],
          costs: ["money"],
          terminal: true,
          parallel: false,
          preserveResult: true,
          needsApproval: true
        },
        { name: "ask_checker", description: "Asks the checker.", agent: "checker", parallel: true }
      ],
      permissions: { default: "ask", rules: { "agents.spawn": "allow" }, sideEffects: { write: "ask" }, capabilities: { network: "ask" }, costs: { money: "deny" }, terminal: "allow" },
      approvals: { mode: "ask", timeoutMs: 60000 },
      noToolPolicy: "wait_user",
      maxCycles: 8,
      maxHandoffs: 3,
      maxParallelTools: 2,
      subagents: ["researcher", { name: "checker", description: "Checks." }],
      subagentPolicy: { maxDepth: 2, maxChildren: 5, maxChildTurns: 10, allowedAgents: ["researcher", "checker"] },
      handoffs: ["billing"],
      output: { name: "report", schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] }, maxRetries: 1 },
      compaction: { enabled: true, contextWindow: 32000, keepRecentMessages: 6 },
      budgets: { totalTokens: 10000, toolCalls: 20, toolCallsByName: { publish: 2 }, wallTimeMs: 60000 }
    },
    { name: "researcher", instructions: "Research.", subagents: ["checker"] },
    { name: "checker", instructions: "Check.", model: "small" },
    { name: "billing", instructions: "Bill." }
  ]
}

/** The same agents, built in code. */
const codeForm = (): ReadonlyArray<Agent> => {
  const checker = new Agent({ name: "checker", instructions: "Check.", model: new ModelRef({ name: "small" }) })
  const researcher = new Agent({
    name: "researcher",
    instructions: "Research.",
    model: new ModelRef({ name: "default" }),
    subagents: [new SubagentRef({ name: "checker" })]
  })
  const billing = new Agent({ name: "billing", instructions: "Bill.", model: new ModelRef({ name: "default" }) })
  const lead = new Agent({
    name: "lead",
    description: "Leads.",
    instructions: "Delegate.",
    model: new ModelRef({ name: "gpt-test", settings: new ModelSettings({ temperature: 0.5, maxOutputTokens: 500 }) }),
    tools: [
      new ToolSpec({
        name: "publish",
        description: "Publishes.",
        parameters: { type: "object", properties: { text: { type: "string" } } },
        sideEffect: "write",
        idempotency: "supported",
        client: true,
        capabilities: ["network"],
        costs: ["money"],
        terminal: true,
        parallel: false,
        preserveResult: true
      }),
      new ToolSpec({ ...asTool(checker, { name: "ask_checker", description: "Asks the checker." }), parallel: true })
    ],
    permissions: new PermissionPolicy({
      default: "ask",
      rules: { "agents.spawn": "allow", publish: "ask" },
      sideEffects: { write: "ask" },
      capabilities: { network: "ask" },
      costs: { money: "deny" },
      terminal: "allow"
    }),
    approvals: new ApprovalSettings({ mode: "ask", timeoutMs: 60000 }),
    noToolPolicy: "wait_user",
    maxCycles: 8,
    maxHandoffs: 3,
    maxParallelTools: 2,
    subagents: [new SubagentRef({ name: "researcher" }), new SubagentRef({ name: "checker", description: "Checks." })],
    subagentPolicy: new SubagentPolicy({ maxDepth: 2, maxChildren: 5, maxChildTurns: 10, allowedAgents: ["researcher", "checker"] }),
    handoffs: [billing],
    output: new OutputSpec({ name: "report", schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] }, maxRetries: 1 }),
    compaction: new CompactionSettings({ enabled: true, contextWindow: 32000, keepRecentMessages: 6 }),
    budgets: new Budgets({ totalTokens: 10000, toolCalls: 20, toolCallsByName: { publish: 2 }, wallTimeMs: 60000 })
  })
  return [lead, researcher, checker, billing]
}

const problemsOf = (value: unknown) =>
  Effect.flip(AgentsFile.parse("bad.json", JSON.stringify(value))).pipe(Effect.map((error) => error.problems))

/** One agent `lead` with `field` set to `value` (plus the agents it may name). */
const withField = (field: string, value: unknown) => ({
  agents: [{ name: "lead", instructions: "", [field]: value }, { name: "other", instructions: "" }]
})

describe("agents file", () => {
  it.effect("every field decodes into the same Agent as the code form", () =>
    Effect.gen(function*() {
      const agents = yield* AgentsFile.parse("full.json", JSON.stringify(FULL))
      const expected = codeForm()
      assert.deepStrictEqual(agents, expected)
      const encode = Schema.encodeSync(Schema.Array(Agent))
      assert.deepStrictEqual(encode(agents), encode(expected))
    }))

  it.effect("a bad value of each field is an error naming its path; all problems at once", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, unknown, string]> = [
        ["name", "1x", "agents.0.name: expected a name"],
        ["description", 5, "agents.0.description: expected string"],
        ["instructions", null, "agents.0.instructions: expected string"],
        ["model", { name: "" }, "agents.0.model: expected a model name or"],
        ["tools", "x", "agents.0.tools: expected a list"],
        ["tools", [{ name: "t", sideEffect: "rite" }], "agents.0.tools.0.sideEffect: expected"],
        ["tools", [{ name: "t", idempotency: "maybe" }], "agents.0.tools.0.idempotency: expected"],
        ["tools", [{ name: "t", capabilities: ["9"] }], "agents.0.tools.0.capabilities.0: expected a name"],
        ["tools", [{ name: "t", costs: "money" }], "agents.0.tools.0.costs: expected a list"],
        ["tools", [{ name: "t", terminal: "yes" }], "agents.0.tools.0.terminal: expected boolean"],
        ["tools", [{ name: "t", parallel: 1 }], "agents.0.tools.0.parallel: expected boolean"],
        ["tools", [{ name: "t", needsApproval: "y" }], "agents.0.tools.0.needsApproval: expected boolean"],
        ["tools", [{ name: "t", agent: "nobody" }], "agents.0.tools.0.agent: no agent of this file is named nobody"],
        ["tools", [{ name: "t", agent: "other", parameters: {} }], "agents.0.tools.0.parameters: an agent tool takes { input }"],
        ["tools", [{ name: "t", colour: "red" }], "agents.0.tools.0.colour: is not a field here"],
        ["permissions", { default: "maybe" }, "agents.0.permissions.default: expected"],
        ["permissions", { rules: { rm: "allow" } }, "agents.0.permissions.rules.rm: lead has no tool named rm"],
        ["permissions", { sideEffects: { write: "sure" } }, "agents.0.permissions.sideEffects.write: expected"],
        ["approvals", { mode: "always" }, "agents.0.approvals.mode: expected"],
        ["approvals", { timeoutMs: 0 }, "agents.0.approvals.timeoutMs: "],
        ["noToolPolicy", "stop", "agents.0.noToolPolicy: expected"],
        ["maxCycles", 0, "agents.0.maxCycles: "],
        ["maxHandoffs", 1.5, "agents.0.maxHandoffs: "],
        ["maxParallelTools", 100, "agents.0.maxParallelTools: "],
        ["subagents", [5], "agents.0.subagents.0: expected an agent name or"],
        ["subagents", ["ghost"], "agents.0.subagents.0: no agent of this file is named ghost"],
        ["subagentPolicy", { maxChildTurns: 10 }, "agents.0.subagentPolicy.maxDepth: "],
        ["subagentPolicy", { maxDepth: 2, allowedAgents: ["ghost"] }, "agents.0.subagentPolicy.allowedAgents.0: no agent"],
        ["handoffs", ["ghost"], "agents.0.handoffs.0: no agent of this file is named ghost"],
        ["handoffs", ["lead"], "agents.0.handoffs.0: lead → lead is a cycle"],
        ["output", { name: "o" }, "agents.0.output.schema: "],
        ["output", { schema: {}, maxRetries: 11 }, "agents.0.output.maxRetries: "],
        ["compaction", { contextWindow: -1 }, "agents.0.compaction.contextWindow: "],
        ["budgets", { toolCalls: "ten" }, "agents.0.budgets.toolCalls: expected"],
        ["modle", "x", "agents.0.modle: is not a field here"]
      ]
      for (const [field, value, expected] of cases) {
        const problems = yield* problemsOf(withField(field, value))
        assert.isTrue(problems.some((problem) => problem.startsWith(expected)), `${field}: ${JSON.stringify(value)} → ${problems.join(" | ")}`)
      }
      // Every problem of a file at once, each on its own.
      const many = yield* problemsOf({ agents: [{ name: "a", instructions: "", maxCycles: 0, noToolPolicy: "stop" }] })
      assert.strictEqual(many.length, 2, many.join(" | "))
      // A cycle through two agents.
      const cycle = yield* problemsOf({ agents: [{ name: "a", instructions: "", handoffs: ["b"] }, { name: "b", instructions: "", handoffs: ["a"] }] })
      assert.include(cycle.join(" | "), "a → b → a is a cycle")
    }))

  it("the printed JSON Schema accepts the full file and refuses a bad one", () => {
    const schema = AgentsFileSchema.jsonSchema() as unknown as JsonSchemaValidator.Schema
    assert.deepStrictEqual(JsonSchemaValidator.validate(schema, FULL), [])
    assert.isAbove(JsonSchemaValidator.validate(schema, withField("maxCycles", "many")).length, 0)
    assert.isAbove(JsonSchemaValidator.validate(schema, withField("modle", "x")).length, 0)
  })
})
