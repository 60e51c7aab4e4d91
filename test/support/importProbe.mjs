// Run by test/Startup.test.ts as `node --import tsx importProbe.mjs OUT`: imports troupe/schema,
// troupe/client and the package root, then runs `troupe --help` and `troupe run "hello"` in this
// process, and writes to OUT.json what had been resolved after each step (cumulative).
import { readFileSync, writeFileSync } from "node:fs"
import { register } from "node:module"

const out = process.argv[2]
writeFileSync(out, "")
register(new URL("./importHook.mjs", import.meta.url), { data: { out } })

const loaded = () => [...new Set(readFileSync(out, "utf8").split("\n").filter((line) => line !== ""))]
const steps = {}
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
