/**
 * The inspector's page as bytes: `index.html`, `app.js` and `app.css`, each
 * with its gzip form and an ETag, held in memory once made.
 *
 * Where they come from (no network either way):
 * - an installed package ships them prebuilt in `dist/inspector/assets/`
 *   (`npm run build` runs `Build`, which bundles `page/` with esbuild);
 * - a source checkout run through tsx (`bin/troupe.mjs` when `dist/` is
 *   stale) has `page/` beside this module: it is bundled in memory with
 *   esbuild (a devDependency) the first time the page is asked for, about a
 *   tenth of a second, so what is served is always what `page/` says.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { gzipSync } from "node:zlib"
import { InspectorUnavailable } from "../schema/Errors.js"

/** One file of the page. */
export interface Asset {
  readonly contentType: string
  readonly body: Uint8Array
  readonly gzip: Uint8Array
  readonly etag: string
}

/** The page's files by name (`index.html`, `app.js`, `app.css`). */
export type Assets = ReadonlyMap<string, Asset>

/** The names of the files and their types. */
export const files = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8"
} as const

/** A file's bytes as an asset. */
export const asset = (name: keyof typeof files, body: Uint8Array): Asset => ({
  contentType: files[name],
  body,
  gzip: gzipSync(body, { level: 9 }),
  etag: `"${createHash("sha256").update(body).digest("hex").slice(0, 24)}"`
})

// Both are found from this module's URL by way of `../inspector/`: in a source checkout this
// module is src/inspector/Assets.ts, in a package it is bundled into a file one folder below
// dist/ (dist/chunks/, dist/cli/, dist/inspector/: scripts/build.mjs).
/** The page's sources, beside this module in a source checkout. */
export const pageDir = new URL("../inspector/page/", import.meta.url)
/** The prebuilt files: `dist/inspector/assets/` in a package. */
export const builtDir = new URL("../inspector/assets/", import.meta.url)

/** Bundles `page/` with esbuild into the three files (in memory). */
export const bundle = (dir: URL = pageDir): Effect.Effect<Map<keyof typeof files, Uint8Array>, InspectorUnavailable> =>
  Effect.tryPromise({
    try: async () => {
      const esbuild = await import("esbuild")
      const result = await esbuild.build({
        entryPoints: { app: new URL("Main.ts", dir).pathname },
        bundle: true,
        format: "esm",
        target: "es2022",
        minify: true,
        write: false,
        outdir: "/inspector",
        legalComments: "none",
        logLevel: "silent"
      })
      const out = new Map<keyof typeof files, Uint8Array>()
      for (const file of result.outputFiles) out.set(file.path.endsWith(".css") ? "app.css" : "app.js", file.contents)
      out.set("index.html", readFileSync(new URL("index.html", dir)))
      return out
    },
    catch: (error) => new InspectorUnavailable({ reason: `bundling ${dir.pathname} failed: ${String((error as Error)?.message ?? error).slice(0, 300)}` })
  })

const readBuilt = Effect.try({
  try: () => {
    const out = new Map<keyof typeof files, Uint8Array>()
    for (const name of Object.keys(files) as Array<keyof typeof files>) out.set(name, readFileSync(new URL(name, builtDir)))
    return out
  },
  catch: (error) => new InspectorUnavailable({ reason: `reading ${builtDir.pathname} failed: ${String((error as Error)?.message ?? error)}` })
})

/** Makes the assets: from the sources when they are here, else the prebuilt files. */
export const make: Effect.Effect<Assets, InspectorUnavailable> = Effect.gen(function*() {
  const raw = existsSync(new URL("Main.ts", pageDir))
    ? yield* bundle()
    : existsSync(builtDir)
    ? yield* readBuilt
    : yield* Effect.fail(new InspectorUnavailable({ reason: `no prebuilt page in ${builtDir.pathname} and no sources to bundle (run \`npm run build\`)` }))
  const out = new Map<string, Asset>()
  for (const [name, body] of raw) out.set(name, asset(name, body))
  return out
})

