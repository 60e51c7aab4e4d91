/**
 * `troupe sessions … --url http://HOST:PORT` against an in-process HTTP
 * daemon: the same commands as over the socket (run in this process, their
 * stdout captured), through the HTTP client.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type AddressInfo, createServer } from "node:net"
import { vi } from "vitest"
import * as Main from "../../src/cli/Main.js"
import * as HttpSessionClient from "../../src/client/HttpSessionClient.js"
import * as H from "./harness.js"

/** Runs `troupe …args` in this process: its exit code and what it wrote to stdout. */
const troupe = (...args: ReadonlyArray<string>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const written: Array<string> = []
      const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
        written.push(typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk))
        return true
      })
      return { written, spy }
    }),
    ({ written }) => Effect.map(Main.main(["node", "troupe", ...args]), (code) => ({ code, stdout: written.join("") })),
    ({ spy }) => Effect.sync(() => spy.mockRestore())
  )

describe("troupe sessions --url", () => {
  it.scopedLive("lists, sends and waits, and shows a tree over HTTP; an unreachable URL is exit 3", () =>
    Effect.gen(function*() {
      const d = yield* H.start()
      const client = yield* HttpSessionClient.make(d.url, { token: H.TOKEN_A })
      const session = yield* client.create({ agent: "echo", title: "over http" })
      const http = ["--url", d.url, "--token", H.TOKEN_A]

      const listed = yield* troupe("sessions", "list", ...http, "--json")
      assert.strictEqual(listed.code, 0)
      assert.deepStrictEqual(listed.stdout.trim().split("\n").map((line) => JSON.parse(line).id), [session.id])

      const sent = yield* troupe("sessions", "send", ...http, "--wait", "--json", session.id, "hello")
      assert.strictEqual(sent.code, 0, sent.stdout)
      assert.include(sent.stdout, "echo: hello")
      const turns = (yield* client.list()).items[0]!
      assert.strictEqual(turns.activeTurnId ?? null, null, "the turn ended before --wait returned")

      const tree = yield* troupe("sessions", "tree", ...http, "--json", session.id)
      assert.strictEqual(tree.code, 0)
      assert.deepStrictEqual(tree.stdout.trim().split("\n").map((line) => JSON.parse(line).session.id), [session.id])

      const refused = yield* troupe("sessions", "list", "--url", d.url, "--token", "nobody")
      assert.strictEqual(refused.code, 4)
      const closedPort = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const server = createServer().listen(0, "127.0.0.1", () => {
            const { port } = server.address() as AddressInfo
            server.close(() => resolve(port))
          })
        })
      )
      const unreachable = yield* troupe("sessions", "list", "--url", `http://127.0.0.1:${closedPort}`)
      assert.strictEqual(unreachable.code, 3)
      const both = yield* troupe("sessions", "list", "--url", d.url, "--tcp", "127.0.0.1:1")
      assert.strictEqual(both.code, 2)
    }), 60_000)
})
