/**
 * The inspector's figures, in a real browser (issue 30): `troupe inspect`
 * (the real program: compiled `dist/` when it is fresh, else the sources
 * through tsx; the bench says which) over a SQLite file holding `--sessions`
 * root sessions of `--turns` turns each and one session of `--long` turns,
 * all the local user's; headless Chromium (Debian's `/usr/bin/chromium`)
 * driven by playwright-core, a fresh browser context (cold cache) each round.
 *
 * - the sessions list: first contentful paint, and the first page of rows
 *   shown with their turns, tokens and pending callbacks (`troupe:list`, a
 *   performance mark the page sets once the browser painted it: `Dom.ready`);
 *   and how many requests the page made;
 * - the timeline of the long session: first paint, and its last events shown
 *   (`troupe:timeline`);
 * - the API's first page alone, from Node (`GET /v1/sessions?limit=50`);
 * - the CPU time each load cost `troupe inspect` and Chromium (all its
 *   processes, from /proc), beside what a fresh tab's navigation to a JSON
 *   answer costs: the wall times move with the machine's load, these less;
 * - the page's assets: bytes as served gzipped, and plain.
 *
 *   node bench/run.mjs inspector [--sessions 10000] [--turns 3] [--long 1000] [--rounds 7] [--file PATH]
 *
 * `--file PATH` keeps the seeded store there and reuses it on the next run
 * (seeding 10,000 sessions takes a while). Medians; the load is printed.
 */
import { Effect, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { chromium } from "playwright-core"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef } from "../src/schema/Agent.js"
import { InputId } from "../src/schema/Ids.js"
import * as Principal from "../src/schema/Principal.js"
import { arg, fillLog, loadAverage, median } from "./support.js"

const CHROMIUM = "/usr/bin/chromium"
const sessions = Number(arg("sessions", "10000"))
const turns = Number(arg("turns", "3"))
const longTurns = Number(arg("long", "1000"))
const rounds = Number(arg("rounds", "7"))
const given = arg("file", "")
const repo = process.cwd()
const agent = new Agent({ name: "bench", instructions: "answer", model: new ModelRef({ name: "scripted" }) })

/** Seeds the store: `sessions` short roots, then the long one (newest, so it heads the list). */
const seed = (file: string) =>
  Effect.gen(function*() {
    const started = Date.now()
    const inputId = InputId.make("in-bench")
    for (let i = 0; i < sessions; i++) {
      yield* fillLog(Principal.local, agent, 1 + 4 * turns, inputId)
      if ((i + 1) % 1000 === 0) process.stderr.write(`seeded ${i + 1} sessions (${((Date.now() - started) / 1000).toFixed(0)} s)\n`)
    }
    const long = yield* fillLog(Principal.local, agent, 1 + 4 * longTurns, inputId)
    return long.sessionId
  }).pipe(Effect.provide(Layer.orDie(SqliteSessionStore.layer({ filename: file }))))

/** The long session's id: the newest root, read back from a kept store. */
const longest = (url: string) =>
  fetch(`${url}v1/sessions?limit=1`).then((r) => r.json() as Promise<{ items: ReadonlyArray<{ id: string; headSeq: number }> }>)
    .then((page) => page.items[0]!)

/** Starts `troupe inspect` on the file; resolves with its address. */
const startInspect = (file: string) => {
  const proc: ChildProcess = spawn(process.execPath, [join(repo, "bin/troupe.mjs"), "inspect", "--store", `sqlite:${file}`], {
    env: { ...process.env, TROUPE_TELEMETRY_ENABLED: "false" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let err = ""
  proc.stderr!.on("data", (d) => (err += d))
  const url = new Promise<string>((resolveUrl, reject) => {
    let out = ""
    proc.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d
      const found = /^(http:\S+)$/m.exec(out)
      if (found !== null) resolveUrl(found[1]!)
    })
    proc.on("exit", (code) => reject(new Error(`troupe inspect exited ${code}: ${err}`)))
  })
  return { proc, url }
}

/** The bytes of one answer as sent (gzipped when `gzip`). */
const sentBytes = (url: string, gzip: boolean) =>
  new Promise<number>((resolveBytes, reject) => {
    request(url, { headers: gzip ? { "accept-encoding": "gzip" } : {} }, (response) => {
      let n = 0
      response.on("data", (chunk: Buffer) => (n += chunk.length))
      response.on("end", () => resolveBytes(n))
    }).on("error", reject).end()
  })

const ms = (x: number | undefined) => (x === undefined ? "—" : `${x.toFixed(0)} ms`)

/** This process's CPU time (ms), counted as /proc counts it (clock ticks), to take it out of its tree's. */
const ownCpu = (): number => {
  const stat = readFileSync("/proc/self/stat", "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
}

/**
 * CPU time (user + system, ms) of a process and its descendants, from /proc: what a page
 * load costs whatever else the machine does (the wall times move with the load).
 */
const cpuOfTree = (root: number): number => {
  const parent = new Map<number, number>()
  const ticks = new Map<number, number>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // The command name is in parentheses and may hold spaces: the fields after it are split.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      parent.set(Number(entry), Number(fields[1]))
      ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]))
    } catch {
      // gone meanwhile
    }
  }
  const inTree = (pid: number): boolean => {
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = parent.get(at)) if (at === root) return true
    return false
  }
  let total = 0
  for (const [pid, t] of ticks) if (inTree(pid)) total += t
  return (total * 1000) / 100
}

