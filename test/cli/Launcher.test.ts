/**
 * `bin/troupe.mjs` runs the compiled program in dist/ only while it is at
 * least as new as every file under src/; otherwise (no dist/, or a source
 * edited since the build) it runs the sources through tsx; an installed
 * package (no src/) always runs dist/. Checked on a copy
 * of the launcher next to a src/ and a dist/ whose `runMain` say which ran.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const repo = fileURLToPath(new URL("../..", import.meta.url))

const layout = () => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-launcher-"))
  mkdirSync(join(dir, "bin"))
  mkdirSync(join(dir, "src", "cli", "deep"), { recursive: true })
  copyFileSync(join(repo, "bin", "troupe.mjs"), join(dir, "bin", "troupe.mjs"))
  symlinkSync(join(repo, "node_modules"), join(dir, "node_modules"))
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }))
  writeFileSync(
    join(dir, "src", "cli", "Main.ts"),
    "export const runMain = (argv: ReadonlyArray<string>): void => console.log(`src ${argv.slice(2).join(\" \")}`)\n"
  )
  writeFileSync(join(dir, "src", "cli", "deep", "Other.ts"), "export const other = 1\n")
  return dir
}

const build = (dir: string, at: Date) => {
  mkdirSync(join(dir, "dist", "cli"), { recursive: true })
  // What the launcher runs of a build: Start (which loads Main for all but the help forms, decision 0050).
  const main = join(dir, "dist", "cli", "Start.js")
  writeFileSync(main, "export const runMain = (argv) => console.log(`dist ${argv.slice(2).join(\" \")}`)\n")
  utimesSync(main, at, at)
}

const run = (dir: string) => {
  const result = spawnSync(process.execPath, [join(dir, "bin", "troupe.mjs"), "a", "b"], { encoding: "utf8" })
  assert.strictEqual(result.status, 0, result.stderr)
  return result.stdout.trim()
}

describe("bin/troupe.mjs", () => {
  it("runs dist/ when it is fresh, the sources through tsx when dist/ is missing or older than a source", () => {
    const dir = layout()
    try {
      const past = new Date(Date.now() - 60_000)
      for (const file of [join(dir, "src", "cli", "Main.ts"), join(dir, "src", "cli", "deep", "Other.ts")]) {
        utimesSync(file, past, past)
      }
      assert.strictEqual(run(dir), "src a b")
      build(dir, new Date())
      assert.strictEqual(run(dir), "dist a b")
      // A source edited after the build, however deep: the sources run.
      utimesSync(join(dir, "src", "cli", "deep", "Other.ts"), new Date(Date.now() + 1_000), new Date(Date.now() + 1_000))
      assert.strictEqual(run(dir), "src a b")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 30_000)

  it("an installed package (dist/, no src/) runs dist/; a checkout without dist/ or tsx says how to build", () => {
    const dir = layout()
    try {
      rmSync(join(dir, "src"), { recursive: true })
      build(dir, new Date(Date.now() - 60_000))
      assert.strictEqual(run(dir), "dist a b")

      const bare = layout()
      try {
        rmSync(join(bare, "node_modules"))
        const result = spawnSync(process.execPath, [join(bare, "bin", "troupe.mjs")], { encoding: "utf8" })
        assert.strictEqual(result.status, 70)
        assert.match(result.stderr, /^troupe: dist\/ is not built and tsx is not installed — run `npm run build`[^\n]*\n$/)
      } finally {
        rmSync(bare, { recursive: true, force: true })
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 30_000)
})
