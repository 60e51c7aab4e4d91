/**
 * The layout of DESIGN §2, read from the sources' own imports (static,
 * type-only, re-exporting and dynamic):
 *
 * - the client knows only the wire: no file under src/client imports the
 *   runtime (`services`, `actors`, `layers`, `server`, `cli`, `Troupe.ts`);
 * - src/cli and src/client have no import circles: where two modules share
 *   types, the types live in a third (`ServeOptions`, `RunOptions`);
 * - no function in src/client, src/server or src/actors is over 150 lines
 *   (read with the TypeScript compiler, nested functions counted in their
 *   enclosing one);
 * - nothing below the layers imports them: src/schema, src/services and
 *   src/internal import no `src/layers/` module, and the SQL store
 *   (src/layers/sql) keeps every module within ~500 lines;
 * - the inspector's page (src/inspector/page, bundled for the browser)
 *   imports only its own modules, and schemas only as types; nothing else
 *   imports it;
 * - src imports effect by module (`effect/Effect`), never the `effect`
 *   barrel, which loads all of effect on import (decision 0049);
 * - every room imports only the rooms DESIGN §2 puts below it (`mayImport`,
 *   the new rooms src/http, src/tools and src/inspector included), and the
 *   drivers (SQL, MCP, OpenTelemetry, child processes) appear only in
 *   src/layers.
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

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

/** The longest a function may be, in lines from its first to its last (CONVENTIONS: no function over ~150 lines). */
const MAX_FUNCTION_LINES = 150

/** The name a function is known by: its own, or that of the declaration, property or method it is the value of. */
const functionName = (node: ts.Node): string => {
  for (let at: ts.Node | undefined = node; at !== undefined; at = at.parent) {
    if (
      (ts.isFunctionDeclaration(at) || ts.isMethodDeclaration(at) || ts.isVariableDeclaration(at) ||
        ts.isPropertyAssignment(at) || ts.isPropertyDeclaration(at) || ts.isGetAccessor(at)) &&
      at.name !== undefined
    ) {
      return at.name.getText()
    }
    if (ts.isConstructorDeclaration(at)) return "constructor"
  }
  return "(anonymous)"
}

/** The functions of `source` over `max` lines, as `name (N lines)`; a function nested in another counts in both. */
const longFunctions = (file: string, source: string, max = MAX_FUNCTION_LINES): ReadonlyArray<string> => {
  const sourceFile = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true)
  const found: Array<string> = []
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const first = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile)).line
      const last = sourceFile.getLineAndCharacterOfPosition(node.end).line
      if (last - first + 1 > max) found.push(`${functionName(node)} (${last - first + 1} lines)`)
    }
    ts.forEachChild(node, visit)
  }
  visit(sourceFile)
  return found
}

/**
 * What each room of src may import besides itself (DESIGN §2: dependencies point one way). `schema`
 * is the ground; `actors` and `layers` build on the ports and never import each other; `http` is the
 * contract the server's routes and the HTTP client share; `tools` run over ports (the MCP driver in
 * `layers` implements their port); the inspector's host side serves the page and reaches nothing of
 * the runtime; only `Troupe.ts` composes actors with layers, and only `cli` and `index.ts` see all.
 * A new room fails the test until its line is written here.
 */
const mayImport: Readonly<Record<string, ReadonlyArray<string>>> = {
  "schema": [],
  "protocol": ["schema"],
  "internal": ["schema", "protocol", "services"],
  "services": ["schema", "protocol", "internal"],
  "actors": ["schema", "services", "internal"],
  "tools": ["schema", "services", "internal"],
  "layers": ["schema", "protocol", "services", "internal", "tools"],
  "http": ["schema", "protocol"],
  "inspector": ["schema", "http"],
  "inspector/page": ["schema"],
  "client": ["schema", "protocol", "internal", "http"],
  "server": ["schema", "protocol", "services", "internal", "http", "inspector"],
  "Troupe.ts": ["schema", "protocol", "services", "internal", "actors", "layers", "tools"],
  "cli": ["schema", "protocol", "services", "internal", "actors", "layers", "tools", "http", "inspector", "client", "server", "Troupe.ts"],
  "index.ts": ["schema", "protocol", "services", "internal", "actors", "layers", "tools", "http", "client", "server", "Troupe.ts"]
}

/** The room of a file under src: its top folder (`inspector/page` apart), or the top-level module itself. */
const roomOf = (file: string): string => {
  const parts = file.split("/")
  if (parts.length === 2) return parts[1]!
  return parts[1] === "inspector" && parts[2] === "page" ? "inspector/page" : parts[1]!
}

