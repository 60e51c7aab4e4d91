// Run by test/Startup.test.ts as `node --import tsx importProbe.mjs OUT`: imports troupe/schema,
// troupe/client and the package root, then runs `troupe --help` and `troupe run "hello"` in this
// process, and writes to OUT.json what had been resolved after each step (cumulative). With
// `help` after OUT it runs `troupe --help` alone.
import { readFileSync, writeFileSync } from "node:fs"
import { createRequire, register } from "node:module"
import { pathToFileURL } from "node:url"

const out = process.argv[2]
writeFileSync(out, "")
register(new URL("./importHook.mjs", import.meta.url), { data: { out } })

// What the hook saw, and what CommonJS loaded (a package's own `require`s do not pass the ESM hook on Node 20).
const cjs = createRequire(import.meta.url).cache
const loaded = () => [
  ...new Set([...readFileSync(out, "utf8").split("\n").filter((line) => line !== ""), ...Object.keys(cjs).map((file) => pathToFileURL(file).href)])
]
const steps = {}
if (process.argv[3] === "help") {
  // `troupe --help` alone, in a process of its own.
  const Main = await import("../../src/cli/Main.ts")
  const code = await (await import("effect")).Effect.runPromise(Main.main(["node", "troupe", "--help"]))
  steps.help = loaded()
  writeFileSync(`${out}.json`, JSON.stringify({ steps, codes: [code] }))
  process.exit(0)
}
await import("../../src/schema/index.ts")
steps.schema = loaded()
await import("../../src/client/index.ts")
steps.client = loaded()
await import("../../src/index.ts")
steps.root = loaded()
const Main = await import("../../src/cli/Main.ts")
const { Effect } = await import("effect")
const codes = []
for (const args of [["--help"], ["run", "hello"]]) {
  codes.push(await Effect.runPromise(Main.main(["node", "troupe", ...args])))
}
steps.cli = loaded()
writeFileSync(`${out}.json`, JSON.stringify({ steps, codes }))
process.exit(0)
