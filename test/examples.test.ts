/**
 * The examples are part of the documentation: each one runs here as a user
 * would run it, in a fresh process with its own TROUPE_HOME.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync } from "node:fs"
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

  it("embedding (the README's example) runs a turn and prints its output", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const { stdout } = await example("embedding.ts", [], home)
    assert.match(stdout, /^You said: hello \d+\n$/)
  }, 60_000)

  it("store-by-hand commits a turn, and store-embedding lists it from the same file", async () => {
    const home = mkdtempSync(join(tmpdir(), "troupe-home-"))
    const byHand = await example("store-by-hand.ts", [], home)
    assert.include(byHand.stdout, "turn_ended")
    const listed = await example("store-embedding.ts", [join(home, "troupe.db")], home)
    assert.match(listed.stdout, /ses_[0-9A-Z]{26}/)
  }, 60_000)
})
