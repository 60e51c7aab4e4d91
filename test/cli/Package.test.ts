/**
 * troupe as another project gets it: `npm pack`, installed from the tarball
 * into a fresh project next to `effect`, and used with plain `node` (no tsx):
 * a consumer TypeScript file type-checks against the packed `.d.ts` and its
 * compiled output runs an embedded turn; `node_modules/.bin/troupe` and
 * `npx troupe` run the program; SIGTERM through either launcher stops the
 * daemon cleanly.
 *
 * How it stays fast and offline: the package is compiled into a copy of its
 * manifest (so the repository's own dist/ is neither needed nor rewritten
 * under the other tests), and the fresh project's node_modules starts as a
 * hard-linked copy of the production dependencies already installed here
 * (each package directory copied, never linked: npm must not reach through a
 * symlink into the shared node_modules). `npm install --offline
 * --no-package-lock` then adds only troupe, from the tarball, and its bin link.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, execFile, execFileSync, spawn, spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, beforeAll } from "vitest"

const repo = fileURLToPath(new URL("../..", import.meta.url))
const tsc = join(repo, "node_modules", "typescript", "bin", "tsc")

let dir = ""
let app = ""

/** The environment of the installed program: its own TROUPE_HOME, telemetry off, none of the developer's settings. */
const env = (): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || key.startsWith("TROUPE_") || key.startsWith("OTEL_") || key.startsWith("npm_")) continue
    out[key] = value
  }
  return { ...out, TROUPE_HOME: join(dir, "home"), TROUPE_TELEMETRY_ENABLED: "false", NO_COLOR: "1" }
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string) => {
  const result = spawnSync(command, args, { cwd, env: env(), encoding: "utf8", timeout: 120_000 })
  assert.strictEqual(result.status, 0, `${command} ${args.join(" ")}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`)
  return result
}

/**
 * `run` without blocking this worker's event loop: the set-up's build and installs take a minute
 * or more on a loaded machine, longer than vitest waits for a worker's report.
 */
const runAsync = (command: string, args: ReadonlyArray<string>, cwd: string) =>
  new Promise<void>((resolve, reject) => {
    execFile(command, args, { cwd, env: env(), encoding: "utf8", timeout: 180_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      error === null ? resolve() : reject(new Error(`${command} ${args.join(" ")}: ${error.message}\nstdout: ${stdout}\nstderr: ${stderr}`))
    )
  })

/**
 * The consumer: the README's embedding example as it is, plus a line that must not type-check
 * (so the packed types are real, not `any`).
 */
const CONSUMER = `${readFileSync(join(repo, "examples", "embedding.ts"), "utf8")}
import type { Ids } from "troupe"

// @ts-expect-error a plain string is not a SessionId
export const unbranded: Ids.SessionId = "ses_not_branded"
`

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "troupe-pack-"))
  const pkg = join(dir, "pkg")
  mkdirSync(pkg)
  for (const entry of ["package.json", "README.md", "bin"]) cpSync(join(repo, entry), join(pkg, entry), { recursive: true })
  // The build `npm pack` runs (prepack), into the package's copy: types, the bundled library and program.
  await runAsync(process.execPath, [join(repo, "scripts", "build.mjs"), "--out", join(pkg, "dist")], repo)
  await runAsync("npm", ["pack", "--ignore-scripts", "--pack-destination", dir], pkg)
  const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"))
  const tarball = join(dir, `troupe-${manifest.version}.tgz`)

  app = join(dir, "app")
  const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8")) as {
    readonly packages: Record<string, { readonly dependencies?: Record<string, string>; readonly optionalDependencies?: Record<string, string>; readonly peerDependencies?: Record<string, string> }>
  }
  const installed = realpathSync(join(repo, "node_modules"))
  // What the consumer needs: troupe's runtime dependencies and @types/node, with everything they depend on
  // (a top-level copy of each; packages nested under one come with it).
  const needed = new Set<string>()
  /** Where `dep`, required from the package at lock path `from`, resolves: the nearest node_modules up the path. */
  const resolve = (from: string, dep: string): string | undefined => {
    for (let at = from; ; at = at.slice(0, Math.max(0, at.lastIndexOf("/node_modules/")))) {
      const key = `${at === "" ? "" : `${at}/`}node_modules/${dep}`
      if (lock.packages[key] !== undefined) return key
      if (at === "") return undefined
    }
  }
  const visit = (key: string | undefined) => {
    const info = key === undefined ? undefined : lock.packages[key]
    if (key === undefined || info === undefined || needed.has(key) || !existsSync(join(repo, key))) return // another platform's
    needed.add(key)
    for (const dep of Object.keys({ ...info.dependencies, ...info.optionalDependencies, ...info.peerDependencies })) visit(resolve(key, dep))
  }
  for (const name of [...Object.keys(manifest.dependencies), "@types/node"]) visit(`node_modules/${name}`)
  for (const key of needed) {
    const name = key.slice("node_modules/".length)
    if (name.includes("/node_modules/")) continue // copied with the package it is nested in
    mkdirSync(dirname(join(app, key)), { recursive: true })
    execFileSync("cp", ["-al", join(installed, name), join(app, key)])
  }
  writeFileSync(join(app, "package.json"), JSON.stringify({
    name: "consumer",
    private: true,
    type: "module",
    dependencies: {
      "@effect/platform-node": manifest.dependencies["@effect/platform-node"],
      effect: manifest.dependencies.effect,
      troupe: `file:${tarball}`
    },
    devDependencies: { "@types/node": manifest.devDependencies["@types/node"] }
  }))
  await runAsync("npm", ["install", "--offline", "--no-package-lock", "--ignore-scripts", "--no-audit", "--no-fund"], app)
}, 180_000)