const main = async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM} (apt-get install -y chromium)`)
  const dir = given === "" ? mkdtempSync(join(tmpdir(), "troupe-bench-inspector-")) : undefined
  const file = given === "" ? join(dir!, "store.db") : resolve(given)
  let longId: string | undefined
  if (!existsSync(file)) {
    process.stderr.write(`seeding ${sessions} sessions of ${turns} turns and one of ${longTurns} turns into ${file}\n`)
    longId = await Effect.runPromise(seed(file))
  }
  const compiled = existsSync(join(repo, "dist/cli/Main.js")) && statSync(join(repo, "dist/cli/Main.js")).mtimeMs >= statSync(join(repo, "src/cli/Inspect.ts")).mtimeMs
  const inspect = startInspect(file)
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
  try {
    const url = await inspect.url
    longId ??= (await longest(url)).id
    console.log(`inspector bench: ${sessions} sessions × ${turns} turns + one of ${longTurns} turns, troupe inspect on ${compiled ? "compiled dist/" : "the sources through tsx"}, load ${loadAverage()}`)

    // The assets, as sent.
    const names = ["", "inspector/app.js", "inspector/app.css"]
    const gz = await Promise.all(names.map((name) => sentBytes(`${url}${name}`, true)))
    const plain = await Promise.all(names.map((name) => sentBytes(`${url}${name}`, false)))
    const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)
    console.log(`assets: ${sum(gz)} B gzipped (html ${gz[0]}, js ${gz[1]}, css ${gz[2]}); ${sum(plain)} B plain`)

    // The API's first page alone.
    const api: Array<number> = []
    for (let i = 0; i < rounds * 3; i++) {
      const t0 = performance.now()
      await fetch(`${url}v1/sessions?limit=50`).then((r) => r.text())
      api.push(performance.now() - t0)
    }
    console.log(`GET /v1/sessions?limit=50 from Node: median ${ms(median(api))}`)

    const measure = async (path: string, marks: ReadonlyArray<string>) => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 860 } })
      const page = await context.newPage()
      const requests: Array<string> = []
      page.on("request", (r) => requests.push(new URL(r.url()).pathname))
      const server0 = cpuOfTree(inspect.proc.pid!)
      const all0 = cpuOfTree(process.pid)
      const own0 = ownCpu()
      await page.goto(`${url}${path}`)
      const last = marks[marks.length - 1]!
      // Told by the page itself when it marks (no polling that would cost the browser CPU too).
      await page.evaluate((name) =>
        new Promise<void>((resolve) => {
          if (performance.getEntriesByName(name).length > 0) return resolve()
          new PerformanceObserver((list, observer) => {
            if (list.getEntriesByName(name).length === 0) return
            observer.disconnect()
            resolve()
          }).observe({ type: "mark", buffered: true })
        }), `troupe:${last}`)
      const server = cpuOfTree(inspect.proc.pid!) - server0
      const browserCpu = cpuOfTree(process.pid) - all0 - server - (ownCpu() - own0)
      const times = await page.evaluate((names) => ({
        fcp: performance.getEntriesByName("first-contentful-paint")[0]?.startTime,
        marks: names.map((name) => performance.getEntriesByName(`troupe:${name}`)[0]?.startTime)
      }), marks)
      await context.close()
      return { ...times, requests: requests.length, server, browser: browserCpu }
    }
    const table = async (what: string, path: string, marks: ReadonlyArray<string>) => {
      const runs: Array<Awaited<ReturnType<typeof measure>>> = []
      // The first load after the start: the listener has counted no session yet (and a source
      // checkout bundles the page on its first request). Shown apart; the medians are of later loads.
      const first = await measure(path, marks)
      for (let i = 0; i < rounds; i++) runs.push(await measure(path, marks))
      const fcp = median(runs.map((r) => r.fcp ?? NaN))
      const parts = marks.map((name, i) => `${name} ${ms(median(runs.map((r) => r.marks[i] ?? NaN)))}`)
      console.log(`${what}: first paint ${ms(fcp)} · ${parts.join(" · ")} · ${median(runs.map((r) => r.requests))} requests (medians of ${rounds})`)
      console.log(`  CPU per load: troupe inspect ${ms(median(runs.map((r) => r.server)))} · Chromium (every process) ${ms(median(runs.map((r) => r.browser)))}`)
      console.log(`  the first load after start: first paint ${ms(first.fcp)} · ${marks.map((name, i) => `${name} ${ms(first.marks[i])}`).join(" · ")}`)
    }
    // What any navigation of a fresh tab costs: a JSON answer of the same server, no page.
    const baseline: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 860 } })
      const page = await context.newPage()
      const all0 = cpuOfTree(process.pid)
      const own0 = ownCpu()
      await page.goto(`${url}healthz`, { waitUntil: "load" })
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0))))
      baseline.push(cpuOfTree(process.pid) - all0 - (ownCpu() - own0))
      await context.close()
    }
    console.log(`a fresh tab's navigation to /healthz: Chromium CPU ${ms(median(baseline))} (medians of ${rounds})`)
    await table("sessions list", "", ["list"])
    await table(`timeline of ${longTurns} turns`, `#/sessions/${longId}`, ["timeline"])
  } finally {
    await browser.close()
    inspect.proc.kill("SIGTERM")
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
