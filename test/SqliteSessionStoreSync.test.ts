/**
 * The SQLite store's durability choice (`SqliteSessionStore.Options.synchronous`,
 * `--sqlite-sync`): `normal` is WAL with `synchronous=NORMAL` (no fsync per
 * commit), `full` syncs the WAL at every commit. Read back from the connection,
 * and counted from outside: a process making N writes under `strace`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, type Scope } from "effect"
import { execFile, execFileSync } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import * as StoreOption from "../src/cli/StoreOption.js"
import * as SqliteConnection from "../src/layers/sql/sqlite/SqliteConnection.js"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"

const run = promisify(execFile)
const writer = fileURLToPath(new URL("./support/syncWrites.ts", import.meta.url))
const dir = () => mkdtempSync(join(tmpdir(), "troupe-sqlite-sync-"))

/** `PRAGMA synchronous` of a connection once the store was made on it with `made`: 1 is NORMAL, 2 is FULL. */
const synchronousAfter = (made: Effect.Effect<unknown, unknown, SqlClient.SqlClient | Scope.Scope>) =>
  Effect.gen(function*() {
    const handle = yield* SqliteConnection.open(join(dir(), "store.db"))
    yield* Effect.provideServiceEffect(made, SqlClient.SqlClient, SqliteConnection.clientOf(handle))
    // The store holds the client's connection; the pragma is read on the database underneath.
    return handle.db.pragma("synchronous", { simple: true }) as number
  }).pipe(Effect.scoped)

const strace = (() => {
  try {
    execFileSync("strace", ["-V"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

/** How many fsync and fdatasync calls a process making `count` writes with `synchronous` makes. */
const syncsOf = async (synchronous: "normal" | "full", count: number): Promise<number> => {
  const { stderr } = await run(
    "strace",
    ["-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", process.execPath, "--import", "tsx", writer, join(dir(), "store.db"), synchronous, String(count)],
    { timeout: 60_000 }
  )
  return Array.from(stderr.matchAll(/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(?:fsync|fdatasync)\s*$/gm))
    .reduce((sum, match) => sum + Number(match[1]), 0)
}

describe("SqliteSessionStore durability", () => {
  it.effect("the store sets synchronous=NORMAL by default and FULL when asked", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* synchronousAfter(SqliteSessionStore.make), 1)
      assert.strictEqual(yield* synchronousAfter(SqliteSessionStore.makeWithSync("normal")), 1)
      assert.strictEqual(yield* synchronousAfter(SqliteSessionStore.makeWithSync("full")), 2)
    }))

  it("--sqlite-sync reaches a SQLite store, and only a SQLite store", () => {
    const sqlite = Either.getOrThrow(StoreOption.parse("sqlite:/tmp/x.db"))
    assert.deepStrictEqual(StoreOption.withSync(sqlite, "full"), { kind: "sqlite", filename: "/tmp/x.db", synchronous: "full" })
    assert.deepStrictEqual(StoreOption.withSync(sqlite, "normal"), sqlite)
    assert.deepStrictEqual(StoreOption.withSync({ kind: "memory" } as StoreOption.Store, "full"), { kind: "memory" })
  })

  it.runIf(strace || process.env.CI)("full syncs every commit to disk; normal does not", async () => {
    assert.isTrue(strace, "strace is needed to count the fsyncs (apt-get install strace)")
    const writes = 40
    const [normal, full] = await Promise.all([syncsOf("normal", writes), syncsOf("full", writes)])
    assert.isAtLeast(full, writes, `full: ${full} syncs for ${writes} writes`)
    assert.isBelow(normal, writes / 4, `normal: ${normal} syncs for ${writes} writes`)
  }, 60_000)
})

