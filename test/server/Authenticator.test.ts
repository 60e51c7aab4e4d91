/**
 * Authenticators: a token table, a token file (and its errors, which never
 * name a token), and trusted-local peers on top of either.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Schema } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Principal } from "../../src/schema/Principal.js"
import * as Authenticator from "../../src/server/Authenticator.js"
import { principal } from "../support/fixtures.js"
import { tempDir } from "./harness.js"

const alice = principal("alice")
const bob = principal()
const unix = { listener: "unix", trustedLocal: true } as const
const tcp = { listener: "tcp", trustedLocal: false } as const

const authenticate = (
  layer: Layer.Layer<Authenticator.Authenticator, unknown>,
  token: string | undefined,
  peer: Authenticator.AuthPeer = tcp
) =>
  Effect.flatMap(Authenticator.Authenticator, (auth) => Effect.either(auth.authenticate(token, peer))).pipe(
    Effect.provide(layer)
  )

describe("Authenticator", () => {
  it.effect("layerStatic: a known token is its principal; a missing, empty or unknown one is unauthenticated", () =>
    Effect.gen(function*() {
      const layer = Authenticator.layerStatic({ "tok-a": alice, "tok-b": bob })
      assert.deepStrictEqual(yield* authenticate(layer, "tok-a"), Either.right(alice))
      assert.deepStrictEqual(yield* authenticate(layer, "tok-b", unix), Either.right(bob))
      for (const token of [undefined, "", "tok-c", "tok-a "]) {
        const result = yield* authenticate(layer, token)
        assert.isTrue(Either.isLeft(result) && result.left.kind === "unauthenticated", String(token))
      }
    }))

  it.effect("layerTrustedLocal: a trusted peer without a token is the local principal; tokens go to the fallback", () =>
    Effect.gen(function*() {
      const withTokens = Authenticator.layerTrustedLocal(alice, Authenticator.layerStatic({ "tok-b": bob }))
      assert.deepStrictEqual(yield* authenticate(withTokens, undefined, unix), Either.right(alice))
      assert.deepStrictEqual(yield* authenticate(withTokens, "tok-b", unix), Either.right(bob))
      assert.deepStrictEqual(yield* authenticate(withTokens, "tok-b", tcp), Either.right(bob))
      assert.isTrue(Either.isLeft(yield* authenticate(withTokens, undefined, tcp)))
      assert.isTrue(Either.isLeft(yield* authenticate(withTokens, "nope", unix)))
      const localOnly = Authenticator.layerTrustedLocal(alice)
      assert.deepStrictEqual(yield* authenticate(localOnly, undefined, unix), Either.right(alice))
      assert.isTrue(Either.isLeft(yield* authenticate(localOnly, "anything", unix)))
    }))

  it.scoped("layerFile: reads { tokens: { token: principal } }", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const path = join(dir, "tokens.json")
      const encode = Schema.encodeSync(Principal)
      writeFileSync(path, JSON.stringify({ tokens: { "file-token": encode(alice), other: encode(bob) } }), { mode: 0o600 })
      const layer = Authenticator.layerFile(path)
      assert.deepStrictEqual(yield* authenticate(layer, "file-token"), Either.right(alice))
      assert.deepStrictEqual(yield* authenticate(layer, "other"), Either.right(bob))
      assert.isTrue(Either.isLeft(yield* authenticate(layer, "missing")))
    }))

  it.scoped("layerFile: a bad file is AuthConfigError, and the error never contains a token", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const encode = Schema.encodeSync(Principal)
      const files: Record<string, string> = {
        "not-json": "{ tokens: ",
        "no-tokens": JSON.stringify({ token: {} }),
        "bad-principal": JSON.stringify({ tokens: { "secret-one": encode(alice), "secret-two": { customerId: "x" } } }),
        "excess-field": JSON.stringify({ tokens: { "secret-three": { ...encode(alice), role: "admin" } } })
      }
      for (const [name, text] of Object.entries(files)) {
        const path = join(dir, `${name}.json`)
        writeFileSync(path, text)
        const built = yield* Effect.either(Layer.build(Authenticator.layerFile(path)))
        assert.isTrue(Either.isLeft(built), name)
        if (Either.isLeft(built)) {
          assert.strictEqual(built.left._tag, "AuthConfigError", name)
          assert.strictEqual(built.left.path, path)
          assert.notInclude(built.left.message, "secret", name)
        }
      }
      const missing = yield* Effect.either(Layer.build(Authenticator.layerFile(join(dir, "absent.json"))))
      assert.isTrue(Either.isLeft(missing) && missing.left.reason.includes("ENOENT"))
      // Entries are named by position.
      const bad = yield* Effect.either(Layer.build(Authenticator.layerFile(join(dir, "bad-principal.json"))))
      assert.isTrue(Either.isLeft(bad) && bad.left.reason.startsWith("the principal of token #2 is invalid"))
    }))
})