afterAll(() => {
  if (dir !== "") rmSync(dir, { recursive: true, force: true })
})

/** Starts `command` in the project; resolves with what it wrote once its output streams close. */
const daemon = (command: string, args: ReadonlyArray<string>) => {
  const proc: ChildProcess = spawn(command, args, { cwd: app, env: env(), stdio: ["ignore", "pipe", "pipe"] })
  let stderr = ""
  proc.stderr!.setEncoding("utf8").on("data", (data: string) => (stderr += data))
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)))
  // "close": every process holding the pipes (a daemon under npx's shell too) has ended.
  const closed = new Promise<void>((resolve) => proc.on("close", () => resolve()))
  const listening = new Promise<void>((resolve, reject) => {
    const check = () => (stderr.includes("troupe: store ") ? resolve() : undefined)
    proc.stderr!.on("data", check)
    proc.on("close", () => reject(new Error(`${command} ${args.join(" ")} ended before listening:\n${stderr}`)))
  })
  return { proc, exited, closed, listening, stderr: () => stderr }
}

describe("the packed package", () => {
  it("ships compiled JavaScript and declarations, no sources and no tsx", () => {
    const installed = join(app, "node_modules", "troupe")
    assert.isTrue(existsSync(join(installed, "dist", "index.js")))
    assert.isTrue(existsSync(join(installed, "dist", "index.d.ts")))
    assert.isFalse(existsSync(join(installed, "src")), "no TypeScript sources in the tarball")
    assert.isFalse(existsSync(join(app, "node_modules", "tsx")), "tsx is not a runtime dependency")
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"))
    assert.deepStrictEqual(manifest.exports["."], { types: "./dist/index.d.ts", import: "./dist/index.js", default: "./dist/index.js" })
  })

  it("troupe/client and troupe/schema load on their own, with none of the runtime's drivers", () => {
    const probe = [
      `const client = await import("troupe/client"); const schema = await import("troupe/schema");`,
      `const { createRequire } = await import("node:module");`,
      // A driver loaded by either entry would be in the CommonJS cache (better-sqlite3, pg) or have its ESM entry evaluated.
      `const loaded = Object.keys(createRequire(import.meta.url).cache).filter((p) => /better-sqlite3|[\\/]pg[\\/]|opentelemetry|modelcontextprotocol/.test(p));`,
      `console.log(JSON.stringify({ connect: typeof client.PromiseClient.connect, make: typeof schema.Agent.make, loaded }))`
    ].join(" ")
    const out = JSON.parse(run(process.execPath, ["--input-type=module", "-e", probe], app).stdout)
    assert.deepStrictEqual(out, { connect: "function", make: "function", loaded: [] })
  })

  it("a consumer type-checks against the packed types and runs an embedded turn with plain node", () => {
    writeFileSync(join(app, "main.ts"), CONSUMER)
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        exactOptionalPropertyTypes: true,
        skipLibCheck: true,
        types: ["node"],
        outDir: "out"
      },
      files: ["main.ts"]
    }))
    run(process.execPath, [tsc, "-p", "tsconfig.json"], app)
    const turn = run(process.execPath, [join("out", "main.js")], app)
    assert.match(turn.stdout, /^You said: hello \d+\n$/)
  }, 60_000)

  it("runs as node_modules/.bin/troupe and npx troupe", () => {
    const bin = join(app, "node_modules", ".bin", "troupe")
    const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"))
    assert.strictEqual(run(bin, ["--version"], app).stdout.trim(), manifest.version)
    const answer = run(bin, ["run", "--store", "memory", "hello"], app)
    assert.include(answer.stdout, "You said: hello")
    // The default store: SQLite in TROUPE_HOME, its driver (native) loaded from node_modules by the bundled program.
    assert.include(run(bin, ["run", "hello again"], app).stdout, "You said: hello again")
    assert.include(run("npx", ["--offline", "--no-install", "troupe", "--version"], app).stdout.trim(), manifest.version)
  }, 60_000)

  it("troupe inspect serves the page built into the package (over the default SQLite file)", async () => {
    const proc = spawn(join(app, "node_modules", ".bin", "troupe"), ["inspect", "--http", "127.0.0.1:0"], {
      cwd: app,
      env: env(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    try {
      let stdout = ""
      let stderr = ""
      proc.stderr!.setEncoding("utf8").on("data", (data: string) => (stderr += data))
      const url = await new Promise<string>((resolve, reject) => {
        proc.stdout!.setEncoding("utf8").on("data", (data: string) => {
          stdout += data
          const found = /^(http:\/\/\S+)\/$/m.exec(stdout)
          if (found) resolve(found[1]!)
        })
        proc.on("exit", (code) => reject(new Error(`troupe inspect exited ${code}: ${stdout}${stderr}`)))
      })
      const page = await fetch(`${url}/`)
      assert.strictEqual(page.status, 200)
      assert.include(await page.text(), "<html")
      const script = await fetch(`${url}/inspector/app.js`)
      assert.strictEqual(script.status, 200)
      assert.isAbove((await script.arrayBuffer()).byteLength, 1000)
    } finally {
      proc.kill("SIGTERM")
    }
  }, 60_000)

  it("a help form prints, without loading the program, exactly what the program prints; anything else runs the program", async () => {
    const installed = join(app, "node_modules", "troupe")
    const texts = join(installed, "dist", "cli", "help.json")
    const { forms } = JSON.parse(readFileSync(texts, "utf8")) as {
      readonly forms: ReadonlyArray<{ readonly argv: ReadonlyArray<string>; readonly plain: string }>
    }
    // The launcher reads the texts only for a command line that is empty or ends so (Start.mayBeHelp).
    for (const { argv } of forms) assert.isTrue(argv.length === 0 || ["--help", "-h", "--version"].includes(argv.at(-1)!), argv.join(" "))
    for (const form of [[], ["--help"], ["-h"], ["--version"], ["sessions", "--help"], ["sessions", "answer", "-h"], ["protocol", "types", "--help"]]) {
      assert.isTrue(forms.some(({ argv }) => argv.join(" ") === form.join(" ")), `help.json has \`troupe ${form.join(" ")}\``)
    }
    // What a process resolved (the ESM resolve hook of the start-up test), and a terminal that takes colours.
    const hook = pathToFileURL(join(repo, "test", "support", "importHook.mjs")).href
    const tty = `data:text/javascript,Object.defineProperty(process.stdout,"isTTY",{value:true})`
    const colourEnv = () => {
      const { NO_COLOR: _, ...rest } = env()
      return { ...rest, TERM: "xterm-256color" }
    }
    // The real program: @effect/cli, whatever help.json says.
    const real = join(dir, "real.mjs")
    writeFileSync(real, `const Main = await import(${JSON.stringify(pathToFileURL(join(installed, "dist", "cli", "Main.js")).href)})\nMain.runMain(["node", "troupe", ...process.argv.slice(2)])\n`)
    /** Runs node on `args` (asynchronously, so that two run at once): exit code, stdout, and the modules the launcher resolved. */
    const node = (args: ReadonlyArray<string>, coloured: boolean) =>
      new Promise<{ readonly code: number | null; readonly stdout: string; readonly resolved: ReadonlyArray<string> }>((resolve, reject) => {
        const out = join(dir, `resolved-${Math.random().toString(36).slice(2)}.txt`)
        writeFileSync(out, "")
        const preload = `data:text/javascript,import{register}from"node:module";register(${JSON.stringify(hook)},{data:{out:${JSON.stringify(out)}}})`
        const proc = spawn(process.execPath, [...(args[0] === real ? [] : ["--import", preload]), ...(coloured ? ["--import", tty] : []), ...args], {
          cwd: app,
          env: coloured ? colourEnv() : env(),
          stdio: ["ignore", "pipe", "inherit"]
        })
        const chunks: Array<Buffer> = []
        proc.stdout!.on("data", (chunk: Buffer) => chunks.push(chunk))
        proc.on("error", reject)
        proc.on("close", (code) =>
          resolve({ code, stdout: Buffer.concat(chunks).toString("utf8"), resolved: readFileSync(out, "utf8").split("\n") })
        )
      })
    const bin = join(installed, "bin", "troupe.mjs")
    const loadsTheProgram = (resolved: ReadonlyArray<string>) => resolved.some((url) => url.endsWith("/dist/cli/Main.js"))
    /** `argv` through the launcher and through the real program: the same bytes and exit code; whether the launcher loaded the program. */
    const compare = async (argv: ReadonlyArray<string>, coloured: boolean) => {
      const [launched, program] = await Promise.all([node([bin, ...argv], coloured), node([real, ...argv], coloured)])
      const what = `troupe ${argv.join(" ")}${coloured ? " (colours)" : ""}`
      assert.strictEqual(program.code, 0, what)
      assert.strictEqual(launched.code, program.code, what)
      assert.strictEqual(launched.stdout, program.stdout, what)
      return { loaded: loadsTheProgram(launched.resolved), stdout: launched.stdout }
    }
    // Every form through the launcher alone (cheap): its stored text, without the program.
    for (const { argv, plain } of forms) {
      const launched = await node([bin, ...argv], false)
      const what = `troupe ${argv.join(" ")}`
      assert.strictEqual(launched.code, 0, what)
      assert.strictEqual(launched.stdout, plain, what)
      assert.isFalse(loadsTheProgram(launched.resolved), `${what} loads the program`)
    }
    // A sample beside the real program (each costs a whole start of it): the stored texts are what it prints.
    for (const argv of [[], ["--version"], ["-h"], ["sessions", "answer", "-h"], ["protocol", "types", "--help"], ["serve", "--help"]]) {
      const { loaded } = await compare(argv, false)
      assert.isFalse(loaded, `troupe ${argv.join(" ")} loads the program`)
    }
    for (const argv of [["--help"], ["sessions", "send", "-h"]]) {
      const { loaded, stdout } = await compare(argv, true)
      assert.isFalse(loaded, `troupe ${argv.join(" ")} (colours) loads the program`)
      assert.include(stdout, "\x1b[", "colours on a terminal")
    }
    // Not a help form: the program runs (and prints the same help).
    assert.isTrue((await compare(["--log-level", "error", "--help"], false)).loaded)
    // Without the texts, the program runs.
    renameSync(texts, `${texts}.away`)
    try {
      assert.isTrue((await compare(["--help"], false)).loaded)
    } finally {
      renameSync(`${texts}.away`, texts)
    }
  }, 240_000)

  it("SIGTERM through node_modules/.bin/troupe and through npx drains the daemon, which exits 0", async () => {
    const direct = daemon(join(app, "node_modules", ".bin", "troupe"), ["serve", "--store", "memory", "--socket", join(dir, "a.sock")])
    await direct.listening
    direct.proc.kill("SIGTERM")
    assert.strictEqual(await direct.exited, 0, direct.stderr())
    assert.include(direct.stderr(), "troupe: stopped")

    // npx runs the program under a shell that dies of the SIGTERM npx passes on; the daemon sees its parent go.
    const socket = join(dir, "b.sock")
    const viaNpx = daemon("npx", ["--offline", "--no-install", "troupe", "serve", "--store", "memory", "--socket", socket])
    await viaNpx.listening
    viaNpx.proc.kill("SIGTERM")
    await viaNpx.closed
    assert.include(viaNpx.stderr(), "troupe: stopping (SIGTERM)")
    assert.include(viaNpx.stderr(), "troupe: stopped")
    assert.isFalse(existsSync(socket), "the daemon removed its socket")
  }, 60_000)
})
