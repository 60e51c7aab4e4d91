/**
 * Runs a bench on compiled code, as an installed troupe runs. `node bench/run.mjs X`
 * measures more than troupe: tsx compiles with esbuild's keep-names, which wraps
 * every function the code creates at run time in a `__name` call, and that costs
 * about a third more CPU and twice the heap on a short session (docs/benchmarks.md,
 * "Benches on compiled code"). This script bundles `bench/<name>.ts` with the
 * sources it imports (packages stay external) into `bench/.build/<name>.mjs` and
 * runs it in this process, so node flags given before it apply:
 *
 *   node bench/run.mjs fanout --only memory
 *   node --expose-gc bench/run.mjs transcript --messages 100000
 */
import { build } from "esbuild"
import { mkdirSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const [name, ...rest] = process.argv.slice(2)
if (name === undefined || name.startsWith("-")) {
  console.error("usage: node [node flags] bench/run.mjs <bench name, e.g. fanout> [bench arguments]")
  process.exit(2)
}
const entry = resolve(here, name.endsWith(".ts") ? name.replace(/^bench\//, "") : `${name}.ts`)
const outDir = join(here, ".build")
mkdirSync(outDir, { recursive: true })
const outfile = join(outDir, entry.slice(here.length + 1).replace(/\.ts$/, ".mjs"))
const { metafile } = await build({
  entryPoints: [entry],
  metafile: true,
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  keepNames: false,
  logLevel: "warning"
})
// A module that finds a file by its own URL (`new URL(…, import.meta.url)`) would find the bundle
// instead (bench/failover.ts starts its workers from test/support/poolWorker.ts that way): such a
// bench runs under tsx. A package required from the module's URL resolves from the bundle alike.
const byOwnUrl = Object.keys(metafile.inputs)
  .map((input) => resolve(input))
  .filter((input) => input !== entry && /new URL\([^)]*import\.meta\.url/.test(readFileSync(input, "utf8")))
if (byOwnUrl.length > 0) {
  console.error(`${name}: ${byOwnUrl.join(", ")} use import.meta.url, which a bundle does not keep; run npx tsx ${entry}`)
  process.exit(2)
}
// The bench reads its own arguments from process.argv, as when run directly.
process.argv = [process.argv[0], outfile, ...rest]
await import(pathToFileURL(outfile).href)
