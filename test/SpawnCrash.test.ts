/**
 * A spawn is one transaction, also when the process dies: a loop of spawns on
 * a SQLite file (test/support/spawnLoop.ts) is killed with SIGKILL at an
 * arbitrary moment, and a fresh process finds every child whole (its row, its
 * `session_created` record, its first message), the parent's log holding one
 * `child_spawned` per child and no other, and the root's child-turn count
 * equal to the children; then it takes the root over and spawns on.
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Option } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as SqliteSessionStore from "../src/layers/SqliteSessionStore.js"
import { makeCommitId, type SessionId } from "../src/schema/Ids.js"
import { Commit } from "../src/schema/Lease.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { message } from "./support/fixtures.js"
import { owner, worker } from "./support/spawnLoop.js"

const script = fileURLToPath(new URL("./support/spawnLoop.ts", import.meta.url))

/** Runs the loop until it has spawned `atLeast` children plus a random few, then kills it; returns the root. */
const runAndKill = (filename: string, atLeast: number) =>
  new Promise<SessionId>((resolve, reject) => {
    const proc = spawn(process.execPath, ["--import", "tsx", script, filename], { stdio: ["ignore", "pipe", "pipe"] })
    const target = atLeast + Math.floor(Math.random() * 20)
    let stdout = ""
    let stderr = ""
    let root: SessionId | undefined
    const timer = setTimeout(() => {
      proc.kill("SIGKILL")
      reject(new Error(`the loop never spawned ${target}\nstdout: ${stdout.slice(-500)}\nstderr: ${stderr}`))
    }, 60_000)
    proc.stderr.setEncoding("utf8").on("data", (data: string) => (stderr += data))
    proc.stdout.setEncoding("utf8").on("data", (data: string) => {
      stdout += data
      root ??= /ROOT (ses_\w+)/.exec(stdout)?.[1] as SessionId | undefined
      if (stdout.includes(`SPAWNED ${target}\n`)) proc.kill("SIGKILL")
    })
    proc.on("exit", (_code, signal) => {
      clearTimeout(timer)
      if (signal === "SIGKILL" && root !== undefined) resolve(root)
      else reject(new Error(`the loop ended without being killed (${signal})\nstderr: ${stderr}`))
    })
  })

describe("spawn across a crash", () => {
  it.live("a SIGKILL at any moment leaves every spawn whole or absent, and the tree's count right", () =>
    Effect.gen(function*() {
      const filename = join(mkdtempSync(join(tmpdir(), "troupe-spawn-crash-")), "tree.db")
      const rootId = yield* Effect.promise(() => runAndKill(filename, 20))
      const counted = (() => {
        const db = new Database(filename, { readonly: true })
        try {
          return Number((db.prepare(`SELECT child_turns FROM troupe_sessions WHERE id = ?`).get(rootId) as { child_turns: number }).child_turns)
        } finally {
          db.close()
        }
      })()
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const tree = yield* store.tree(owner, rootId)
        const children = tree.nodes.map((node) => node.session)
        assert.isAtLeast(children.length, 20)
        assert.strictEqual(counted, children.length, "one child turn counted per child")
        const log = (yield* store.readLog(rootId, { limit: 10_000 })).records
        const spawnedRecords = log.flatMap((r) => (r.body._tag === "child_spawned" ? [r.body.childSessionId] : []))
        assert.strictEqual(log.length, 1 + spawnedRecords.length, "nothing but child_spawned after session_created")
        assert.deepStrictEqual([...spawnedRecords].sort(), children.map((c) => c.id).sort())
        for (const [i, child] of children.entries()) {
          assert.strictEqual(child.alias, `worker-${i + 1}`)
          const inbox = yield* store.readInbox(child.id)
          assert.deepStrictEqual(inbox.map((item) => item.command._tag === "message" && item.command.text), [`task ${i + 1}`])
          assert.deepStrictEqual((yield* store.readLog(child.id)).records.map((r) => r.body._tag), ["session_created"])
        }
        // The dead loop's lease expires; a survivor takes the root over and spawns on from its head.
        yield* Effect.sleep("600 millis")
        const lease = Option.getOrThrow(yield* store.acquire(rootId, "survivor", 60_000))
        const root = yield* store.get(rootId)
        const next = yield* store.spawn({
          principal: owner,
          commit: new Commit({
            commitId: yield* makeCommitId,
            sessionId: rootId,
            owner: "survivor",
            epoch: lease.epoch,
            expectedHeadSeq: root.headSeq,
            records: [],
            consumes: []
          }),
          agent: worker,
          message: message("after the crash")
        })
        assert.strictEqual(next.child.alias, `worker-${children.length + 1}`)
      }).pipe(Effect.provide(SqliteSessionStore.layer({ filename })))
    }), 90_000)
})
