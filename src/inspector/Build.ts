/**
 * The build step of the inspector's page (`npm run build`: scripts/build.mjs): bundles
 * `src/inspector/page/` with esbuild into `dist/inspector/assets/`, which an
 * installed package serves (`Assets`). Prints the files and their sizes.
 *
 *   node --import tsx src/inspector/Build.ts [SOURCES_DIR OUT_DIR]
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { pathToFileURL } from "node:url"
import { gzipSync } from "node:zlib"
import * as Assets from "./Assets.js"

/** Bundles the page from `sources` into `out`. */
export const build = (sources: URL, out: URL) =>
  Effect.map(Assets.bundle(sources), (files) => {
    mkdirSync(out, { recursive: true })
    const sizes: Array<string> = []
    for (const [name, body] of files) {
      writeFileSync(new URL(name, out), body)
      sizes.push(`${name} ${body.length} B (${gzipSync(body, { level: 9 }).length} B gzipped)`)
    }
    return sizes
  })

// Run as a script (through tsx, by scripts/build.mjs): the page's sources by default are `Assets.pageDir`.
if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].split("/").pop()!)) {
  const [sources, out] = process.argv.slice(2).map((dir) => pathToFileURL(dir.endsWith("/") ? dir : `${dir}/`))
  Effect.runPromise(build(sources ?? Assets.pageDir, out ?? Assets.builtDir)).then(
    (sizes) => process.stdout.write(`inspector: ${sizes.join(", ")}\n`),
    (error) => {
      process.stderr.write(`inspector: ${String(error?.message ?? error)}\n`)
      process.exit(1)
    }
  )
}
