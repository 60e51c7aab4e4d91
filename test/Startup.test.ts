/**
 * What importing troupe loads (issue 33, docs/decisions/0044-drivers-load-when-used.md):
 * the drivers — better-sqlite3, pg, OpenTelemetry, the MCP SDK, the CLI library,
 * platform-node — load only when a layer that needs them is built, and
 * `troupe/schema` and `troupe/client` load without the runtime; the root
 * loads no SQL store, @effect/sql, @effect/ai or @effect/platform until a
 * layer that needs them is built (decision 0049). The CLI's
 * `--help` and `run "hello"` load neither the daemon nor the HTTP server, PG,
 * OTel or MCP.
 *
 * One fresh node process (through tsx, on the sources) records every module it
 * resolves with a `module.register` resolve hook (test/support/importHook.mjs)
 * while test/support/importProbe.mjs imports schema, client and root in turn,
 * then runs the two commands; each step's set is cumulative, and each step is
 * checked against what it may load, which the earlier steps also may. A
 * second process runs `--help` alone: it loads the commands' declarations,
 * not the wire, the clients, the runtime or the tools that run them.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const repo = fileURLToPath(new URL("..", import.meta.url))

/** The drivers: none may load on an import of troupe. */
const drivers =
  /\/node_modules\/(better-sqlite3|pg|pg-[a-z-]+|@opentelemetry\/[^/]+|@effect\/opentelemetry|@modelcontextprotocol\/sdk|@effect\/cli|@effect\/platform-node|@effect\/platform-node-shared|@effect\/sql-pg|@effect\/sql-sqlite-node|undici|zod)\//

/** What `--help` and `run` may not load: the daemon, the HTTP server and client, PG, OTel and MCP. */
const notForTheCli =
  /\/node_modules\/(pg|@effect\/sql-pg|@opentelemetry\/[^/]+|@effect\/opentelemetry|@modelcontextprotocol\/sdk)\/|\/node_modules\/@effect\/platform-node\/dist\/esm\/NodeHttpServer|\/src\/(cli\/Daemon|server\/Http[A-Za-z]+|http\/[^/]+|client\/http\/[^/]+)\.ts$/

/**
 * What `--help` alone may not load: beyond the above, the wire and its codec, the clients, the
 * runtime, the tools, the event formats, the built-in agents and the errors' schemas (loaded by the
 * commands that use them).
 */
const notForHelp =
  /\/node_modules\/cbor-x\/|\/src\/(protocol\/(Messages|Cbor|Frame)|client\/.+|actors\/.+|layers\/.+|tools\/.+|services\/Tool|cli\/(TurnView|EventFormat|DemoAgent|WorkspaceToolkit|EmbeddedRun|Daemon|Setup)|schema\/Errors)\.ts$/

/** Our own source files among `urls`, relative to src/. */
const sources = (urls: ReadonlyArray<string>) =>
  urls.filter((url) => url.startsWith("file:") && !url.includes("/node_modules/") && url.includes("/src/")).map((url) => url.slice(url.lastIndexOf("/src/") + 5))

/** This process's environment without the developer's troupe and OpenTelemetry settings. */
const cleanEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("TROUPE_") && !key.startsWith("OTEL_")) env[key] = value
  }
  return env
}

describe("start-up", () => {
  it("imports load no driver; client and schema load no runtime; --help and run load no daemon, HTTP server, PG, OTel or MCP", () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-startup-"))
    try {
      const out = join(dir, "resolved.txt")
      const result = spawnSync(process.execPath, ["--import", "tsx", join(repo, "test", "support", "importProbe.mjs"), out], {
        cwd: repo,
        encoding: "utf8",
        timeout: 60_000,
        env: { ...cleanEnv(), TROUPE_HOME: join(dir, "home"), TROUPE_TELEMETRY_ENABLED: "false", NO_COLOR: "1" }
      })
      assert.strictEqual(result.status, 0, `stdout: ${result.stdout}\nstderr: ${result.stderr}`)
      const { codes, steps } = JSON.parse(readFileSync(`${out}.json`, "utf8")) as {
        readonly steps: Record<"schema" | "client" | "root" | "cli", ReadonlyArray<string>>
        readonly codes: ReadonlyArray<number>
      }
      assert.deepStrictEqual(codes, [0, 0], result.stdout)
      for (const step of ["schema", "client", "root"] as const) {
        assert.deepStrictEqual(steps[step].filter((url) => drivers.test(url)), [], `${step} loads a driver`)
      }
      // The SQL stores, the @effect/ai bridge and the HTTP model load when their layers are built (decision 0049).
      assert.deepStrictEqual(
        steps.root.filter((url) => /\/node_modules\/@effect\/(sql|ai|platform|experimental)\/|\/src\/layers\/(sql|ai)\//.test(url)),
        [],
        "the root import loads a store, the @effect/ai bridge or @effect/platform"
      )
      assert.deepStrictEqual(sources(steps.schema).filter((file) => !file.startsWith("schema/")), [], "troupe/schema loads more than the schemas")
      // The HTTP client's implementation (and the API's declarations it is derived from) loads when a client is made.
      assert.deepStrictEqual(
        sources(steps.client).filter((file) => !/^(client|protocol|schema|internal)\//.test(file) || file.startsWith("client/http/")),
        [],
        "troupe/client loads the runtime"
      )
      // effect's streams (69 of its modules: channels, sinks, STM) load when a client connects (client/LazyStream).
      assert.deepStrictEqual(
        steps.client.filter((url) => /\/node_modules\/effect\/dist\/esm\/(Stream|Mailbox|internal\/stream|internal\/channel)\.js$/.test(url)),
        [],
        "troupe/client loads effect/Stream"
      )
      assert.deepStrictEqual(steps.cli.filter((url) => notForTheCli.test(url)), [], "--help or run loads what it does not use")
      // The probe itself: the root import did load the runtime, and the commands ran the program.
      assert.isTrue(sources(steps.root).includes("actors/InProcessHost.ts"))
      assert.isTrue(sources(steps.cli).includes("cli/EmbeddedRun.ts"))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)

  it("--help alone loads @effect/cli and the commands' options, not the code that runs them", () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-startup-"))
    try {
      const out = join(dir, "resolved.txt")
      const result = spawnSync(process.execPath, ["--import", "tsx", join(repo, "test", "support", "importProbe.mjs"), out, "help"], {
        cwd: repo,
        encoding: "utf8",
        timeout: 60_000,
        env: { ...cleanEnv(), TROUPE_HOME: join(dir, "home"), NO_COLOR: "1" }
      })
      assert.strictEqual(result.status, 0, `stdout: ${result.stdout}\nstderr: ${result.stderr}`)
      const { codes, steps } = JSON.parse(readFileSync(`${out}.json`, "utf8")) as {
        readonly steps: { readonly help: ReadonlyArray<string> }
        readonly codes: ReadonlyArray<number>
      }
      assert.deepStrictEqual(codes, [0], result.stdout)
      assert.include(result.stdout, "troupe sessions")
      assert.isTrue(sources(steps.help).includes("cli/SessionsCommand.ts"))
      assert.deepStrictEqual(steps.help.filter((url) => notForTheCli.test(url) || notForHelp.test(url) || drivers.test(url) && !/@effect\/(cli|platform-node)/.test(url)), [])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
