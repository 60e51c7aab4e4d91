/**
 * The `process.*` built-ins on a local workspace, through the toolkit as a
 * turn runs them: output read from a cursor with a wait, stdin, signals to the
 * whole group, bounded buffers, the per-session limit; each session sees only
 * its own processes; a session's close stops them (checked by pid), and a host
 * started again on the same workspace reports what the previous one ran as
 * lost (or exited) instead of pretending it runs. The daemon's front door (a
 * SIGKILLed `troupe serve`) is test/cli/WorkspaceServe.test.ts's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Layer, Scope } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as LocalWorkspace from "../../src/layers/LocalWorkspace.js"
import * as MemoryWorkspace from "../../src/layers/MemoryWorkspace.js"
import type { SessionId } from "../../src/schema/Ids.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import * as Builtins from "../../src/tools/Builtins.js"
import * as OutputBuffer from "../../src/tools/workspace/OutputBuffer.js"
import * as ProcessTable from "../../src/tools/workspace/ProcessTable.js"
import { alive, allGone } from "../support/pids.js"
import { asks, call, errorOf } from "./harness.js"

const A = "ses_a"
const B = "ses_b"

const tools = (root: string, options: Builtins.Options = {}) =>
  Builtins.layerWith(options).pipe(Layer.provide(LocalWorkspace.layerWith({ root })))

/** A tool's success output, or a failure naming its error. */
const ok = (name: string, args: unknown, session = A) =>
  Effect.flatMap(call(name, args, `op_${name}`, session), (outcome) =>
    outcome.isError ? Effect.dieMessage(`${name} failed: ${errorOf(outcome)}`) : Effect.succeed(outcome.output as any))

/** Reads until the process has exited, following the cursor. */
const readAll = (id: string, session = A) =>
  Effect.gen(function*() {
    let cursor = 0
    let text = ""
    let skipped = 0
    for (;;) {
      const page = yield* ok("process.read", { id, cursor, waitSeconds: 5 }, session)
      text += page.output
      skipped += page.skipped
      cursor = page.cursor
      if (page.status !== "running" && !page.more) return { ...page, text, skipped }
    }
  })

describe("OutputBuffer", () => {
  it("keeps the last bytes, says how many a late cursor missed, and never cuts a character", () => {
    const buffer = OutputBuffer.make(8)
    OutputBuffer.append(buffer, new TextEncoder().encode("abcdef"))
    OutputBuffer.append(buffer, new TextEncoder().encode("ghijkl"))
    assert.strictEqual(buffer.end, 12)
    const late = OutputBuffer.read(buffer, 1, 100)
    assert.deepStrictEqual([new TextDecoder().decode(late.bytes), late.from, late.next, late.skipped], ["efghijkl", 4, 12, 3])
    const paged = OutputBuffer.read(buffer, 6, 3)
    assert.deepStrictEqual([new TextDecoder().decode(paged.bytes), paged.next, paged.skipped], ["ghi", 9, 0])
    const whole = OutputBuffer.make(100)
    OutputBuffer.append(whole, new TextEncoder().encode("aé€"))
    // 1 + 2 + 3 bytes: a cut after 4 bytes ends before the euro sign, which the next read gives whole.
    const first = OutputBuffer.read(whole, 0, 4)
    assert.deepStrictEqual([new TextDecoder().decode(first.bytes), first.next], ["aé", 3])
    assert.strictEqual(new TextDecoder().decode(OutputBuffer.read(whole, first.next, 4).bytes), "€")
    // One chunk bigger than the whole buffer keeps its end.
    const small = OutputBuffer.make(4)
    OutputBuffer.append(small, new TextEncoder().encode("0123456789"))
    assert.deepStrictEqual([new TextDecoder().decode(OutputBuffer.read(small, 0, 100).bytes), OutputBuffer.start(small)], ["6789", 6])
  })
})

