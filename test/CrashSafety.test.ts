/**
 * Crash safety with real processes (docs/agent-loop.md, "Crash safety"): a
 * turn runs in a child process on a SQLite file (test/support/crashTurn.ts),
 * is killed with SIGKILL at a chosen point, and resumes in a fresh process on
 * the same file. The tool's side effects and the model's calls are counted in
 * files, so "not run again" is observed outside the runtime.
 *
 * The cases run concurrently, each in its own directory.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import {
  type CrashPoint,
  FINAL,
  marker,
  type ModelCallLine,
  RESULT,
  type ResumeResult,
  SECOND
} from "./support/crashTurn.js"

const script = fileURLToPath(new URL("./support/crashTurn.ts", import.meta.url))
type Idempotency = "supported" | "unsupported" | "unknown"

interface Case {
  readonly dir: string
  readonly db: string
  readonly point: CrashPoint
  readonly idempotency: Idempotency
}

const makeCase = (point: CrashPoint, idempotency: Idempotency): Case => {
  const dir = mkdtempSync(join(tmpdir(), `troupe-crash-${point}-`))
  return { dir, db: join(dir, "troupe.db"), point, idempotency }
}

const child = (c: Case, mode: "start" | "resume") =>
  spawn(process.execPath, ["--import", "tsx", script, c.db, mode, c.point, c.idempotency, c.dir], {
    env: { ...process.env, TROUPE_TELEMETRY_ENABLED: "false" },
    stdio: ["ignore", "pipe", "pipe"]
  })

/** Starts the turn and SIGKILLs the process as soon as it reports its crash point. */
const startAndKill = (c: Case) =>
  new Promise<void>((resolve, reject) => {
    const proc = child(c, "start")
    let stdout = ""
    let stderr = ""
    let killed = false
    const timer = setTimeout(() => {
      proc.kill("SIGKILL")
      reject(new Error(`start never reached ${c.point}\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, 30_000)
    proc.stdout.setEncoding("utf8").on("data", (data: string) => {
      stdout += data
      if (!killed && stdout.split("\n").includes(marker(c.point))) {
        killed = true
        proc.kill("SIGKILL")
      }
    })
    proc.stderr.setEncoding("utf8").on("data", (data: string) => (stderr += data))
    proc.on("exit", (code, signal) => {
      clearTimeout(timer)
      if (killed && signal === "SIGKILL") resolve()
      else reject(new Error(`start exited (${code ?? signal}) before ${c.point}\nstdout: ${stdout}\nstderr: ${stderr}`))
    })
  })

/** Runs a fresh host on the same file until the turn ends; returns what it saw. */
const resume = (c: Case) =>
  new Promise<ResumeResult>((resolve, reject) => {
    const proc = child(c, "resume")
    let stdout = ""
    let stderr = ""
    const timer = setTimeout(() => proc.kill("SIGKILL"), 40_000)
    proc.stdout.setEncoding("utf8").on("data", (data: string) => (stdout += data))
    proc.stderr.setEncoding("utf8").on("data", (data: string) => (stderr += data))
    proc.on("exit", (code, signal) => {
      clearTimeout(timer)
      const line = stdout.split("\n").find((l) => l.startsWith(RESULT))
      if (code === 0 && line !== undefined) resolve(JSON.parse(line.slice(RESULT.length)) as ResumeResult)
      else reject(new Error(`resume exited (${code ?? signal})\nstdout: ${stdout}\nstderr: ${stderr}`))
    })
  })

const lines = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0) : []

/** Kills at the case's point, resumes, and returns the result with the counts. */
const crashAndResume = async (c: Case) => {
  const started = Date.now()
  await startAndKill(c)
  const killedAt = Date.now()
  const result = await resume(c)
  const sideEffects = lines(join(c.dir, "side-effects")).map((l) => Number(l.split(" ")[0]))
  const modelCalls = lines(join(c.dir, "model-calls")).map((l) => JSON.parse(l) as ModelCallLine)
  console.log(`${c.point}/${c.idempotency}: killed after ${killedAt - started} ms, resumed in ${Date.now() - killedAt} ms`)
  return { result, sideEffects, modelCalls }
}

/** The model calls of one mode, as their numbers in the turn. */
const calls = (modelCalls: ReadonlyArray<ModelCallLine>, mode: "start" | "resume") =>
  modelCalls.filter((l) => l.mode === mode).map((l) => l.call)

const toolTags = (result: ResumeResult) => result.tool.map((t) => t.tag)

const UNKNOWN = "the outcome of this call is unknown"

const assertCompleted = (result: ResumeResult) => {
  assert.strictEqual(result.outcome, "completed", result.error)
  assert.strictEqual(result.output, FINAL)
  assert.strictEqual(result.tags[0], "turn_started")
  assert.strictEqual(result.tags.at(-1), "turn_ended")
  assert.strictEqual(result.tags.filter((t) => t === "turn_ended").length, 1)
}

const timeout = 60_000

describe.concurrent("crash safety across processes (SIGKILL, then a fresh process on the same SQLite file)", () => {
  it("killed inside the first model call: the call is made again, the tool runs once", async () => {
    const { modelCalls, result, sideEffects } = await crashAndResume(makeCase("model-1", "unsupported"))
    assertCompleted(result)
    assert.deepStrictEqual(calls(modelCalls, "start"), [1])
    assert.deepStrictEqual(calls(modelCalls, "resume"), [1, 2], "call 1 had no receipt: it is made again")
    assert.strictEqual(sideEffects.length, 1)
    assert.deepStrictEqual(toolTags(result), ["operation_started", "operation_completed"])
    assert.deepStrictEqual(result.tags, [
      "turn_started",
      "operation_started",
      "operation_completed",
      "operation_started",
      "operation_completed",
      "operation_started",
      "operation_completed",
      "turn_ended"
    ])
  }, timeout)

  for (const idempotency of ["unsupported", "unknown"] as const) {
    it(`killed inside a tool body (idempotency ${idempotency}): not run again, its outcome is unknown`, async () => {
      const { modelCalls, result, sideEffects } = await crashAndResume(makeCase("tool-body", idempotency))
      assertCompleted(result)
      assert.strictEqual(sideEffects.length, 1, "the tool must not run again")
      assert.deepStrictEqual(toolTags(result), ["operation_started", "operation_unknown"])
      assert.deepStrictEqual(calls(modelCalls, "start"), [1])
      assert.deepStrictEqual(calls(modelCalls, "resume"), [2], "call 1's receipt is reused")
      const second = modelCalls.find((l) => l.mode === "resume" && l.call === 2)!
      assert.strictEqual(second.tools.length, 1)
      assert.include(second.tools[0], UNKNOWN)
      assert.strictEqual(JSON.parse(second.tools[0]!).error.startsWith(UNKNOWN), true)
    }, timeout)
  }

  it("killed inside a tool body (idempotency supported): run again, no unknown outcome", async () => {
    const { modelCalls, result, sideEffects } = await crashAndResume(makeCase("tool-body", "supported"))
    assertCompleted(result)
    assert.strictEqual(sideEffects.length, 2, "an idempotent tool started without a receipt runs again")
    assert.notStrictEqual(sideEffects[0], sideEffects[1], "once in each process")
    assert.deepStrictEqual(toolTags(result), ["operation_started", "operation_completed"])
    assert.notInclude(result.tags, "operation_unknown")
    assert.strictEqual(result.tool[1]!.isError, false)
    assert.deepStrictEqual(result.tool[1]!.output, { recorded: "hello" })
    assert.deepStrictEqual(calls(modelCalls, "start"), [1])
    assert.deepStrictEqual(calls(modelCalls, "resume"), [2])
    const second = modelCalls.find((l) => l.mode === "resume" && l.call === 2)!
    assert.deepStrictEqual(second.tools, [JSON.stringify({ recorded: "hello" })])
  }, timeout)

  it("killed inside the second model call: the tool's receipt and call 1's reply are reused", async () => {
    const { modelCalls, result, sideEffects } = await crashAndResume(makeCase("model-2", "unsupported"))
    assertCompleted(result)
    assert.strictEqual(sideEffects.length, 1, "the tool must not run again")
    assert.deepStrictEqual(calls(modelCalls, "start"), [1, 2])
    assert.deepStrictEqual(calls(modelCalls, "resume"), [2], "call 1 is not repeated; call 2 is made again")
    assert.deepStrictEqual(toolTags(result), ["operation_started", "operation_completed"])
    assert.notInclude(result.tags, "operation_unknown")
    // The resumed call 2 is sent the tool's recorded result, as the killed one was.
    const [killed, resumed] = modelCalls.filter((l) => l.call === 2)
    assert.deepStrictEqual(resumed!.tools, killed!.tools)
    assert.deepStrictEqual(resumed!.tools, [JSON.stringify({ recorded: "hello" })])
    // One receipt per model call: the turn's records are those of an uninterrupted turn.
    assert.strictEqual(result.tags.filter((t) => t === "operation_completed").length, 3)
    // The conversation the restarted actor rebuilt from the log is the one the killed call was sent.
    assert.deepStrictEqual(resumed!.messages, killed!.messages)
    assert.deepStrictEqual(resumed!.messages.map((m) => m.role), ["user", "assistant", "tool"])
  }, timeout)

  it("killed between turns: the next turn is sent the whole conversation the killed process had", async () => {
    const { modelCalls, result, sideEffects } = await crashAndResume(makeCase("between-turns", "unsupported"))
    assertCompleted(result)
    assert.strictEqual(sideEffects.length, 1)
    assert.deepStrictEqual(calls(modelCalls, "start"), [1, 2])
    assert.deepStrictEqual(calls(modelCalls, "resume"), [3])
    const before = modelCalls.find((l) => l.mode === "start" && l.call === 2)!
    const after = modelCalls.find((l) => l.mode === "resume" && l.call === 3)!
    assert.deepStrictEqual(after.messages, [
      ...before.messages,
      { role: "assistant", content: FINAL },
      { role: "user", content: SECOND }
    ])
  }, timeout)
})
