import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as LocalWorkspace from "../../src/layers/LocalWorkspace.js"
import * as MemoryWorkspace from "../../src/layers/MemoryWorkspace.js"
import * as Builtins from "../../src/tools/Builtins.js"
import * as Walk from "../../src/tools/workspace/Walk.js"
import { asks, call, errorOf } from "./harness.js"

const dir = () => mkdtempSync(join(tmpdir(), "tw-"))

const local = (root: string, options: Partial<LocalWorkspace.Options> = {}) =>
  Builtins.layerWith({ writable: ["notes/**"] }).pipe(Layer.provide(LocalWorkspace.layerWith({ root, ...options })))

describe("LocalWorkspace", () => {
  it.live("refuses escapes: .., absolute, symlinks out, NUL, very long paths, devices; follows symlinks in", () =>
    Effect.gen(function*() {
      const root = dir()
      const outside = dir()
      writeFileSync(join(outside, "secret.txt"), "outside")
      writeFileSync(join(root, "a.txt"), "inside")
      symlinkSync(join(outside, "secret.txt"), join(root, "out.txt"))
      symlinkSync(outside, join(root, "outdir"))
      symlinkSync(join(root, "a.txt"), join(root, "in.txt"))
      symlinkSync("/dev/null", join(root, "null"))
      const handle = LocalWorkspace.makeHandle(root)
      const reason = (path: string) =>
        Effect.map(Effect.flip(handle.read(path)), (e) => (e._tag === "PathRefused" ? e.reason : e.code))
      assert.strictEqual(yield* reason("../x"), "outside_root")
      assert.strictEqual(yield* reason("a/../../x"), "outside_root")
      assert.strictEqual(yield* reason("/etc/passwd"), "absolute")
      assert.strictEqual(yield* reason("out.txt"), "symlink_escape")
      assert.strictEqual(yield* reason("outdir/secret.txt"), "symlink_escape")
      assert.strictEqual(yield* reason("a\0.txt"), "nul_byte")
      assert.strictEqual(yield* reason("x/".repeat(3000)), "too_long")
      assert.strictEqual(yield* reason("null"), "symlink_escape")
      assert.strictEqual(new TextDecoder().decode(yield* handle.read("in.txt")), "inside")
      // Writing through a link leading out is refused as well.
      assert.strictEqual((yield* Effect.flip(handle.write("outdir/new.txt", "x")))._tag, "PathRefused")
      rmSync(root, { recursive: true })
      rmSync(outside, { recursive: true })
    }))

  it.live("refuses device files inside the root and leaves sensitive files out unless allowed", () =>
    Effect.gen(function*() {
      const root = dir()
      writeFileSync(join(root, ".env"), "TOKEN=1")
      writeFileSync(join(root, "id_rsa"), "key")
      writeFileSync(join(root, "ok.txt"), "TOKEN here")
      execFileSync("mkfifo", [join(root, "pipe")])
      const handle = LocalWorkspace.makeHandle(root)
      assert.strictEqual(((yield* Effect.flip(handle.read("pipe"))) as { reason?: string }).reason, "special_file")
      assert.strictEqual(((yield* Effect.flip(handle.read(".env"))) as { reason?: string }).reason, "sensitive")
      assert.deepStrictEqual((yield* handle.list(".")).map((e) => e.name), ["ok.txt", "pipe"])
      const open = LocalWorkspace.makeHandle(root, { allowSensitive: true })
      assert.strictEqual(new TextDecoder().decode(yield* open.read(".env")), "TOKEN=1")
      rmSync(root, { recursive: true })
    }))
})

