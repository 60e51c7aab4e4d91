/**
 * Built-in workspace tools on a tree of 100,000 files (created once, kept in
 * the directory given, else a temporary one): find_files (the walk through the
 * port), search_files with ripgrep and with the built-in walk, read_file of a
 * 100 MB file's last lines; and `bash` start to result beside a bare
 * child_process spawn of the same command (`sh -c true`, waited for until its
 * pipes close). Prints the median of each (`--runs N`, default 5; the
 * built-in search, slow by design, runs 3 times at most).
 *
 *   node bench/run.mjs workspace [DIR] [--runs N] [--only find,search,read,bash]
 */
import { Context, Effect, Layer } from "effect"
import { execFileSync, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import * as LocalWorkspace from "../src/layers/LocalWorkspace.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Builtins from "../src/tools/Builtins.js"

const argv = process.argv.slice(2)
const flag = (name: string) => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? undefined : argv.splice(at, 2)[1]
}
const runs = Number(flag("runs") ?? 5)
const only = flag("only")?.split(",")
const wanted = (name: string) => only === undefined || only.includes(name)
const root = argv[0] ?? mkdtempSync(join(tmpdir(), "bench-ws-"))
mkdirSync(root, { recursive: true })

if ((wanted("find") || wanted("search")) && !existsSync(join(root, "d99"))) {
  execFileSync("sh", ["-c", `cd ${root} && for d in $(seq -f %02g 0 99); do mkdir -p d$d; (cd d$d && seq -w 0 999 | sed 's/^/f/;s/$/.txt/' | xargs touch); done; echo 'needle One' > d07/f123.txt`])
}
if (wanted("read") && !existsSync(join(root, "big.log"))) {
  const line = "x".repeat(99) + "\n"
  writeFileSync(join(root, "big.log"), line.repeat(1_048_576))
}

const ctx = { sessionId: "s", turnId: "t", operationId: "o", callId: "c", principal: {}, agentPath: [] } as never
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const load = () => loadavg()[0]!.toFixed(1)

const time = async (n: number, once: () => Promise<unknown>) => {
  const times: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await once()
    times.push(performance.now() - t)
  }
  return median(times)
}

const toolsOn = (ripgrep: string | false | undefined) =>
  Builtins.layerWith({ ask: false }).pipe(Layer.provide(LocalWorkspace.layerWith({ root, ripgrep })))

const runTool = (layer: Layer.Layer<Toolkit.Toolkit>, name: string, args: unknown) =>
  Effect.runPromise(Effect.provide(Effect.flatMap(Toolkit.Toolkit, (k) => k.get(name)!.run(JSON.stringify(args), ctx)), layer))

const report = (name: string, ms: number, extra = "") => console.log(`${name}: median ${ms.toFixed(1)} ms${extra} (load ${load()})`)

const withRg = toolsOn(undefined)
if (wanted("find")) report("find_files **/*.txt (100,000 files)", await time(runs, () => runTool(withRg, "find_files", { pattern: "**/*.txt" })))
if (wanted("search")) {
  report("search_files ripgrep", await time(runs, () => runTool(withRg, "search_files", { pattern: "needle" })))
  report("search_files built-in walk", await time(Math.min(runs, 3), () => runTool(toolsOn(false), "search_files", { pattern: "needle" })))
}
if (wanted("read")) report("read_file last 20 lines of 100 MB", await time(runs, () => runTool(withRg, "read_file", { path: "big.log", startLine: -20 })))

if (wanted("bash")) {
  const bare = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn("/bin/sh", ["-c", "true"], { cwd: root, stdio: "pipe" })
      child.on("error", reject)
      child.on("close", () => resolve())
    })
  // Built once, as a host does: each call then spawns, collects and waits.
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const toolkit = Context.get(yield* Layer.build(withRg), Toolkit.Toolkit)
    const bash = toolkit.get("bash")!
    const call = () => Effect.runPromise(bash.run(JSON.stringify({ command: "true" }), ctx))
    // Interleaved rounds, so load changes hit both alike.
    const spawns: Array<number> = []
    const calls: Array<number> = []
    for (let round = 0; round < 5; round++) {
      spawns.push(yield* Effect.promise(() => time(Math.max(runs, 20), bare)))
      calls.push(yield* Effect.promise(() => time(Math.max(runs, 20), call)))
    }
    const [s, c] = [median(spawns), median(calls)]
    report("bare child_process spawn of sh -c true", s)
    report("bash tool, start to result", c, `: +${(c - s).toFixed(1)} ms, ${(c / s).toFixed(2)}× the bare spawn`)
  })))
}
