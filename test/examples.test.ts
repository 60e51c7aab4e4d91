/**
 * The examples are part of the documentation: each one runs here as a user
 * would run it, in a fresh process with its own TROUPE_HOME.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"

const run = promisify(execFile)
const example = (name: string, args: ReadonlyArray<string>, home: string) =>
  run(process.execPath, ["--import", "tsx", join("examples", name), ...args], {
    env: { ...process.env, TROUPE_HOME: home },
    timeout: 60_000
  })

describe("examples", () => {
  it("quickstart runs two turns on the default SQLite file and prints them", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("quickstart.ts", [], home)
    assert.include(stdout, join(home, "troupe.db"))
    assert.include(stdout, `demo: [word_count {"text":"What is troupe?"}] You said: What is troupe? (3 words)`)
    assert.include(stdout, `demo: [word_count {"text":"And what is a turn?"}] You said: And what is a turn? (5 words)`)
    assert.match(stdout, /idle, 17 events in its log/)
  }, 60_000)

  it("subagents spawns two researchers, waits for both results, and lists the tree", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("subagents.ts", [], home)
    assert.match(stdout, /^lead ses_\w+: policy \{"maxDepth":3,"maxChildTurns":10\}\n/)
    assert.include(stdout, "lead answered: Both researchers answered; see their results above.\n")
    assert.include(stdout, "  lead / researcher (researcher-1): idle\n  lead / researcher (researcher-2): idle\n")
    assert.include(stdout, "  spawned researcher-1\n  spawned researcher-2\n")
    assert.strictEqual(stdout.split("result completed: An answer from the researcher.").length - 1, 2)
  }, 60_000)

  it("handoffs hands triage's turn to billing, which runs an agent as a tool; a guardrail blocks a card number", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("handoffs.ts", [], home)
    assert.strictEqual(stdout, [
      "answer: Order 1042 is refunded; the money is back within five days.",
      "  handoff triage -> billing (a refund)",
      "  ran refund_checker as a tool",
      "  tool result: Order 1042 may be refunded: it was paid 3 days ago.",
      `blocked: guardrail_blocked {"_tag":"GuardrailBlocked","guardrail":"no_card_numbers","stage":"input","reason":"the message holds a card number"}`,
      ""
    ].join("\n"))
  }, 60_000)

  it("mcp gives an agent an MCP server's tools over stdio, the destructive one approved first", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("mcp.ts", [], home)
    assert.strictEqual(stdout, "  approval asked for notes.archive_note\nanswer: The note has 4 words and is archived.\n")
  }, 60_000)

  it("structured-output retries a reply that does not match and prints the typed invoice", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("structured-output.ts", [], home)
    assert.match(stdout, /^invoice for ACME: 2 lines, 7\.50 EUR\n  rejected attempt 1: \$\.currency: expected one of \["EUR","USD"\], got "GBP"\n$/)
  }, 60_000)

  it("embedding (the README's example) runs a turn and prints its output", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("embedding.ts", [], home)
    assert.match(stdout, /^You said: hello \d+\n$/)
  }, 60_000)

  it("agent-tools approves staging, denies production through a provider, and stops a turn on its budget", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("agent-tools.ts", [], home)
    assert.strictEqual(stdout, [
      "> Ship it to staging.",
      `  [approval] deploy {"env":"staging"}: approve`,
      "  [deploy] running for staging",
      "  completed: Deployed to https://staging.example.com. (modelCalls=2 toolCalls=1)",
      "> Now production.",
      `  [approval] deploy {"env":"production"}: deny`,
      "  completed: I may not deploy to production. (modelCalls=2 toolCalls=1)",
      "> Staging again, without tools.",
      "  failed: budget toolCalls exhausted (limit 0, observed 1)",
      ""
    ].join("\n"))
  }, 60_000)

  it("test-layers (the README's test example) passes its assertions", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("test-layers.ts", [], home)
    assert.strictEqual(stdout, "ok\n")
  }, 60_000)

  it("the README shows embedding.ts and test-layers.ts verbatim", () => {
    const readme = readFileSync("README.md", "utf8")
    for (const name of ["embedding.ts", "test-layers.ts"]) {
      const source = readFileSync(join("examples", name), "utf8")
      assert.include(readme, "```ts\n" + source + "```\n", `README.md must show examples/${name} as it is`)
    }
  })

  it("store-by-hand commits a turn, and store-embedding lists it from the same file", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const byHand = await example("store-by-hand.ts", [], home)
    assert.include(byHand.stdout, "turn_ended")
    const listed = await example("store-embedding.ts", [join(home, "troupe.db")], home)
    assert.match(listed.stdout, /ses_[0-9A-Z]{26}/)
  }, 60_000)
})