describe("file tools", () => {
  it.live("read_file bounds, cursors (refused after a change), tails, binaries; edit_file ambiguity", () => {
    const root = dir()
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i + 1}`).join("\n") + "\n"
    writeFileSync(join(root, "big.txt"), lines)
    writeFileSync(join(root, "bin.dat"), Buffer.from([1, 2, 0, 3]))
    writeFileSync(join(root, "dup.txt"), "x = 1\ny = 2\nx = 1\n")
    return Effect.gen(function*() {
      const first = (yield* call("read_file", { path: "big.txt" })).output as any
      assert.strictEqual(first.lines, 2000)
      assert.isTrue(first.text.startsWith("line 1\n"))
      const second = (yield* call("read_file", { path: "big.txt", cursor: first.cursor })).output as any
      assert.strictEqual(second.startLine, 2001)
      assert.isTrue(second.text.startsWith("line 2001\n"))
      const tail = (yield* call("read_file", { path: "big.txt", startLine: -2 })).output as any
      assert.strictEqual(tail.text, "line 4999\nline 5000\n")
      const mid = (yield* call("read_file", { path: "big.txt", startLine: 10, lineCount: 2 })).output as any
      assert.strictEqual(mid.text, "line 10\nline 11\n")
      assert.isTrue(((yield* call("read_file", { path: "bin.dat" })).output as any).binary)
      // Another path, a bad offset, then a changed file.
      assert.match(errorOf(yield* call("read_file", { path: "dup.txt", cursor: first.cursor })), /another path/)
      const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(first.cursor, "base64url").toString()), o: 3 })).toString("base64url")
      assert.match(errorOf(yield* call("read_file", { path: "big.txt", cursor: forged })), /offset/)
      writeFileSync(join(root, "big.txt"), lines + "more\n")
      assert.match(errorOf(yield* call("read_file", { path: "big.txt", cursor: first.cursor })), /changed/)

      const ambiguous = yield* call("edit_file", { path: "dup.txt", oldText: "x = 1", newText: "x = 3" })
      assert.match(errorOf(ambiguous), /occurs 2 times \(lines 1, 3\)/)
      assert.match(errorOf(yield* call("edit_file", { path: "dup.txt", oldText: "z", newText: "w" })), /not found/)
      const edited = (yield* call("edit_file", { path: "dup.txt", oldText: "x = 1\ny", newText: "x = 3\ny" })).output as any
      assert.strictEqual(edited.replacements, 1)
      const all = (yield* call("edit_file", { path: "dup.txt", oldText: "= ", newText: ":= ", replaceAll: true })).output as any
      assert.strictEqual(all.replacements, 3)
      const written = yield* call("write_file", { path: "notes/a/b.md", content: "hi" })
      assert.isFalse(written.isError)
      // Writes outside the allow-list, and every bash call, ask for an approval.
      assert.isFalse(yield* asks("write_file", { path: "notes/x.md", content: "" }))
      assert.isTrue(yield* asks("write_file", { path: "src/x.ts", content: "" }))
      assert.isTrue(yield* asks("bash", { command: "true" }))
    }).pipe(Effect.provide(local(root)), Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true }))))
  })

  it.live("the memory workspace runs the same file tools, and refuses commands", () =>
    Effect.gen(function*() {
      const read = (yield* call("read_file", { path: "src/a.ts" })).output as any
      assert.strictEqual(read.text, "export const a = 1\n")
      assert.match(errorOf(yield* call("read_file", { path: "../a" })), /outside the workspace root/)
      assert.match(errorOf(yield* call("read_file", { path: ".env" })), /sensitive/)
      const found = (yield* call("search_files", { pattern: "CONST" })).output as any
      assert.deepStrictEqual(found.matches, [])
      const smart = (yield* call("search_files", { pattern: "const" })).output as any
      assert.deepStrictEqual(smart.matches.map((m: any) => m.path), ["src/a.ts"])
      assert.match(errorOf(yield* call("bash", { command: "true" })), /unsupported|runs no commands/)
    }).pipe(Effect.provide(Builtins.layer.pipe(Layer.provide(MemoryWorkspace.layerWith({
      files: { "src/a.ts": "export const a = 1\n", ".env": "SECRET=1" }
    }))))))
})

describe("find_files and search_files on a generated tree (the 100,000-file tree is bench/workspace.ts's)", () => {
  it.live("cap 100 paths, dependency roots summarized, ripgrep and the built-in walk give the same matches", () => {
    const root = dir()
    // 10 directories of 250 files: enough for the cap (creating 100,000 takes minutes on a loaded machine: bench/workspace.ts
    // measures that tree), a dependency root, hidden files.
    execFileSync("sh", ["-c", `cd ${root} && for d in $(seq -f %02g 0 9); do mkdir d$d; (cd d$d && seq -w 100 349 | sed 's/^/f/;s/$/.txt/' | xargs touch); done
      echo "needle One" > d07/f123.txt; echo "a needle two" > d09/f349.txt; echo "Needle three" > d09/f101.txt
      mkdir -p node_modules/pkg .hidden && echo needle > node_modules/pkg/x.txt && echo needle > .hidden/y.txt
      echo needle > .env; echo needle > id_rsa; echo needle > d01/server.pem; printf 'needle\\0bin' > d00/bin.txt`], { timeout: 60_000 })
    return Effect.gen(function*() {
      const found = (yield* call("find_files", { pattern: "**/*.txt" })).output as any
      assert.strictEqual(found.paths.length, 100)
      assert.strictEqual(found.matched, 2_501)
      assert.isTrue(found.truncated)
      assert.deepStrictEqual(found.skipped, [{ path: "node_modules", entries: 1 }])
      assert.strictEqual(found.paths[0], "d00/bin.txt")
      const capped = yield* call("find_files", { pattern: "**", limit: 5000 })
      assert.isTrue(capped.isError)
      const ripgrep = (yield* call("search_files", { pattern: "needle" })).output as any
      assert.strictEqual(ripgrep.engine, "ripgrep")
      const withRg = ripgrep.matches
      const builtin = (yield* Effect.provide(
        call("search_files", { pattern: "needle" }),
        local(root, { ripgrep: false })
      )).output as any
      assert.strictEqual(builtin.engine, "builtin")
      assert.deepStrictEqual(builtin.matches, withRg)
      assert.deepStrictEqual(withRg.map((m: any) => m.path), ["d07/f123.txt", "d09/f101.txt", "d09/f349.txt"])
      const smartCase = (yield* call("search_files", { pattern: "Needle" })).output as any
      assert.deepStrictEqual(smartCase.matches.map((m: any) => m.path), ["d09/f101.txt"])
      const secrets = (yield* call("find_files", { pattern: "**/{*.pem,.env,id_rsa}", includeHidden: true })).output as any
      assert.strictEqual(secrets.matched, 0)
      // Everything included but what never is: sensitive files (.env, id_rsa, *.pem) and binary ones.
      const everything = { pattern: "needle", includeHidden: true, includeDependencies: true }
      const hidden = (yield* call("search_files", everything)).output as any
      const hiddenBuiltin = (yield* Effect.provide(call("search_files", everything), local(root, { ripgrep: false }))).output as any
      assert.deepStrictEqual(hidden.matches.map((m: any) => m.path), [".hidden/y.txt", "d07/f123.txt", "d09/f101.txt", "d09/f349.txt", "node_modules/pkg/x.txt"])
      assert.deepStrictEqual(hiddenBuiltin.matches, hidden.matches)
      // Globs, matched by one matcher for both engines.
      const globbed = { ...everything, globs: ["*/*/x.txt", ".hidden/*"] }
      const byGlob = (yield* call("search_files", globbed)).output as any
      const byGlobBuiltin = (yield* Effect.provide(call("search_files", globbed), local(root, { ripgrep: false }))).output as any
      assert.deepStrictEqual(byGlob.matches.map((m: any) => m.path), [".hidden/y.txt", "node_modules/pkg/x.txt"])
      assert.deepStrictEqual(byGlobBuiltin.matches, byGlob.matches)
    }).pipe(Effect.provide(local(root)), Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true }))))
  }, 60_000)
})

describe("the walk's scan limit", () => {
  it.effect("stops after the limit and says so (find_files marks its counts estimated)", () =>
    Effect.gen(function*() {
      const files = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`d${i % 3}/f${String(i).padStart(2, "0")}.txt`, ""]))
      const handle = MemoryWorkspace.makeHandle({ files })
      const seen: Array<string> = []
      const options = { includeHidden: false, includeDependencies: false, scanLimit: 10 }
      const summary = yield* Walk.walk(handle, ".", options, (path) => Effect.sync(() => seen.push(path)).pipe(Effect.as(true)))
      assert.deepStrictEqual([summary.scanned, summary.stopped, seen.length], [10, true, 10])
      const whole = yield* Walk.walk(handle, ".", { ...options, scanLimit: 100 }, () => Effect.succeed(true))
      assert.deepStrictEqual([whole.scanned, whole.stopped], [33, false])
    }))
})

describe("bash", () => {
  it.live("bash's environment: the run's env, then its agent's over it, and nothing else of the host's", () => {
    const root = dir()
    process.env.SECRET_TOKEN = "daemon-secret"
    const tools = Builtins.layerWith({
      env: { A: "run", B: "run" },
      agentEnv: { root: { B: "agent", C: "agent" }, other: { A: "other" } },
      ask: false
    }).pipe(Layer.provide(LocalWorkspace.layerWith({ root })))
    return Effect.gen(function*() {
      const ran = (yield* call("bash", { command: "echo \"$A-$B-$C-$SECRET_TOKEN\"" })).output as any
      assert.strictEqual(ran.output.trim(), "run-agent-agent-")
    }).pipe(
      Effect.provide(tools),
      Effect.ensuring(Effect.sync(() => {
        delete process.env.SECRET_TOKEN
        rmSync(root, { recursive: true })
      }))
    )
  })
  it.live("a timeout kills the whole process group; long output is cut and read back whole", () => {
    const root = dir()
    return Effect.gen(function*() {
      const marker = join(root, "orphan")
      const slow = (yield* call("bash", { command: `(sleep 3; touch ${marker}) & sleep 30`, timeoutSeconds: 0.5 })).output as any
      assert.isTrue(slow.timedOut)
      yield* Effect.sleep("3500 millis")
      assert.isFalse(yield* Effect.sync(() => { try { execFileSync("test", ["-e", marker]); return true } catch { return false } }))
      process.env.SECRET_TOKEN = "daemon-secret"
      const long = (yield* call("bash", { command: "seq 1 20000; echo $SECRET_TOKEN; pwd" }, "op_long")).output as any
      delete process.env.SECRET_TOKEN
      assert.strictEqual(long.exitCode, 0)
      assert.isBelow(long.output.length, 17_000)
      assert.strictEqual(long.artifactId, "bash-op_long")
      let whole = ""
      for (let offset = 0; ;) {
        const page = (yield* call("read_artifact", { artifactId: long.artifactId, offset })).output as string
        const body = page.slice(page.indexOf("\n") + 1)
        whole += body
        const next = /read on with "offset": (\d+)/.exec(page)
        if (next === null) break
        offset = Number(next[1])
      }
      const expected = Array.from({ length: 20000 }, (_, i) => `${i + 1}`).join("\n") + "\n\n"
      assert.isTrue(whole.startsWith(expected))
      // The daemon's variables do not leak: $SECRET_TOKEN is empty.
      assert.notInclude(whole, "daemon-secret")
    }).pipe(
      Effect.provide(local(root)),
      Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true })))
    )
  }, 20_000)

  it("Builtins.specs expands groups and refuses unknown names", () => {
    const names = Either.getOrThrow(Builtins.specs(["files", "bash"])).map((s) => s.name)
    assert.deepStrictEqual(names, ["read_file", "write_file", "edit_file", "find_files", "search_files", "bash", "read_artifact"])
    assert.deepStrictEqual(Builtins.specs(["nope"]), Either.left("nope"))
    const bash = Either.getOrThrow(Builtins.specs(["bash"]))[0]!
    assert.strictEqual(bash.sideEffect, "execute")
    assert.deepStrictEqual(bash.capabilities, ["process.execute"])
  })
})
