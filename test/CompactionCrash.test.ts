/**
 * A summary call cut off by SIGKILL (docs/agent-loop.md, "Context
 * compaction"): the turn of test/support/compactionScript.ts runs in a child
 * process on a SQLite file and is killed inside its summary call; a fresh
 * process resumes it. The conversation it ends with is the one a process that
 * was never interrupted ends with (operation ids aside: they are minted anew).
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type CompactionResult, MARKER, RESULT } from "./support/crashCompaction.js"

const script = fileURLToPath(new URL("./support/crashCompaction.ts", import.meta.url))

const child = (db: string, mode: "start" | "resume" | "clean", dir: string) =>
  spawn(process.execPath, ["--import", "tsx", script, db, mode, dir], {
    env: { ...process.env, TROUPE_TELEMETRY_ENABLED: "false" },
    stdio: ["ignore", "pipe", "pipe"]
  })

/** Runs a child to its end (`start`: SIGKILLs it at its crash point); resolves with its result, if any. */
const run = (db: string, mode: "start" | "resume" | "clean", dir: string) =>
  new Promise<CompactionResult | undefined>((resolve, reject) => {
    const proc = child(db, mode, dir)
    let stdout = ""
    let stderr = ""
    let killed = false
    const timer = setTimeout(() => proc.kill("SIGKILL"), 45_000)
    proc.stdout.setEncoding("utf8").on("data", (data: string) => {
      stdout += data
      if (mode === "start" && !killed && stdout.split("\n").includes(MARKER)) {
        killed = true
        proc.kill("SIGKILL")
      }
    })
    proc.stderr.setEncoding("utf8").on("data", (data: string) => (stderr += data))
    proc.on("exit", (code, signal) => {
      clearTimeout(timer)
      if (mode === "start") {
        return killed && signal === "SIGKILL" ? resolve(undefined) : reject(new Error(`start exited (${code ?? signal})\n${stdout}\n${stderr}`))
      }
      const line = stdout.split("\n").find((l) => l.startsWith(RESULT))
      if (code === 0 && line !== undefined) resolve(JSON.parse(line.slice(RESULT.length)) as CompactionResult)
      else reject(new Error(`${mode} exited (${code ?? signal})\n${stdout}\n${stderr}`))
    })
  })

/** Operation ids numbered by first appearance, so two runs' conversations compare. */
const normalized = (transcript: CompactionResult["transcript"]) => {
  const ids = new Map<string, string>()
  return JSON.parse(JSON.stringify(transcript).replace(/op_[0-9A-Z]{26}/g, (id) => {
    if (!ids.has(id)) ids.set(id, `op#${ids.size + 1}`)
    return ids.get(id)!
  }))
}

const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0) : [])

describe("compaction across a crash (SIGKILL inside the summary call, then a fresh process on the same SQLite file)", () => {
  it("the resumed turn summarizes again and ends with the conversation of a turn never interrupted", async () => {
    const crashed = mkdtempSync(join(tmpdir(), "troupe-compaction-crash-"))
    const clean = mkdtempSync(join(tmpdir(), "troupe-compaction-clean-"))
    const [reference] = await Promise.all([
      run(join(clean, "troupe.db"), "clean", clean),
      run(join(crashed, "troupe.db"), "start", crashed)
    ])
    const resumed = await run(join(crashed, "troupe.db"), "resume", crashed)
    assert.isDefined(reference)
    assert.isDefined(resumed)
    assert.strictEqual(resumed!.output, "read back")
    assert.deepStrictEqual(lines(join(clean, "summary-calls")), ["clean"])
    assert.deepStrictEqual(lines(join(crashed, "summary-calls")), ["start", "resume"], "cut off once, made again once")
    // The killed call left nothing: one summary operation and one summary record, as in the clean run.
    assert.strictEqual(resumed!.summaryOperations, 1)
    assert.deepStrictEqual(resumed!.compactions, reference!.compactions)
    assert.include(resumed!.compactions, "summary")
    assert.deepStrictEqual(normalized(resumed!.transcript), normalized(reference!.transcript))
    assert.isTrue(resumed!.transcript[0]!.content.startsWith("<conversation_summary>"))
  }, 90_000)
})
