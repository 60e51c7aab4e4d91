/**
 * Start-up (issue 33): what a user pays before anything runs. Each figure is
 * the median of `--runs` fresh `node` processes, wall time and CPU time
 * (user + system of the whole process, every thread, read in its `exit`
 * handler through `NODE_OPTIONS=--import`):
 *
 * - a bare `node -e ""` and `import("effect")`: the floor and the yardstick;
 * - `import` of the package root, of `troupe/client` and of `troupe/schema`;
 * - `troupe --help` and `troupe run "hello"` (the scripted model, a fresh
 *   `TROUPE_HOME`, telemetry off).
 *
 * troupe runs as installed: built by the tree's own build (scripts/build.mjs)
 * into a package directory of its own (package.json, bin/, dist/, no src/, so
 * `bin/troupe.mjs` runs dist/ without looking at sources), its node_modules
 * the repository's. `--before REF` builds REF the same way from
 * `git archive` and measures both in one run, the processes of the two
 * interleaved so that the machine's load falls on both alike.
 *
 *   node bench/run.mjs startup [--runs 9] [--before main]
 *
 * Run it from the repository's root. The aims are ratios in one run: root
 * ≤ 1.3× `import("effect")`, client and schema ≤ 1.1×, `--help` ≤ 0.5 s CPU,
 * `run "hello"` ≤ 0.9 s CPU.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { arg, loadAverage, median } from "./support.js"

const repo = resolve(arg("repo", process.cwd()))
const runs = Number(arg("runs", "9"))
const before = arg("before", "")
if (!existsSync(join(repo, "package.json")) || JSON.parse(readFileSync(join(repo, "package.json"), "utf8")).name !== "troupe") {
  console.error("startup: run it from troupe's repository root (or pass --repo DIR)")
  process.exit(2)
}

const work = mkdtempSync(join(tmpdir(), "troupe-startup-"))
const cpuOut = join(work, "cpu.json")
// Loaded first in every measured process: on exit, it writes the process's CPU time (µs).
const probe = join(work, "probe.mjs")
writeFileSync(
  probe,
  `import { writeFileSync } from "node:fs"\n` +
    `process.on("exit", () => { const u = process.cpuUsage(); writeFileSync(${JSON.stringify(cpuOut)}, String(u.user + u.system)) })\n`
)

/**
 * Builds the sources under `from` into a package directory `to` laid out as an install is:
 * with the tree's own build (scripts/build.mjs: the bundled library and program), or, for a
 * tree from before it, tsc's module-per-file output.
 */
const buildPackage = (from: string, to: string) => {
  mkdirSync(to, { recursive: true })
  // tsc resolves the packages' types from the sources' directory.
  if (!existsSync(join(from, "node_modules"))) symlinkSync(join(repo, "node_modules"), join(from, "node_modules"))
  for (const entry of ["package.json", "bin"]) cpSync(join(from, entry), join(to, entry), { recursive: true })
  const script = join(from, "scripts", "build.mjs")
  execFileSync(
    process.execPath,
    existsSync(script) ? [script, "--out", join(to, "dist")] : [
      join(repo, "node_modules", "typescript", "bin", "tsc"),
      "-p",
      join(from, "tsconfig.build.json"),
      "--outDir",
      join(to, "dist"),
      "--declaration",
      "false",
      "--sourceMap",
      "false"
    ],
    { cwd: from, stdio: ["ignore", "ignore", "inherit"] }
  )
  symlinkSync(join(repo, "node_modules"), join(to, "node_modules"))
}

/** One build: its label and package directory. */
interface Build {
  readonly label: string
  readonly dir: string
}

const builds: Array<Build> = []
if (before !== "") {
  const source = join(work, "before-src")
  mkdirSync(source)
  const tar = join(work, "before.tar")
  const hasBuildScript = spawnSync("git", ["-C", repo, "cat-file", "-e", `${before}:scripts/build.mjs`]).status === 0
  execFileSync("git", ["-C", repo, "archive", "-o", tar, before, "src", "bin", "package.json", "tsconfig.json", "tsconfig.build.json", ...(hasBuildScript ? ["scripts"] : [])])
  execFileSync("tar", ["-x", "-C", source, "-f", tar])
  console.log(`building ${before} …`)
  buildPackage(source, join(work, "before"))
  builds.push({ label: before, dir: join(work, "before") })
}
console.log("building the working tree …")
buildPackage(repo, join(work, "after"))
builds.push({ label: before === "" ? "troupe" : "working tree", dir: join(work, "after") })

