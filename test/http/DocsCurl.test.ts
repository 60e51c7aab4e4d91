/**
 * docs/http.md's curl session, run as written: its agents file and its
 * `troupe serve` line start the real program (port 7070 becomes a free one),
 * then its session blocks run in one `bash -eu -o pipefail` with the real
 * `curl` and `jq`, and what they print must be exactly the page's `#>` lines.
 * A page that drifts from the API fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { envFor, start, tempDir } from "../cli/harness.js"

const page = readFileSync(fileURLToPath(new URL("../../docs/http.md", import.meta.url)), "utf8")

/** The page's address, replaced by the daemon's. */
const DOCS_ADDRESS = "127.0.0.1:7070"

/** The code blocks marked `<!-- docs-test: NAME -->`, by name, in page order. */
const blocks = (name: string): ReadonlyArray<string> =>
  [...page.matchAll(/<!-- docs-test: (\S+) -->\n```\w*\n([\s\S]*?)```/g)].filter((m) => m[1] === name).map((m) => m[2]!)

/** Runs `script` in bash in `cwd`; its stdout, stderr and exit code. */
const bash = (script: string, cwd: string) =>
  Effect.async<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = execFile("bash", ["-eu", "-o", "pipefail", "-c", script], { cwd, timeout: 90_000 }, (error, stdout, stderr) =>
      resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })))
    return Effect.sync(() => void child.kill("SIGKILL"))
  })

describe("docs/http.md", () => {
  it.scopedLive("its curl session runs against a real daemon and prints what the page says", () =>
    Effect.gen(function*() {
      for (const tool of ["curl", "jq"]) {
        const found = yield* bash(`command -v ${tool}`, ".")
        assert.strictEqual(found.code, 0, `the docs' session needs ${tool} on the PATH`)
      }
      const [agentsFile] = blocks("agents.json")
      const [serveBlock] = blocks("serve")
      const session = blocks("session")
      assert.isString(agentsFile, "the page declares its agents file")
      assert.isString(serveBlock, "the page declares how to serve")
      assert.isAbove(session.length, 4, "the page's session blocks")

      const dir = yield* tempDir
      writeFileSync(join(dir, "agents.json"), agentsFile!)
      // The serve line as the page has it, on a free port, its agents file in the test's directory.
      const [serveLine, ...setup] = serveBlock!.trim().split("\n")
      const words = serveLine!.trim().split(/\s+/)
      assert.deepStrictEqual([words[0], words[1], words.at(-1)], ["troupe", "serve", "&"])
      const args = words.slice(1, -1).map((word) =>
        word === DOCS_ADDRESS ? "127.0.0.1:0" : word === "agents.json" ? join(dir, "agents.json") : word
      )
      const daemon = yield* start(args, envFor(join(dir, "home")))
      yield* daemon.waitFor("troupe: store ", "stderr", "90 seconds")
      const address = /listening on http:\/\/(127\.0\.0\.1:\d+)/.exec(daemon.stderr())?.[1]
      assert.isString(address, daemon.stderr())

      const script = [...setup, ...session].join("\n").replaceAll(DOCS_ADDRESS, address!)
      const run = yield* bash(script, dir)
      assert.strictEqual(run.code, 0, `the session failed\nstdout: ${run.stdout}\nstderr: ${run.stderr}\ndaemon: ${daemon.stderr()}`)
      const expected = session.flatMap((block) =>
        block.split("\n").filter((line) => line.startsWith("#> ")).map((line) => line.slice(3))
      )
      assert.isAbove(expected.length, 8)
      assert.deepStrictEqual(run.stdout.trimEnd().split("\n").map((line) => line.trimEnd()), expected)
    }), 180_000)
})
