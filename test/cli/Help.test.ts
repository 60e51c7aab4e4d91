/**
 * The command line itself, in process: `--help` for every command, the
 * version, usage errors (exit 2) for bad options and arguments, and the
 * parsers behind the options (`--store`, `--tcp`, `--grace`, the agents
 * file) and the local principal.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Console, Effect, Either, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Address from "../../src/cli/Address.js"
import * as AgentsFile from "../../src/cli/AgentsFile.js"
import { ExitCode } from "../../src/cli/ExitCode.js"
import * as LocalPrincipal from "../../src/cli/LocalPrincipal.js"
import * as Main from "../../src/cli/Main.js"
import * as Serve from "../../src/cli/Serve.js"
import * as StoreOption from "../../src/cli/StoreOption.js"
import * as SqliteSessionStore from "../../src/layers/SqliteSessionStore.js"

/** Runs the program in process on `args`, with what it prints through `Console` captured. */
const cli = (...args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const capture = (to: Array<string>) => (...parts: ReadonlyArray<unknown>) =>
      Effect.sync(() => void to.push(parts.map(String).join(" ")))
    const code = yield* Effect.consoleWith((base) =>
      Effect.withConsole(Main.main(["node", "troupe", ...args]), {
        ...base,
        log: capture(out),
        info: capture(out),
        error: capture(err),
        warn: capture(err)
      } as Console.Console)
    )
    return { code, stdout: out.join("\n"), stderr: err.join("\n") }
  })

