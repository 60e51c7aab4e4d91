#!/usr/bin/env node
// The `troupe` program (src/cli/Main.ts), run in this process (no child), so that a signal sent to
// this process (by a shell, npx, systemd or docker) is the program's own.
//
// - An installed package has dist/ and no src/: plain node runs dist/cli/Start.js (which prints the help
//   the build printed ahead, or runs the program, dist/cli/Main.js).
// - A source checkout (`npm ci` compiles dist/ through `prepare`) runs dist/ while it is at least
//   as new as every file under src/; otherwise (no dist/, or a source edited since the build) it
//   runs the sources through tsx, a devDependency, so what runs is always what src/ says.
import { existsSync, readdirSync, statSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const built = `${root}dist/cli/Start.js`
const sources = `${root}src`

/** The latest modification time of the files under `dir`. */
const newest = (dir) => {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

const hasBuild = existsSync(built)
const fresh = hasBuild && (!existsSync(sources) || statSync(built).mtimeMs >= newest(sources))
if (!fresh) {
  try {
    const { register } = await import("tsx/esm/api")
    register()
  } catch {
    process.stderr.write(
      `troupe: ${hasBuild ? "dist/ is older than src/" : "dist/ is not built"} and tsx is not installed — ` +
        `run \`npm run build\` (or \`npm ci\`, which builds dist/) in ${root}\n`
    )
    process.exit(70)
  }
}
const { runMain } = await import(fresh ? built : "../src/cli/Main.ts")
runMain(process.argv)
