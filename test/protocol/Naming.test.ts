/**
 * Daemon naming: the PROTOCOL.md digest vectors, the socket path layout, the
 * troupe home from configuration, and the 1..128-byte name rule.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { homedir } from "node:os"
import { join } from "node:path"
import * as Naming from "../../src/protocol/Naming.js"
import { InvalidName } from "../../src/protocol/ProtocolError.js"

const withEnv = (entries: ReadonlyArray<readonly [string, string]>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(entries)))

const invalid = <A>(result: Either.Either<A, InvalidName>): InvalidName => {
  assert.isTrue(Either.isLeft(result))
  return (result as Either.Left<InvalidName, A>).left
}

describe("Naming", () => {
  it("digests the vectors", () => {
    assert.deepStrictEqual(Naming.digest("worker"), Either.right("87eba76e7f3164534045ba92"))
    assert.deepStrictEqual(Naming.digest("工作"), Either.right("bc62d1b6b936c78dbbd0bbe5"))
  })

  it.effect("socketPath with an explicit home", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Naming.socketPath("worker", "/srv/troupe"), "/srv/troupe/run/sandboxes/87eba76e7f3164534045ba92/agent.sock")
      assert.strictEqual(yield* Naming.socketPath("工作", "/h"), "/h/run/sandboxes/bc62d1b6b936c78dbbd0bbe5/agent.sock")
      assert.deepStrictEqual(Naming.socketPathIn("/h", "worker"), Either.right("/h/run/sandboxes/87eba76e7f3164534045ba92/agent.sock"))
    }))

  it.effect("socketPath without a home uses $TROUPE_HOME", () =>
    Effect.gen(function*() {
      const path = yield* Naming.socketPath("worker").pipe(withEnv([["TROUPE_HOME", "/var/lib/troupe"]]))
      assert.strictEqual(path, "/var/lib/troupe/run/sandboxes/87eba76e7f3164534045ba92/agent.sock")
    }))

  it.effect("socketPath without a home and with TROUPE_HOME unset or empty uses ~/.troupe", () =>
    Effect.gen(function*() {
      const expected = join(homedir(), ".troupe", "run", "sandboxes", "87eba76e7f3164534045ba92", "agent.sock")
      assert.strictEqual(yield* Naming.socketPath("worker").pipe(withEnv([])), expected)
      assert.strictEqual(yield* Naming.socketPath("worker").pipe(withEnv([["TROUPE_HOME", ""]])), expected)
    }))

  it("names of 1 to 128 UTF-8 bytes are accepted, counted in bytes rather than characters", () => {
    for (const name of ["a", "a".repeat(128), "工".repeat(42), "🎭".repeat(32), "../../etc", "with/slash", " "]) {
      const result = Naming.digest(name)
      assert.isTrue(Either.isRight(result), name)
      assert.match(Either.getOrThrow(result), /^[0-9a-f]{24}$/)
    }
  })

  it.effect("empty, over-long and ill-formed names are InvalidName", () =>
    Effect.gen(function*() {
      assert.strictEqual(invalid(Naming.digest("")).reason, "empty")
      assert.include(invalid(Naming.digest("a".repeat(129))).reason, "129 UTF-8 bytes")
      // 43 three-byte characters: 43 characters but 129 bytes.
      assert.include(invalid(Naming.digest("工".repeat(43))).reason, "129 UTF-8 bytes")
      // A lone surrogate would be written as U+FFFD and collide with the name that has U+FFFD there.
      assert.strictEqual(invalid(Naming.digest("a\uD800")).reason, "not well-formed Unicode")
      assert.strictEqual(invalid(Naming.digest("\uDC00b")).reason, "not well-formed Unicode")
      // The error carries a recognisable prefix of the name, never all of a huge one.
      assert.strictEqual(invalid(Naming.digest("x".repeat(10_000))).name, "x".repeat(32))
      const error = yield* Effect.flip(Naming.socketPath("", "/h"))
      assert.instanceOf(error, InvalidName)
    }))
})