const importOf = (file: string) => ["--input-type=module", "-e", `await import(${JSON.stringify(pathToFileURL(file).href)})`]

/** What one process runs: node's arguments, and whether it belongs to a build. */
interface Target {
  readonly name: string
  readonly args: (build: Build) => ReadonlyArray<string>
  readonly perBuild: boolean
}

const targets: ReadonlyArray<Target> = [
  { name: "node -e \"\"", args: () => ["-e", ""], perBuild: false },
  { name: "import(\"effect\")", args: () => ["--input-type=module", "-e", "await import(\"effect\")"], perBuild: false },
  { name: "import root", args: (b) => importOf(join(b.dir, "dist", "index.js")), perBuild: true },
  { name: "import troupe/client", args: (b) => importOf(join(b.dir, "dist", "client", "index.js")), perBuild: true },
  { name: "import troupe/schema", args: (b) => importOf(join(b.dir, "dist", "schema", "index.js")), perBuild: true },
  { name: "troupe --help", args: (b) => [join(b.dir, "bin", "troupe.mjs"), "--help"], perBuild: true },
  { name: "troupe run \"hello\"", args: (b) => [join(b.dir, "bin", "troupe.mjs"), "run", "hello"], perBuild: true }
]

/** Runs one fresh process; its wall and CPU time in ms. */
const measure = (args: ReadonlyArray<string>, cwd: string): { wall: number; cpu: number } => {
  rmSync(cpuOut, { force: true })
  const home = mkdtempSync(join(work, "home-"))
  const started = process.hrtime.bigint()
  const result = spawnSync(process.execPath, args, {
    cwd,
    encoding: "utf8",
    env: {
      ...process.env,
      NODE_OPTIONS: `--import ${pathToFileURL(probe).href}`,
      TROUPE_HOME: home,
      TROUPE_TELEMETRY_ENABLED: "false",
      NO_COLOR: "1"
    }
  })
  const wall = Number(process.hrtime.bigint() - started) / 1e6
  rmSync(home, { recursive: true, force: true })
  if (result.status !== 0) throw new Error(`node ${args.join(" ")} exited ${result.status}: ${result.stderr}`)
  return { wall, cpu: Number(readFileSync(cpuOut, "utf8")) / 1000 }
}

/** The samples of each row, by row name. */
const samples = new Map<string, { wall: Array<number>; cpu: Array<number> }>()
const rows: Array<{ readonly row: string; readonly args: ReadonlyArray<string>; readonly cwd: string }> = []
for (const target of targets) {
  if (!target.perBuild) rows.push({ row: target.name, args: target.args(builds[0]!), cwd: repo })
  else for (const build of builds) rows.push({ row: `${target.name} (${build.label})`, args: target.args(build), cwd: build.dir })
}
console.log(`load before: ${loadAverage()}`)
// Round-robin: each round runs every row once, so a change of load falls on all rows alike.
for (let round = 0; round < runs + 1; round++) {
  for (const { args, cwd, row } of rows) {
    const { cpu, wall } = measure(args, cwd)
    // The first round warms the file system cache and is not counted.
    if (round === 0) continue
    const entry = samples.get(row) ?? { wall: [], cpu: [] }
    entry.wall.push(wall)
    entry.cpu.push(cpu)
    samples.set(row, entry)
  }
}
console.log(`load after: ${loadAverage()}; ${runs} processes per row, medians`)

const effect = samples.get("import(\"effect\")")!
const effectCpu = median(effect.cpu)
const effectWall = median(effect.wall)
console.log(`| | wall ms | CPU ms | wall ÷ import("effect") | CPU ÷ import("effect") |`)
console.log(`|---|---:|---:|---:|---:|`)
for (const { row } of rows) {
  const { cpu, wall } = samples.get(row)!
  const w = median(wall)
  const c = median(cpu)
  console.log(`| ${row} | ${w.toFixed(0)} | ${c.toFixed(0)} | ${(w / effectWall).toFixed(2)}× | ${(c / effectCpu).toFixed(2)}× |`)
}
rmSync(work, { recursive: true, force: true })
