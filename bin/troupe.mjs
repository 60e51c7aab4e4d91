#!/usr/bin/env node
// The `troupe` program (src/cli/Main.ts). `npm ci` compiles it to dist/ (the `prepare` script):
// that copy starts in about half the time. When dist/ is missing, or any source file is newer
// than it (a checkout being worked on), the sources run through tsx (a runtime dependency)
// instead, so what runs is always what src/ says.
import { existsSync, readdirSync, statSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const built = `${root}dist/cli/Main.js`

/** The latest modification time of the files under `dir`. */
const newest = (dir) => {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

const fresh = existsSync(built) && statSync(built).mtimeMs >= newest(`${root}src`)
if (!fresh) {
  const { register } = await import("tsx/esm/api")
  register()
}
const { runMain } = await import(fresh ? built : "../src/cli/Main.ts")
runMain(process.argv)
