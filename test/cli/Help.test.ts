/**
 * The command line itself, in process: `--help` for every command, the
 * version, usage errors (exit 2) for bad options and arguments, and the
 * parsers behind the options (`--store`, `--tcp`, `--grace`, the agents
 * file) and the local principal.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Console, Effect, Either } from "effect"
import * as Address from "../../src/cli/Address.js"
import * as AgentsFile from "../../src/cli/AgentsFile.js"
import { ExitCode } from "../../src/cli/ExitCode.js"
import * as LocalPrincipal from "../../src/cli/LocalPrincipal.js"
import * as Main from "../../src/cli/Main.js"
import * as Serve from "../../src/cli/Serve.js"
import * as StoreOption from "../../src/cli/StoreOption.js"

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
        [["serve"], "$ serve"],
        [["run"], "$ run"],
        [["agents"], "$ agents"],
        [["sessions"], "$ sessions"],
        ...["list", "create", "show", "events", "send", "interrupt", "answer", "rename", "archive", "close"].map(
          (name) => [["sessions", name], `$ ${name} `] as const
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
          "--auth-timeout", "--idle-timeout", "--max-connections", "--max-unauthenticated"
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
      assert.strictEqual((yield* cli("sessions", "send", "ses_x", "hi")).code, ExitCode.Usage)
      assert.strictEqual((yield* cli("sessions", "frobnicate")).code, ExitCode.Usage)
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
