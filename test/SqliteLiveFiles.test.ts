/**
 * SQLite's side files (src/layers/SqliteLiveFiles.ts, decision 0047): a
 * turn's deltas are written only for a session another process follows,
 * reach the follower in order, and a follower goes on across a new file (the
 * writer's rotation); a follower that stops takes its marker with it.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteLiveFiles from "../src/layers/SqliteLiveFiles.js"
import { AssistantDelta } from "../src/schema/Event.js"
import type { SessionId, TurnId } from "../src/schema/Ids.js"

const session = "ses_1" as SessionId
const delta = (text: string, turnId = "trn_1") => new AssistantDelta({ sessionId: session, turnId: turnId as TurnId, text }, true)

describe("SqliteLiveFiles", () => {
  it("deltas for a followed session only, in order, across a new file; a process's own are skipped", () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-live-"))
    try {
      const paths = SqliteLiveFiles.pathsOf(join(dir, "store.db"))
      const deltasFile = join(paths.live, session, "deltas")
      // Nobody follows: nothing is written.
      SqliteLiveFiles.writer(paths, "a").forward(session, [delta("lost")])
      assert.isFalse(existsSync(deltasFile))

      const follower = SqliteLiveFiles.reader(paths, "b")
      assert.deepStrictEqual(follower.poll([session]), [])
      // Followed only in the writer's own process: its followers have the deltas in-process, nothing is written.
      SqliteLiveFiles.writer(paths, "b").forward(session, [delta("mine")])
      assert.isFalse(existsSync(deltasFile))
      // A writer that looks now sees the marker the follower keeps; a new file past 60 bytes.
      const writer = SqliteLiveFiles.writer(paths, "a", { rotateAt: 60 })
      const texts = (polled: ReturnType<typeof follower.poll>) => polled.flatMap(([, events]) => events.map((e) => e.text))
      writer.forward(session, [delta("one"), delta("two")])
      assert.deepStrictEqual(texts(follower.poll([session])), ["one", "two"])
      writer.forward(session, [delta("three"), delta("four", "trn_2")])
      // The follower holds the file open, so its inode cannot be reused by the next one.
      const firstIno = SqliteLiveFiles.inodeOf(deltasFile)
      writer.forward(session, [delta("five")])
      assert.notStrictEqual(SqliteLiveFiles.inodeOf(deltasFile), firstIno, "a new file past the limit")
      const got = follower.poll([session])
      assert.deepStrictEqual(texts(got), ["three", "four", "five"], "the old file to its end, then the new one")
      assert.deepStrictEqual(got.flatMap(([, events]) => events.map((e) => e.turnId)), ["trn_1", "trn_2", "trn_1"])
      writer.forward(session, [delta("six")])
      assert.deepStrictEqual(texts(follower.poll([session])), ["six"])
      // Done following: its marker goes, and a writer that looks again stops writing.
      follower.close()
      assert.isFalse(existsSync(join(paths.live, session, "b.followed")))
      SqliteLiveFiles.writer(paths, "c").forward(session, [delta("unread")])
      assert.notInclude(readFileSync(deltasFile, "utf8"), "unread")

      // A follower that leaves nothing else behind leaves no directory beside the database.
      const other = "ses_2" as SessionId
      const lone = SqliteLiveFiles.reader(paths, "d")
      lone.poll([other])
      assert.isTrue(existsSync(join(paths.live, other, "d.followed")))
      lone.poll([])
      assert.isFalse(existsSync(join(paths.live, other)))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
