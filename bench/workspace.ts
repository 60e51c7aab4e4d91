/**
 * Built-in workspace tools on a tree of 100,000 files (created once, kept in
 * $BENCH_TREE or a temporary directory): find_files and search_files with
 * ripgrep and with the built-in walk, read_file of a 100 MB file's last lines.
 * Prints the median of 5 runs of each. `npx tsx bench/workspace.ts [DIR]`.
 */
import { Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as LocalWorkspace from "../src/layers/LocalWorkspace.js"
import * as Toolkit from "../src/services/Toolkit.js"
import * as Builtins from "../src/tools/Builtins.js"

const root = process.argv[2] ?? mkdtempSync(join(tmpdir(), "bench-ws-"))
if (!existsSync(join(root, "d99"))) {
  execFileSync("sh", ["-c", `cd ${root} && for d in $(seq -w 0 99); do mkdir -p d$d; (cd d$d && seq -w 0 999 | sed 's/^/f/;s/$/.txt/' | xargs touch); done; echo 'needle One' > d07/f123.txt`])
}
if (!existsSync(join(root, "big.log"))) {
  const line = "x".repeat(99) + "\n"
  writeFileSync(join(root, "big.log"), line.repeat(1_048_576))
}
const ctx = { sessionId: "s", turnId: "t", operationId: "o", callId: "c", principal: {}, agentPath: [] } as never
const median = (xs: Array<number>) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (const rg of [undefined, false] as const) {
  const layer = Builtins.layer.pipe(Layer.provide(LocalWorkspace.layerWith({ root, ripgrep: rg })))
  const cases = [["find_files", { pattern: "**/*.txt" }], ["search_files", { pattern: "needle" }], ["read_file", { path: "big.log", startLine: -20 }]] as const
  for (const [name, args] of cases) {
    if (rg === false && name === "read_file") continue
    const times: Array<number> = []
    for (let i = 0; i < 5; i++) {
      const t = performance.now()
      await Effect.runPromise(Effect.provide(Effect.flatMap(Toolkit.Toolkit, (k) => k.get(name)!.run(JSON.stringify(args), ctx)), layer))
      times.push(performance.now() - t)
    }
    console.log(`${name} ${rg === false ? "builtin" : "ripgrep"}: median ${median(times).toFixed(1)} ms`)
  }
}
