/**
 * The layout of DESIGN §2, read from the sources' own imports (static,
 * type-only, re-exporting and dynamic):
 *
 * - the client knows only the wire: no file under src/client imports the
 *   runtime (`services`, `actors`, `layers`, `server`, `cli`, `Troupe.ts`);
 * - src/cli and src/client have no import circles: where two modules share
 *   types, the types live in a third (`ServeOptions`, `RunOptions`).
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")

/** What the client may not reach: the runtime, and everything built on it. */
const forbidden = ["src/services/", "src/actors/", "src/layers/", "src/server/", "src/cli/", "src/Troupe.ts"]

/** The module specifiers a source imports: `import … from`, `import type`, `export … from`, `import("…")`, `import "…"`. */
const importsOf = (source: string): ReadonlyArray<string> =>
  Array.from(
    source.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["']([^"']+)["']/gm),
    (match) => match[1]!
  )

/** The `.ts` files under `dir` (relative to the repository), recursively. */
const filesUnder = (dir: string): ReadonlyArray<string> =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesUnder(join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [join(dir, entry.name)]
      : []
  )

/** The files `file` imports within the repository, as paths relative to it (`src/protocol/Cbor.ts`). */
const localImportsOf = (file: string): ReadonlyArray<string> =>
  importsOf(readFileSync(join(root, file), "utf8"))
    .filter((specifier) => specifier.startsWith("."))
    .map((specifier) => relative(root, resolve(root, dirname(file), specifier)).replace(/\.js$/, ".ts"))

/** Every import circle of a graph (each as the path that closes it), found depth first. */
const circlesOf = (edges: ReadonlyMap<string, ReadonlyArray<string>>): ReadonlyArray<string> => {
  const done = new Set<string>()
  const circles: Array<string> = []
  const visit = (node: string, path: ReadonlyArray<string>): void => {
    for (const target of edges.get(node) ?? []) {
      const at = path.indexOf(target)
      if (at >= 0) circles.push([...path.slice(at), target].join(" → "))
      else if (!done.has(target)) visit(target, [...path, target])
    }
    done.add(node)
  }
  for (const node of edges.keys()) if (!done.has(node)) visit(node, [node])
  return circles
}

/** The import graph of `files`, restricted to them. */
const graphOf = (files: ReadonlyArray<string>): ReadonlyMap<string, ReadonlyArray<string>> => {
  const inside = new Set(files)
  return new Map(files.map((file) => [file, localImportsOf(file).filter((target) => inside.has(target))]))
}

describe("layout", () => {
  it("reads every form of import", () => {
    const source = [
      `import { Effect } from "effect"`,
      `import type * as A from "../services/A.js"`,
      `export { b } from "../actors/B.js"`,
      `const c = () => import("../layers/C.js")`,
      `import "../server/D.js"`,
      `const text = "not from here"`
    ].join("\n")
    assert.deepStrictEqual(importsOf(source), ["effect", "../services/A.js", "../actors/B.js", "../layers/C.js", "../server/D.js"])
  })

  it("no file under src/client imports services, actors, layers or anything else of the runtime", () => {
    const files = filesUnder("src/client")
    assert.includeMembers([...files], ["src/client/AgentClient.ts", "src/client/PromiseClient.ts", "src/client/SessionClient.ts"])
    const imported = files.flatMap((file) => localImportsOf(file).map((target) => [file, target] as const))
    assert.deepStrictEqual(
      imported.filter(([, target]) => forbidden.some((prefix) => target.startsWith(prefix))).map(([file, target]) =>
        `${file} imports ${target}`
      ),
      []
    )
    // What it does import is read, not assumed: the codec and the schemas.
    assert.isTrue(imported.some(([, target]) => target === "src/protocol/Cbor.ts"))
    assert.isTrue(imported.some(([, target]) => target.startsWith("src/schema/")))
  })

  it("finds import circles, dynamic imports included", () => {
    assert.deepStrictEqual(
      circlesOf(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a", "d"]], ["d", []], ["e", ["e"]], ["f", ["a"]]])),
      ["a → b → c → a", "e → e"]
    )
    // The command modules load their runs with a dynamic import: were the option types still declared
    // in the command modules, Serve ↔ Daemon and RunCommand ↔ EmbeddedRun would be circles.
    const cli = graphOf(filesUnder("src/cli"))
    assert.include(cli.get("src/cli/Serve.ts") ?? [], "src/cli/Daemon.ts")
    assert.include(cli.get("src/cli/RunCommand.ts") ?? [], "src/cli/EmbeddedRun.ts")
    assert.include(cli.get("src/cli/Daemon.ts") ?? [], "src/cli/ServeOptions.ts")
    assert.include(cli.get("src/cli/EmbeddedRun.ts") ?? [], "src/cli/RunOptions.ts")
  })

  it("src/cli and src/client have no import circles", () => {
    assert.deepStrictEqual(circlesOf(graphOf([...filesUnder("src/cli"), ...filesUnder("src/client")])), [])
  })
})
