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
import { mkdirSync } from "node:fs"
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
await build({
  entryPoints: [entry],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  keepNames: false,
  logLevel: "warning"
})
// The bench reads its own arguments from process.argv, as when run directly.
process.argv = [process.argv[0], outfile, ...rest]
await import(pathToFileURL(outfile).href)
