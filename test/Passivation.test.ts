/**
 * A passivated actor gives back everything it held (decision 0014): a child
 * process (test/support/passivationMemory.ts, with `--expose-gc`) runs turns
 * with half-MiB messages on a SQLite file and reports its heap after GC. The
 * live actor holds the conversation (it is what every model call is sent);
 * once it passivated the heap is back near its baseline. A per-turn
 * reference kept by the host, the live hub, a waiter or a fiber left behind
 * would keep those messages, far above the margin.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Figures, MEMORY, TEXT_SIZE, TURNS } from "./support/passivationMemory.js"

const script = fileURLToPath(new URL("./support/passivationMemory.ts", import.meta.url))

const measure = (file: string) =>
  new Promise<Figures>((resolve, reject) => {
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", script, file], {
      env: { ...process.env, TROUPE_TELEMETRY_ENABLED: "false" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    const timer = setTimeout(() => child.kill("SIGKILL"), 100_000)
    child.stdout.setEncoding("utf8").on("data", (data: string) => (stdout += data))
    child.stderr.setEncoding("utf8").on("data", (data: string) => (stderr += data))
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      const line = stdout.split("\n").find((l) => l.startsWith(MEMORY))
      if (code === 0 && line !== undefined) resolve(JSON.parse(line.slice(MEMORY.length)) as Figures)
      else reject(new Error(`exited (${code ?? signal})\nstdout: ${stdout}\nstderr: ${stderr}`))
    })
  })

describe("Passivation", () => {
  it("a passivated actor releases its conversation: the heap after GC is back near its baseline", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-passivation-"))
    try {
      const { baseline, live, passivated } = await measure(join(dir, "troupe.db"))
      const conversation = 2 * TURNS * TEXT_SIZE
      const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
      const seen = `baseline ${mib(baseline)}, live ${mib(live)}, passivated ${mib(passivated)}`
      // The measurement sees what the live actor holds: at least most of its conversation.
      assert.isAbove(live - baseline, conversation * 0.75, seen)
      // Passivated, it holds none of it: the margin is a fifth of the conversation.
      assert.isBelow(passivated - baseline, conversation * 0.2, seen)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
