/**
 * The package's entry point reads as a table of contents (CONVENTIONS 1):
 * only `export * as X from "./…/X.js"`, named after the module it exports,
 * in alphabetical order, each under its one-line JSDoc.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { basename, dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as Index from "../src/index.js"

const source = readFileSync(resolve(dirname(fileURLToPath(import.meta.url)), "../src/index.ts"), "utf8")

/** The statements after the module doc: each a JSDoc line and its export. */
const body = source.slice(source.indexOf("*/") + 2).split("\n").filter((line) => line.trim() !== "")

describe("src/index.ts", () => {
  it("is only one-line JSDoc and `export * as` pairs, each named after its module", () => {
    assert.isAbove(body.length, 0)
    assert.strictEqual(body.length % 2, 0, "every export has exactly one JSDoc line above it")
    for (let i = 0; i < body.length; i += 2) {
      const doc = body[i]!
      const statement = body[i + 1]!
      assert.match(doc, /^\/\*\* \S.*\S \*\/$/, `a one-line JSDoc above ${statement}`)
      const match = /^export \* as (\w+) from "(\.\/[\w/]+)\.js"$/.exec(statement)
      assert.isNotNull(match, `an \`export * as\` statement: ${statement}`)
      assert.strictEqual(match![1], basename(match![2]!), statement)
    }
  })

  it("lists its exports in alphabetical order, and exports each of them", () => {
    const names = body.filter((line) => line.startsWith("export")).map((line) => line.split(" ")[3]!)
    assert.deepStrictEqual(names, [...names].sort((a, b) => a.localeCompare(b, "en")))
    assert.deepStrictEqual(Object.keys(Index).sort(), [...names].sort())
  })
})