describe("the troupe command line", () => {
  it.effect("prints help for every command", () =>
    Effect.gen(function*() {
      const commands = [
        [[], "$ troupe"],
        [["serve"], "$ troupe serve"],
        [["run"], "$ troupe run"],
        [["inspect"], "$ troupe inspect"],
        [["agents"], "$ troupe agents"],
        [["sessions"], "$ troupe sessions"],
        ...["list", "create", "show", "events", "send", "interrupt", "answer", "rename", "archive", "close"].map(
          (name) => [["sessions", name], `$ troupe sessions ${name} `] as const
        )
      ] as const
      for (const [words, usage] of commands) {
        const result = yield* cli(...words, "--help")
        assert.strictEqual(result.code, 0, `${words.join(" ")} --help`)
        assert.include(result.stdout, usage, `${words.join(" ")} --help`)
        assert.notMatch(result.stdout, /\x1b\[/, "no colours into a pipe")
      }
      const root = yield* cli("--help")
      assert.include(root.stdout, "EXIT CODES")
      const serve = yield* cli("serve", "--help")
      for (
        const option of [
          "--store", "--name", "--socket", "--tcp", "--stdio", "--agents", "--tokens", "--model", "--grace",
          "--auth-timeout", "--idle-timeout", "--max-connections", "--max-unauthenticated", "--lease-ttl", "--max-busy"
        ]
      ) {
        assert.include(serve.stdout, option)
      }
      assert.strictEqual((yield* cli("--version")).stdout.trim(), Main.VERSION)
    }))

  it.effect("refuses bad options and arguments with exit 2", () =>
    Effect.gen(function*() {
      const store = yield* cli("run", "--store", "mysql://x", "hello")
      assert.strictEqual(store.code, ExitCode.Usage)
      assert.include(store.stderr, "--store: \"mysql://x\": expected sqlite:PATH, postgres:URL or memory")
      assert.strictEqual((yield* cli("serve", "--tcp", "localhost")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("serve", "--grace", "soon")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("serve", "--auth-timeout", "0s")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("serve", "--idle-timeout", "never")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("serve", "--max-unauthenticated", "0")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("serve", "--agents", "/nonexistent/agents.json")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("run")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("inspect", "--http", "localhost:http")).code, ExitCode.Usage)
      // A viewer creates no store, and off loopback it needs tokens: both refused before anything opens.
      const missing = yield* cli("inspect", "--store", "sqlite:/nonexistent/troupe.db")
      assert.strictEqual(missing.code, ExitCode.Usage)
      assert.include(missing.stderr, "no store at /nonexistent/troupe.db")
      assert.include((yield* cli("inspect", "--http", "0.0.0.0:0")).stderr, "off loopback every request needs a token")
      assert.strictEqual((yield* cli("sessions", "send", "ses_x", "hi")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("sessions", "frobnicate")).code, ExitCode.Usage)
    }))

  it.effect("names the bad flag, refuses a flag without its value, suggests the nearest command or flag", () =>
    Effect.gen(function*() {
      const bogus = yield* cli("run", "--bogus", "hi")
      assert.strictEqual(bogus.code, ExitCode.Usage)
      assert.strictEqual(bogus.stderr, "troupe: unknown option --bogus for troupe run — `troupe run --help` lists its options")

      const bare = yield* cli("run", "--agent")
      assert.strictEqual(bare.code, ExitCode.Usage)
      assert.include(bare.stderr, "troupe: --agent needs a value (--agent NAME)")
      const beforeFlag = yield* cli("run", "--agent", "--json", "hi")
      assert.strictEqual(beforeFlag.code, ExitCode.Usage)
      assert.include(beforeFlag.stderr, "--agent needs a value")

      const lst = yield* cli("sessions", "lst")
      assert.strictEqual(lst.code, ExitCode.Usage)
      assert.include(lst.stderr, "unknown command \"lst\" for troupe sessions; did you mean list?")
      assert.notInclude(lst.stderr, "serve", "the sessions subcommands, not the top-level commands")
      assert.include((yield* cli("serv")).stderr, "did you mean serve?")
      assert.include((yield* cli("sessions", "list", "--limt", "3")).stderr, "unknown option --limt for troupe sessions list; did you mean --limit?")

      for (const limit of ["0", "-1", "100000"]) {
        const result = yield* cli("sessions", "list", "--limit", limit, "--socket", "/nonexistent/troupe.sock")
        assert.strictEqual(result.code, ExitCode.Usage, `--limit ${limit} is refused before connecting`)
        assert.include(result.stderr, `--limit: ${limit} is not from 1 to 1000`)
      }
      const after = yield* cli("sessions", "events", "ses_01J0000000000000000000000Z", "--after", "-3", "--socket", "/nonexistent/troupe.sock")
      assert.strictEqual(after.code, ExitCode.Usage)
      assert.include(after.stderr, "--after: -3 is not a cursor")
      for (const result of [bogus, bare, lst, after]) {
        assert.match(result.stderr, /^troupe: [^\n]+ — [^\n]+$/, "one troupe: line with a hint")
      }
    }))

  it.effect("help: every option has a real description, USAGE shows the whole command, every command has examples", () =>
    Effect.gen(function*() {
      const commands = [
        [], ["serve"], ["run"], ["inspect"], ["agents"], ["sessions"], ["protocol"], ["protocol", "schema"], ["protocol", "types"],
        ...["list", "create", "show", "events", "send", "interrupt", "answer", "rename", "archive", "close"].map((name) => ["sessions", name])
      ]
      for (const words of commands) {
        const { stdout } = yield* cli(...words, "--help")
        const where = ["troupe", ...words].join(" ")
        const paragraphs = stdout.split(/\n\n/).map((paragraph) => paragraph.trim())
        assert.include(paragraphs, "USAGE", where)
        assert.isTrue(paragraphs[paragraphs.indexOf("USAGE") + 1]!.startsWith(`$ ${where}`), `${where}: USAGE shows the whole command`)
        assert.include(paragraphs, "EXAMPLES", `${where} has examples`)
        assert.isTrue(paragraphs[paragraphs.indexOf("EXAMPLES") + 1]!.startsWith(`$ ${where}`), `${where}: its examples use it`)
        for (const paragraph of paragraphs) {
          for (const generic of [/user-defined piece of text/, /This setting is optional/, /^A true or false value/, /^An integer\./, /^One of the following/, /must be repeated/, /can be set from environment/]) {
            assert.notMatch(paragraph, generic, `${where}: a generic placeholder`)
          }
        }
        assert.notInclude(stdout, "--wizard", `${where}: nothing unexplained`)
        // Each option and argument heading is followed by its own description.
        const start = paragraphs.findIndex((p) => p === "OPTIONS" || p === "ARGUMENTS")
        if (start < 0) continue
        const end = paragraphs.indexOf("EXIT CODES")
        for (let i = start; i < end; i++) {
          const heading = paragraphs[i]!
          if (!/^(\(?-|<)/.test(heading)) continue
          const next = paragraphs[i + 1] ?? ""
          assert.isFalse(next === "" || /^(\(?-|<)/.test(next) || next === "OPTIONS", `${where}: ${heading} has no description`)
        }
      }
    }))

  it("parses --store, --tcp and --grace", () => {
    assert.deepStrictEqual(StoreOption.parse("memory"), Either.right({ kind: "memory" }))
    assert.deepStrictEqual(StoreOption.parse("sqlite:/tmp/x.db"), Either.right({ kind: "sqlite", filename: "/tmp/x.db" }))
    assert.deepStrictEqual(StoreOption.parse("sqlite::memory:"), Either.right({ kind: "sqlite", filename: ":memory:" }))
    const pg = "postgres://u:secret@db:5432/troupe"
    assert.deepStrictEqual(StoreOption.parse(`postgres:${pg}`), Either.right({ kind: "postgres", url: pg }))
    assert.deepStrictEqual(StoreOption.parse(pg), Either.right({ kind: "postgres", url: pg }))
    assert.notInclude(StoreOption.describe({ kind: "postgres", url: pg }), "secret")
    assert.isTrue(Either.isLeft(StoreOption.parse("sqlite:")))
    assert.isTrue(Either.isLeft(StoreOption.parse("/tmp/x.db")))

    assert.deepStrictEqual(Address.parseHostPort("127.0.0.1:7000"), Either.right({ host: "127.0.0.1", port: 7000 }))
    assert.deepStrictEqual(Address.parseHostPort("[::1]:0"), Either.right({ host: "::1", port: 0 }))
    assert.deepStrictEqual(Address.parseHostPort(":80"), Either.right({ host: "127.0.0.1", port: 80 }))
    assert.isTrue(Either.isLeft(Address.parseHostPort("host:99999")))

    assert.deepStrictEqual(Either.map(Serve.parseDuration("1500ms"), (d) => d.toJSON()), Either.map(Serve.parseDuration("1.5s"), (d) => d.toJSON()))
    assert.isTrue(Either.isLeft(Serve.parseDuration("10 parsecs")))
  })

  it.effect("decodes an agents file: client tools, defaults, and a clear error for each mistake", () =>
    Effect.gen(function*() {
      const [agent] = yield* AgentsFile.parse("a.json", JSON.stringify({
        agents: [{
          name: "helper",
          instructions: "Be brief.",
          model: { name: "gpt-4.1-mini", settings: { temperature: 0.2 } },
          tools: [{ name: "read_file", description: "Reads a file", parameters: { type: "object" }, sideEffect: "read" }],
          permissions: { default: "ask", rules: { read_file: "allow" } },
          noToolPolicy: "wait_user",
          maxCycles: 4,
          budgets: { totalTokens: 1000 }
        }]
      }))
      assert.strictEqual(agent!.model.name, "gpt-4.1-mini")
      assert.strictEqual(agent!.model.settings?.temperature, 0.2)
      assert.deepStrictEqual(
        agent!.tools.map((tool) => [tool.name, tool.client, tool.sideEffect, tool.idempotency]),
        [["read_file", true, "read", "unknown"]]
      )
      assert.deepStrictEqual([agent!.permissions.default, agent!.permissions.rules], ["ask", { read_file: "allow" }])
      assert.deepStrictEqual([agent!.noToolPolicy, agent!.maxCycles, agent!.budgets?.totalTokens], ["wait_user", 4, 1000])

      const [minimal] = yield* AgentsFile.parse("a.json", "{\"agents\":[{\"name\":\"m\",\"instructions\":\"\"}]}")
      assert.deepStrictEqual([minimal!.model.name, minimal!.tools.length, minimal!.noToolPolicy], ["default", 0, "finish"])

      const reason = (text: string) => Effect.flip(AgentsFile.parse("a.json", text)).pipe(Effect.map((error) => error.reason))
      assert.match(yield* reason("{"), /^not valid JSON/)
      assert.strictEqual(yield* reason("{\"agents\":[]}"), "agents: expected at least one agent")
      assert.match(yield* reason("{\"agents\":[{\"name\":\"a\",\"instructions\":\"\",\"modle\":\"x\"}]}"), /^agents\.0\.modle: /)
      assert.match(yield* reason("{\"agents\":[{\"name\":\"1a\",\"instructions\":\"\"}]}"), /^agents\.0\.name: expected a name/)
      assert.strictEqual(
        yield* reason("{\"agents\":[{\"name\":\"a\",\"instructions\":\"\"},{\"name\":\"a\",\"instructions\":\"\"}]}"),
        "agents.1.name: a second agent is named a"
      )
    }))

  it("derives the local principal from the user name, stably", () => {
    // RFC 4122's example: the DNS namespace and www.example.com.
    assert.strictEqual(
      LocalPrincipal.uuidv5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "www.example.com"),
      "2ed6657d-e927-568b-95e1-2665a8aea6a2"
    )
    const alice = LocalPrincipal.forUser("alice")
    assert.deepStrictEqual(LocalPrincipal.forUser("alice"), alice)
    assert.notStrictEqual(LocalPrincipal.forUser("bob").workspaceId, alice.workspaceId)
    assert.strictEqual(new Set([alice.customerId, alice.organizationId, alice.workspaceId]).size, 3)
    assert.strictEqual(alice.userId, "alice")
  })
})

describe("messages that name what is wrong (issue 34)", () => {
  it.effect("a bad option value names the option; --version is one line; help fits 80 columns with the connection options once", () =>
    Effect.gen(function*() {
      const level = yield* cli("--log-level", "loud", "sessions", "list")
      assert.strictEqual(level.code, ExitCode.Usage)
      assert.include(level.stderr, `--log-level: "loud" is not one of all, trace, debug, info, warning, error, fatal, none`)
      assert.notInclude(level.stderr, "subcommand")
      const limit = yield* cli("sessions", "list", "--limit", "abc")
      assert.strictEqual(limit.code, ExitCode.Usage)
      assert.include(limit.stderr, `--limit: "abc" is not an integer`)
      const approve = yield* cli("run", "--approve", "maybe", "hi")
      assert.strictEqual(approve.code, ExitCode.Usage)
      assert.include(approve.stderr, `--approve: "maybe" is not one of all, none`)

      assert.strictEqual((yield* cli("--version")).stdout, Main.VERSION)

      for (const words of [[], ["run"], ["serve"], ["sessions"], ["sessions", "list"], ["sessions", "answer"]]) {
        const help = (yield* cli(...words, "--help")).stdout
        const wide = help.split("\n").filter((line) => line.length > 80)
        assert.deepStrictEqual(wide, [], `troupe ${words.join(" ")} --help`)
      }
      const sessions = (yield* cli("sessions", "--help")).stdout
      assert.strictEqual(sessions.split("--socket PATH").length - 1, 1, sessions)
      assert.include(sessions, "  - list [--all] [--limit N]\n      List the newest root sessions.")
    }))

  it.scoped("a SQLite store that cannot be opened names its path and the reason", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "h34-"))),
        (path) => Effect.sync(() => rmSync(path, { recursive: true, force: true }))
      )
      const filename = join(dir, "missing", "t.db")
      const error = yield* Effect.flip(Layer.build(SqliteSessionStore.layer({ filename })))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.strictEqual(error.store, `sqlite:${filename}`)
      assert.include(error.message, filename)
      assert.include(error.message, "the directory does not exist")
    }))
})
