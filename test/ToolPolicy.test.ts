/**
 * The cumulative permission fold (`ToolPolicy`), pure: within a layer a rule
 * naming the tool wins, else the strictest matching metadata rule, else the
 * default; across layers the strictest wins, so no layer lifts another's
 * denial. End-to-end behaviour (host, parent, agent, run) is in
 * test/ToolCalls.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { PermissionLayer, PermissionPolicy } from "../src/schema/Agent.js"
import { ApprovalSettings } from "../src/schema/Policy.js"
import { RunOptions } from "../src/schema/Run.js"
import * as ToolPolicy from "../src/actors/ToolPolicy.js"

const fetch: ToolPolicy.Subject = { name: "fetch", sideEffect: "read", capabilities: ["network"], costs: ["money"] }
const write: ToolPolicy.Subject = { name: "write_file", sideEffect: "write", capabilities: ["filesystem"] }
const submit: ToolPolicy.Subject = { name: "submit", sideEffect: "external", terminal: true }

const layer = (source: string, rules: ToolPolicy.Rules): ToolPolicy.Layer => ({ source, rules })

describe("ToolPolicy", () => {
  it("each kind of rule matches the tool's metadata: side effect, capability, cost, terminal", () => {
    assert.deepStrictEqual(ToolPolicy.layerDecision(layer("agent", { sideEffects: { write: "deny" } }), write), {
      permission: "deny",
      source: "agent",
      rule: "side_effect:write"
    })
    assert.deepStrictEqual(ToolPolicy.layerDecision(layer("agent", { capabilities: { network: "ask" } }), fetch), {
      permission: "ask",
      source: "agent",
      rule: "capability:network"
    })
    assert.deepStrictEqual(ToolPolicy.layerDecision(layer("agent", { costs: { money: "deny" } }), fetch), {
      permission: "deny",
      source: "agent",
      rule: "cost:money"
    })
    assert.deepStrictEqual(ToolPolicy.layerDecision(layer("agent", { terminal: "ask" }), submit), {
      permission: "ask",
      source: "agent",
      rule: "terminal"
    })
    // Rules that match nothing, and no default: no opinion.
    assert.isUndefined(ToolPolicy.layerDecision(layer("agent", { terminal: "deny", costs: { money: "deny" } }), write))
  })

  it("within a layer: a rule naming the tool wins; else the strictest matching rule; else the default", () => {
    const rules: ToolPolicy.Rules = {
      default: "deny",
      rules: { fetch: "allow" },
      capabilities: { network: "deny", filesystem: "ask" },
      sideEffects: { write: "allow" }
    }
    assert.strictEqual(ToolPolicy.layerDecision(layer("agent", rules), fetch)?.permission, "allow")
    // write_file: side effect allow, capability ask: the stricter.
    assert.deepStrictEqual(ToolPolicy.layerDecision(layer("agent", rules), write), {
      permission: "ask",
      source: "agent",
      rule: "capability:filesystem"
    })
    assert.deepStrictEqual(ToolPolicy.layerDecision(layer("agent", rules), submit), {
      permission: "deny",
      source: "agent",
      rule: "default"
    })
  })

  it("across layers the strictest wins: a later layer adds a denial or an ask, never lifts one", () => {
    const host = layer("host", { capabilities: { network: "deny" } })
    const agent = layer("agent", { default: "allow", rules: { write_file: "ask" } })
    const run = layer("run", { default: "allow", rules: { fetch: "allow", write_file: "allow", submit: "deny" } })
    const layers = [host, agent, run]
    // The run's allow by name does not lift the host's capability denial.
    assert.deepStrictEqual(ToolPolicy.decide(layers, fetch), { permission: "deny", source: "host", rule: "capability:network" })
    // Nor the agent's ask.
    assert.deepStrictEqual(ToolPolicy.decide(layers, write), { permission: "ask", source: "agent", rule: "name" })
    // The run adds a denial of its own.
    assert.deepStrictEqual(ToolPolicy.decide(layers, submit), { permission: "deny", source: "run", rule: "name" })
    // The order of the layers does not change the outcome.
    assert.strictEqual(ToolPolicy.decide([run, agent, host], fetch).permission, "deny")
    // No layer with an opinion: allowed.
    assert.deepStrictEqual(ToolPolicy.decide([layer("run", {})], { name: "anything" }), { permission: "allow" })
  })

  it("a tie keeps the first layer that said it", () => {
    const layers = [layer("host", { rules: { fetch: "deny" } }), layer("agent", { rules: { fetch: "deny" } })]
    assert.strictEqual(ToolPolicy.decide(layers, fetch).source, "host")
  })

  it("layersOf orders host, inherited parents, agent, run; the agent's PermissionPolicy is a layer as it is", () => {
    const inherited = [new PermissionLayer({ source: "parent", capabilities: { network: "deny" } })]
    const layers = ToolPolicy.layersOf({
      host: { rules: { rm: "deny" } },
      inherited,
      agent: new PermissionPolicy({ default: "allow", rules: { fetch: "allow" } }),
      run: { rules: { fetch: "allow" } }
    })
    assert.deepStrictEqual(layers.map((l) => l.source), ["host", "parent", "agent", "run"])
    assert.deepStrictEqual(ToolPolicy.decide(layers, fetch), { permission: "deny", source: "parent", rule: "capability:network" })
  })

  it("forChild passes every layer on as a parent's, and childRun freezes them with the run's approvals into a RunOptions", () => {
    const layers = [
      layer("host", { rules: { rm: "deny" } }),
      layer("agent", new PermissionPolicy({ default: "allow", capabilities: { network: "deny" } }))
    ]
    const run = ToolPolicy.childRun(layers, new RunOptions({ approvals: new ApprovalSettings({ mode: "never" }) }))
    // It survives the trip through the log as JSON.
    const stored = Schema.decodeUnknownSync(RunOptions)(JSON.parse(JSON.stringify(Schema.encodeSync(RunOptions)(run))))
    assert.deepStrictEqual(stored.approvals?.mode, "never")
    assert.deepStrictEqual(stored.inherited?.map((l) => l.source), ["parent", "parent"])
    const childLayers = ToolPolicy.layersOf({ inherited: stored.inherited, agent: new PermissionPolicy({ default: "allow" }) })
    assert.deepStrictEqual(ToolPolicy.decide(childLayers, { name: "rm" }), { permission: "deny", source: "parent", rule: "name" })
    assert.deepStrictEqual(ToolPolicy.decide(childLayers, fetch), { permission: "deny", source: "parent", rule: "capability:network" })
  })

  it("a grandchild is bound by its grandparent's layers: a child passes on what it inherited", () => {
    const rootLayers = ToolPolicy.layersOf({ agent: new PermissionPolicy({ rules: { rm: "deny" } }) })
    const childRun = ToolPolicy.childRun(rootLayers, undefined)
    const childLayers = ToolPolicy.layersOf({ inherited: childRun.inherited, agent: new PermissionPolicy({ rules: { rm: "allow" } }) })
    const grandchildRun = ToolPolicy.childRun(childLayers, undefined)
    assert.lengthOf(grandchildRun.inherited!, 2)
    const grandchildLayers = ToolPolicy.layersOf({
      inherited: grandchildRun.inherited,
      agent: new PermissionPolicy({ default: "allow", rules: { rm: "allow" } }),
      run: { rules: { rm: "allow" } }
    })
    assert.deepStrictEqual(ToolPolicy.decide(grandchildLayers, { name: "rm" }), { permission: "deny", source: "parent", rule: "name" })
  })

  it("notAllowed is the tool error tool_not_allowed naming the layer and rule", () => {
    assert.deepStrictEqual(ToolPolicy.notAllowed("fetch", { permission: "deny", source: "host", rule: "capability:network" }), {
      output: {
        error: "tool_not_allowed: fetch is denied by the host policy (capability:network)",
        code: "tool_not_allowed",
        layer: "host",
        rule: "capability:network"
      },
      isError: true
    })
  })
})
