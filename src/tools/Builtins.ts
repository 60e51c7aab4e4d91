/**
 * The built-in tools over the `Workspace` port, by name and by group: an
 * agent opts in with `Builtins.specs(["files", "bash"])` in its `tools` (the
 * agents file's `builtins`), and the host runs them with `Builtins.layerWith`
 * (a `Toolkit` over the host's other tools, needing a `Workspace`).
 *
 * Policy defaults: `bash` and `process.start` ask for an approval of every
 * call, and `write_file`/`edit_file` ask for paths outside the `writable`
 * globs (none by default): the permission layers and a run's approval
 * settings apply on top, as to every tool (docs/workspace.md).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { ToolSpec } from "../schema/Agent.js"
import type * as Tool from "../services/Tool.js"
import * as Toolkit from "../services/Toolkit.js"
import type { Workspace } from "../services/Workspace.js"
import * as Files from "./workspace/Files.js"
import * as Processes from "./workspace/Processes.js"
import * as ProcessTable from "./workspace/ProcessTable.js"
import * as Search from "./workspace/Search.js"
import * as Shell from "./workspace/Shell.js"

/** How the host runs the built-ins. */
export interface Options extends Files.WriteOptions, Shell.Options, ProcessTable.Options {
  /** The host's other tools (they win on a name both have). */
  readonly tools?: Layer.Layer<Toolkit.Toolkit> | undefined
}

/** The name of the built-in that reads a cut `bash` output (and archived results) back. */
export const READ_ARTIFACT = "read_artifact"

/** `read_artifact`'s contract (the same name as compaction's, which hands it the ids it did not archive). */
export const readArtifactSpec = new ToolSpec({
  name: READ_ARTIFACT,
  description: "Reads back the full text of an artifact (a bash output that was cut, or an archived tool result) by its id, " +
    `at most ${Shell.ARTIFACT_PAGE} characters from offset (default 0).`,
  parameters: {
    type: "object",
    properties: { artifactId: { type: "string" }, offset: { type: "integer", minimum: 0 } },
    required: ["artifactId"],
    additionalProperties: false
  },
  sideEffect: "none",
  idempotency: "supported",
  client: false
})

// The tools differ in argument and result types; the toolkit only runs them.
type AnyTool = Tool.Tool<any, any, any, any, any, Workspace | ProcessTable.ProcessTable>

const toolsOf = (options: Options): ReadonlyArray<AnyTool> => [
  Files.readFile,
  Files.writeFile(options),
  Files.editFile(options),
  Search.findFiles,
  Search.searchFiles,
  Shell.bash(options),
  ...Processes.tools(options)
]

const specByName = new Map<string, ToolSpec>([
  ...toolsOf({}).map((tool) => [tool.name, tool.spec] as const),
  [READ_ARTIFACT, readArtifactSpec]
])

/** Groups of built-ins an agent may name instead of each tool. */
export const GROUPS: Readonly<Record<string, ReadonlyArray<string>>> = {
  files: ["read_file", "write_file", "edit_file", "find_files", "search_files"],
  read: ["read_file", "find_files", "search_files"],
  shell: ["bash", READ_ARTIFACT],
  process: Processes.tools().map((tool) => tool.name),
  all: [...specByName.keys()]
}

/** Every built-in name. */
export const NAMES: ReadonlyArray<string> = [...specByName.keys()]

/** The specs of the named built-ins and groups (`bash` brings `read_artifact`), or the first unknown name. */
export const specs = (names: ReadonlyArray<string>): Either.Either<ReadonlyArray<ToolSpec>, string> => {
  const out = new Map<string, ToolSpec>()
  for (const name of names) {
    const members = GROUPS[name] ?? (specByName.has(name) ? (name === "bash" ? ["bash", READ_ARTIFACT] : [name]) : undefined)
    if (members === undefined) return Either.left(name)
    for (const member of members) out.set(member, specByName.get(member)!)
  }
  return Either.right([...out.values()])
}

/** The specs of the named built-ins; throws on an unknown name (for code that names them literally). */
export const specsOrThrow = (names: ReadonlyArray<string>): ReadonlyArray<ToolSpec> =>
  Either.getOrThrowWith(specs(names), (name) => new Error(`no built-in tool or group is named ${name}: ${[...NAMES, ...Object.keys(GROUPS)].join(", ")}`))

/**
 * A toolkit of the built-ins over `options.tools`; the workspace comes from
 * the context. The processes `process.*` started are stopped when their
 * session closes, or all of them when the layer's scope closes.
 */
export const layerWith = (options: Options = {}): Layer.Layer<Toolkit.Toolkit, never, Workspace> =>
  Layer.scoped(
    Toolkit.Toolkit,
    Effect.gen(function*() {
      const processes = yield* ProcessTable.make(options)
      const own = yield* Effect.provide(
        Toolkit.Toolkit,
        Toolkit.layer(toolsOf(options)).pipe(Layer.provide(Layer.succeed(ProcessTable.ProcessTable, processes)))
      )
      const inner = options.tools === undefined ? undefined : yield* Effect.provide(Toolkit.Toolkit, options.tools)
      const context = yield* Effect.context<Workspace>()
      const artifact: Toolkit.Runnable = {
        spec: readArtifactSpec,
        run: (argumentsText, call) => Effect.provide(Shell.readArtifactPage(argumentsText, call), context)
      }
      return Toolkit.Toolkit.of({
        get: (name) => inner?.get(name) ?? own.get(name) ?? (name === READ_ARTIFACT ? artifact : undefined),
        sessionClosed: (sessionId) =>
          Effect.zipRight(processes.sessionClosed(sessionId), inner?.sessionClosed?.(sessionId) ?? Effect.void)
      })
    })
  )

/** The built-ins with their defaults. */
export const layer: Layer.Layer<Toolkit.Toolkit, never, Workspace> = layerWith()
