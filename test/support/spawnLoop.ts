/**
 * Run as a child process by test/SpawnCrash.test.ts: spawns children of one
 * root session on a SQLite file as fast as it can, printing `SPAWNED <n>` after
 * each, until the parent kills it with SIGKILL (at an arbitrary point, possibly
 * inside a spawn's transaction).
 *
 *   spawnLoop.ts FILE
 *
 * It prints `ROOT <sessionId>` first. The lease it holds lasts 500 ms past its
 * last renewal, so a survivor can take the root over soon after the kill.
 */
import { Effect, Option } from "effect"
import { writeSync } from "node:fs"
import * as SqliteSessionStore from "../../src/layers/SqliteSessionStore.js"
import { Agent, ModelRef, SubagentRef } from "../../src/schema/Agent.js"
import { InputId, makeCommitId } from "../../src/schema/Ids.js"
import { Message } from "../../src/schema/Inbox.js"
import { Commit } from "../../src/schema/Lease.js"
import { SubagentPolicy } from "../../src/schema/Policy.js"
import { Principal } from "../../src/schema/Principal.js"
import { SessionStore } from "../../src/services/SessionStore.js"

/** The principal the loop and the test share. */
export const owner = new Principal({
  customerId: "00000000-0000-4000-8000-00000000000a",
  organizationId: "00000000-0000-4000-8000-00000000000b",
  workspaceId: "00000000-0000-4000-8000-00000000000c"
})

/** The agent of every session of the tree. */
export const worker = new Agent({
  name: "worker",
  instructions: "spawn",
  model: new ModelRef({ name: "scripted" }),
  subagents: [new SubagentRef({ name: "worker" })]
})

const say = (line: string) => writeSync(1, `${line}\n`)

const program = Effect.gen(function*() {
  const store = yield* SessionStore
  const root = yield* store.create({
    principal: owner,
    agent: worker,
    subagentPolicy: new SubagentPolicy({ maxDepth: 2, maxChildTurns: 100_000 })
  })
  say(`ROOT ${root.id}`)
  let lease = Option.getOrThrow(yield* store.acquire(root.id, "loop", 500))
  let head = root.headSeq
  for (let n = 1; ; n++) {
    const spawned = yield* store.spawn({
      principal: owner,
      commit: new Commit({
        commitId: yield* makeCommitId,
        sessionId: root.id,
        owner: "loop",
        epoch: lease.epoch,
        expectedHeadSeq: head,
        records: [],
        consumes: []
      }),
      agent: worker,
      message: new Message({ inputId: InputId.make(`first-${n}`), text: `task ${n}` })
    })
    head = spawned.receipt.headSeq
    lease = yield* store.renew(lease, 500)
    say(`SPAWNED ${n}`)
  }
})

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].split("/").pop()!)) {
  Effect.runPromise(program.pipe(Effect.provide(SqliteSessionStore.layer({ filename: process.argv[2]! })))).catch(
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}