describe("process.*", () => {
  it.live("output from a cursor, stdin, signals, bounds and limits; each session sees only its own; its close stops them", () => {
    const root = mkdtempSync(join(tmpdir(), "tp-"))
    return Effect.gen(function*() {
      const toolkit = yield* Toolkit.Toolkit
      assert.isTrue(yield* asks("process.start", { command: "true" }))
      assert.isFalse(yield* asks("process.read", { id: "p1" }))

      // stdin in, output out, a cursor and a wait; SIGTERM ends it.
      const cat = yield* ok("process.start", { command: "cat" })
      assert.strictEqual(cat.id, "p1")
      assert.strictEqual(cat.status, "running")
      yield* ok("process.write", { id: "p1", data: "hello\n" })
      const first = yield* ok("process.read", { id: "p1", waitSeconds: 10 })
      assert.deepStrictEqual([first.output, first.cursor, first.status], ["hello\n", 6, "running"])
      yield* ok("process.write", { id: "p1", data: "again\n" })
      const second = yield* ok("process.read", { id: "p1", cursor: first.cursor, waitSeconds: 10 })
      assert.strictEqual(second.output, "again\n")
      assert.match(errorOf(yield* call("process.read", { id: "p1", cursor: 99 }, "op_r", A)), /past its output/)
      yield* ok("process.signal", { id: "p1" })
      const ended = yield* ok("process.read", { id: "p1", cursor: second.cursor, waitSeconds: 10 })
      assert.deepStrictEqual([ended.status, ended.signal], ["exited", "SIGTERM"])
      assert.match(errorOf(yield* call("process.write", { id: "p1", data: "x" }, "op_w", A)), /has exited/)

      // A command that writes more than the buffer keeps: the last bytes, and how many were dropped.
      const seq = yield* ok("process.start", { command: "seq 1 5000" })
      const all = yield* readAll(seq.id)
      assert.strictEqual(all.exitCode, 0)
      assert.isAbove(all.skipped, 0)
      assert.isTrue(all.text.endsWith("4999\n5000\n"))
      assert.strictEqual(all.text.length + all.skipped, Array.from({ length: 5000 }, (_, i) => `${i + 1}\n`).join("").length)

      // A process with a background child of its own, both recorded by pid; and the per-session limit.
      const sleeper = yield* ok("process.start", { command: "sleep 300 & echo $! > bg.pid; sleep 300" })
      yield* ok("process.start", { command: "sleep 300" })
      assert.match(errorOf(yield* call("process.start", { command: "sleep 1" }, "op_s", A)), /as many processes as it may/)

      // Session B sees none of A's, and cannot touch them.
      assert.deepStrictEqual((yield* ok("process.list", {}, B)).processes, [])
      assert.match(errorOf(yield* call("process.read", { id: sleeper.id }, "op_b", B)), /started no process/)
      assert.match(errorOf(yield* call("process.signal", { id: sleeper.id, signal: "SIGKILL" }, "op_b", B)), /started no process/)
      const listed = (yield* ok("process.list", {})).processes
      assert.deepStrictEqual(listed.map((p: any) => [p.id, p.status]), [["p1", "exited"], ["p2", "exited"], ["p3", "running"], ["p4", "running"]])
      assert.isTrue(existsSync(join(root, ProcessTable.recordPath(A))))

      // A's close stops its processes and what they started; its record goes.
      const background = Number(readFileSync(join(root, "bg.pid"), "utf8"))
      const pids = [sleeper.pid, listed[3].pid, background]
      assert.isTrue(pids.every(alive))
      yield* toolkit.sessionClosed!(A as SessionId)
      yield* allGone(pids)
      assert.isFalse(existsSync(join(root, ProcessTable.recordPath(A))))
    }).pipe(
      Effect.provide(tools(root, { maxProcesses: 2, processOutputBytes: 4096 })),
      Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true, force: true })))
    )
  }, 30_000)

  it.live("a host started again reports the processes of the one before as lost (or exited), and stopped them", () => {
    const root = mkdtempSync(join(tmpdir(), "tp-"))
    return Effect.gen(function*() {
      // The first host: one process that ended, one still running when the host stops.
      const scope = yield* Scope.make()
      const before = yield* Effect.provide(
        Effect.gen(function*() {
          const done = yield* ok("process.start", { command: "exit 3" })
          yield* readAll(done.id)
          return yield* ok("process.start", { command: "sleep 300" })
        }),
        yield* Layer.buildWithScope(tools(root), scope)
      )
      assert.isTrue(alive(before.pid))
      yield* Scope.close(scope, Exit.void)
      yield* allGone([before.pid])

      // The next host on the same workspace.
      yield* Effect.gen(function*() {
        const listed = (yield* ok("process.list", {})).processes
        assert.deepStrictEqual(listed.map((p: any) => [p.id, p.status, p.exitCode]), [["p1", "exited", 3], ["p2", "lost", undefined]])
        assert.isUndefined(listed[1].pid)
        assert.match(errorOf(yield* call("process.read", { id: "p2" }, "op_r", A)), /lost/)
        assert.match(errorOf(yield* call("process.signal", { id: "p2" }, "op_s", A)), /lost/)
        // New ones take new ids.
        assert.strictEqual((yield* ok("process.start", { command: "true" })).id, "p3")
      }).pipe(Effect.provide(tools(root)))
    }).pipe(Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true, force: true }))))
  }, 30_000)

  it.live("a memory workspace runs nothing: process.start says so and records nothing", () =>
    Effect.gen(function*() {
      assert.match(errorOf(yield* call("process.start", { command: "true" })), /runs no commands/)
      assert.deepStrictEqual((yield* ok("process.list", {})).processes, [])
      const names = Either.getOrThrow(Builtins.specs(["process"])).map((spec) => spec.name)
      assert.deepStrictEqual(names, ["process.start", "process.list", "process.read", "process.write", "process.signal"])
      assert.includeMembers(Either.getOrThrow(Builtins.specs(["all"])).map((spec) => spec.name), names)
    }).pipe(Effect.provide(Builtins.layer.pipe(Layer.provide(MemoryWorkspace.layer)))))
})