/** Packages that are drivers (a store, MCP, telemetry export, processes): only src/layers imports them. */
const driverPackage = /^(pg|better-sqlite3|@effect\/sql(-[a-z]+)?|@effect\/opentelemetry|@opentelemetry\/.+|@modelcontextprotocol\/.+|(node:)?child_process)$/

/** The package a specifier names (`@scope/name` or `name`, subpaths dropped; `node:` builtins whole). */
const packageOf = (specifier: string): string =>
  specifier.startsWith("node:") ? specifier : specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")

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

  it("the turn loop has no import circles: TurnRunner, ToolCalls and Compactor share TurnContext", () => {
    const actors = graphOf(filesUnder("src/actors"))
    for (const file of ["src/actors/TurnRunner.ts", "src/actors/ToolCalls.ts", "src/actors/Compactor.ts"]) {
      assert.include(actors.get(file) ?? [], "src/actors/TurnContext.ts", file)
    }
    const turnLoop = new Set(["src/actors/TurnRunner.ts", "src/actors/ToolCalls.ts", "src/actors/Compactor.ts", "src/actors/TurnContext.ts"])
    assert.deepStrictEqual(
      circlesOf(actors).filter((circle) => circle.split(" → ").some((file) => turnLoop.has(file))),
      []
    )
  })

  it("the inspector's page (src/inspector/page) imports only itself, and the schemas as types only; nothing imports the page", () => {
    const page = filesUnder("src/inspector/page")
    assert.includeMembers([...page], ["src/inspector/page/Main.ts", "src/inspector/page/Fold.ts"])
    const problems: Array<string> = []
    for (const file of page) {
      const source = readFileSync(join(root, file), "utf8")
      for (const specifier of importsOf(source)) {
        if (!specifier.startsWith(".")) {
          // Only type-only imports of "effect" (erased from the bundle): the page ships no library.
          if (!new RegExp(`import type [^;]+ from "${specifier}"`).test(source)) problems.push(`${file} imports ${specifier}`)
          continue
        }
        const target = relative(root, resolve(root, dirname(file), specifier)).replace(/\.js$/, ".ts")
        if (target.startsWith("src/inspector/page/")) continue
        const typeOnly = new RegExp(`import type [^;]+ from "${specifier.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"`).test(source)
        if (!(typeOnly && target.startsWith("src/schema/"))) problems.push(`${file} imports ${target}`)
      }
    }
    const outside = [...filesUnder("src")].filter((file) => !file.startsWith("src/inspector/page/"))
    for (const file of outside) {
      for (const target of localImportsOf(file)) if (target.startsWith("src/inspector/page/")) problems.push(`${file} imports ${target}`)
    }
    assert.deepStrictEqual(problems, [])
  })

  it("src/http is the contract only: it imports the schemas, the wire's messages and @effect/platform, never the runtime", () => {
    const files = filesUnder("src/http")
    assert.include(files, "src/http/Api.ts")
    const allowed = ["src/schema/", "src/protocol/Messages.ts", "src/http/"]
    assert.deepStrictEqual(
      files.flatMap((file) =>
        localImportsOf(file).filter((target) => !allowed.some((prefix) => target.startsWith(prefix))).map((target) => `${file} imports ${target}`)
      ),
      []
    )
    const packages = files.flatMap((file) => importsOf(readFileSync(join(root, file), "utf8")).filter((s) => !s.startsWith(".")))
    assert.deepStrictEqual(packages.filter((name) => !/^(effect|@effect\/platform)(\/|$)/.test(name)), [])
  })

  it("src/tools runs over ports: no layer, actor or driver (no file system, child process or MCP SDK)", () => {
    const files = filesUnder("src/tools")
    assert.include(files, "src/tools/Builtins.ts")
    const allowed = ["src/schema/", "src/services/", "src/internal/", "src/tools/"]
    assert.deepStrictEqual(
      files.flatMap((file) =>
        localImportsOf(file).filter((target) => !allowed.some((prefix) => target.startsWith(prefix))).map((target) => `${file} imports ${target}`)
      ),
      []
    )
    const drivers = /^(node:)?(fs|fs\/promises|child_process|net|http|https)$|^@modelcontextprotocol\//
    assert.deepStrictEqual(
      files.flatMap((file) =>
        importsOf(readFileSync(join(root, file), "utf8")).filter((name) => drivers.test(name)).map((name) => `${file} imports ${name}`)
      ),
      []
    )
  })

  it("every room imports only the rooms below it, the new rooms (http, tools, inspector) included", () => {
    const files = filesUnder("src")
    const rooms = new Set(files.map(roomOf))
    for (const room of ["http", "tools", "inspector", "inspector/page", "actors", "layers"]) assert.isTrue(rooms.has(room), room)
    assert.deepStrictEqual([...rooms].filter((room) => mayImport[room] === undefined).map((room) => `src/${room} has no line in mayImport`), [])
    assert.deepStrictEqual(
      files.flatMap((file) => {
        const room = roomOf(file)
        return localImportsOf(file)
          .filter((target) => target.startsWith("src/") && roomOf(target) !== room && !mayImport[room]!.includes(roomOf(target)))
          .map((target) => `${file} (${room}) imports ${target} (${roomOf(target)})`)
      }),
      []
    )
    // The table is read, not assumed: the edges DESIGN §2 names are there.
    const edges = new Set(files.flatMap((file) => localImportsOf(file).map((target) => `${roomOf(file)} → ${roomOf(target)}`)))
    for (const edge of ["server → http", "layers → tools", "tools → services", "Troupe.ts → actors", "Troupe.ts → layers"]) {
      assert.isTrue(edges.has(edge), edge)
    }
    assert.isFalse(edges.has("actors → layers"))
    assert.isFalse(edges.has("layers → actors"))
  })

  it("the drivers (SQL, MCP, OpenTelemetry, child processes) appear only in src/layers", () => {
    assert.deepStrictEqual(
      ["pg", "@effect/sql-pg", "@effect/sql", "@modelcontextprotocol/sdk", "@opentelemetry/api", "node:child_process", "effect", "@effect/platform", "node:net"]
        .filter((name) => driverPackage.test(packageOf(name))),
      ["pg", "@effect/sql-pg", "@effect/sql", "@modelcontextprotocol/sdk", "@opentelemetry/api", "node:child_process"]
    )
    assert.deepStrictEqual(
      filesUnder("src").filter((file) => roomOf(file) !== "layers").flatMap((file) =>
        importsOf(readFileSync(join(root, file), "utf8")).filter((name) => driverPackage.test(packageOf(name))).map((name) =>
          `${file} imports ${name}`
        )
      ),
      []
    )
  })

  it("src imports effect a module at a time (`effect/Effect`), never the barrel, which loads all of effect (decision 0049)", () => {
    assert.deepStrictEqual(
      filesUnder("src").flatMap((file) =>
        importsOf(readFileSync(join(root, file), "utf8")).filter((name) => name === "effect").map(() => `${file} imports "effect"`)
      ),
      []
    )
  })

  it("nothing in src/schema, src/services or src/internal imports src/layers", () => {
    const below = [...filesUnder("src/schema"), ...filesUnder("src/services"), ...filesUnder("src/internal")]
    assert.include(below, "src/internal/LogProjection.ts")
    assert.deepStrictEqual(
      below.flatMap((file) =>
        localImportsOf(file).filter((target) => target.startsWith("src/layers/")).map((target) => `${file} imports ${target}`)
      ),
      []
    )
  })

  it("the SQL store lives in src/layers/sql, no module of it over ~500 lines", () => {
    const files = filesUnder("src/layers/sql")
    assert.includeMembers([...files], ["src/layers/sql/SqlSessionStore.ts", "src/layers/sql/pg/PgAppend.ts"])
    assert.deepStrictEqual(
      files
        .map((file) => ({ file, lines: readFileSync(join(root, file), "utf8").split("\n").length }))
        .filter(({ lines }) => lines > 520)
        .map(({ file, lines }) => `${file}: ${lines} lines`),
      []
    )
    assert.deepStrictEqual(circlesOf(graphOf(files)), [])
  })

  it("measures functions of every form, nested ones in their enclosing one", () => {
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `  const x${i} = ${i}`).join("\n")
    const source = [
      `export const fits = () => {\n${lines(148)}\n}`,
      `export const over = (a: number) => {\n${lines(149)}\n}`,
      `function declared() {\n${lines(149)}\n}`,
      `const outer = Effect.gen(function*() {\n${lines(149)}\n})`,
      `class K {\n  method() {\n${lines(149)}\n  }\n}`,
      `export const wrapper = () => {\n  const inner = () => {\n${lines(149)}\n  }\n}`
    ].join("\n")
    assert.deepStrictEqual(longFunctions("sample.ts", source), [
      "over (151 lines)",
      "declared (151 lines)",
      "outer (151 lines)",
      "method (151 lines)",
      "wrapper (153 lines)",
      "inner (151 lines)"
    ])
  })

  it("no function in src/client, src/server or src/actors is over 150 lines", () => {
    const files = [...filesUnder("src/client"), ...filesUnder("src/server"), ...filesUnder("src/actors")]
    assert.includeMembers([...files], ["src/server/Connection.ts", "src/server/SessionRoutes.ts", "src/client/SessionClient.ts"])
    assert.deepStrictEqual(
      files.flatMap((file) => longFunctions(file, readFileSync(join(root, file), "utf8")).map((found) => `${file}: ${found}`)),
      []
    )
  })
})
