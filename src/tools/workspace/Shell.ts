/**
 * `bash`: a command run in the workspace root (`sh -c`) with a timeout, in
 * its own process group, killed whole on timeout or interrupt (the port's
 * `spawn` scope). Its environment is only what the host configured (`env`)
 * over a few harmless variables of the host's (`PATH`, `HOME`, `LANG`…):
 * never the daemon's secrets. The model sees a bounded output (head and
 * tail); the whole output is kept as a workspace artifact that
 * `read_artifact` reads back.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Tool from "../../services/Tool.js"
import { handleOf } from "./Files.js"

/** Bytes of output the model sees at most (head and tail). */
export const OUTPUT_LIMIT = 16 * 1024
/** Bytes of output kept in the artifact at most. */
export const ARTIFACT_LIMIT = 32 * 1024 * 1024
/** Characters one `read_artifact` call returns. */
export const ARTIFACT_PAGE = 8_000
/** Host variables a command gets unless configured otherwise. */
export const PASSED_ENV: ReadonlyArray<string> = ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"]

/** How `bash` runs. */
export interface Options {
  /** Variables set for every command (the run's configuration: `--env K=V`, `Builtins.layerWith({ env })`). */
  readonly env?: Readonly<Record<string, string>> | undefined
  /**
   * Variables by agent name (an agents file's `env`), set for the commands of
   * that agent's sessions over `env`. Host configuration: never stored in a session.
   */
  readonly agentEnv?: Readonly<Record<string, Readonly<Record<string, string>>>> | undefined
  /** Default timeout in seconds (default 120). */
  readonly timeoutSeconds?: number | undefined
  /** Ask before every call (default true). */
  readonly ask?: boolean | undefined
}

/** Whether `name` can name an environment variable of a command: letters, digits and `_`, not starting with a digit. */
export const isVariableName = (name: string): boolean => /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)

/** The environment of a command: the passed host variables and `env`. */
export const environment = (env: Readonly<Record<string, string>> = {}): Record<string, string> => {
  const out: Record<string, string> = { TERM: "dumb" }
  for (const key of PASSED_ENV) {
    const value = process.env[key]
    if (value !== undefined) out[key] = value
  }
  return { ...out, ...env }
}

/** The environment of a command of the call in `context`: the passed host variables, the run's `env`, then its agent's. */
export const environmentFor = (options: Options, context: { readonly agentPath: ReadonlyArray<string> }): Record<string, string> => {
  const agent = context.agentPath.at(-1)
  const own = agent === undefined || options.agentEnv === undefined || !Object.hasOwn(options.agentEnv, agent) ? undefined : options.agentEnv[agent]
  return environment(own === undefined ? options.env : { ...options.env, ...own })
}

const BashResult = Schema.Struct({
  exitCode: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  timedOut: Schema.Boolean,
  output: Schema.String,
  bytes: Schema.Number,
  /** Set when the output was cut: read it whole with read_artifact. */
  artifactId: Schema.optional(Schema.String)
})

/** The `bash` tool. */
export const bash = (options: Options = {}) =>
  Tool.make({
    name: "bash",
    description: "Runs a shell command in the workspace root (sh -c) with a timeout; the output is cut to " +
      `${OUTPUT_LIMIT} bytes (head and tail), the whole of it kept: read it with read_artifact and the artifactId. Asks for approval.`,
    parameters: Schema.Struct({
      command: Schema.String.pipe(Schema.minLength(1)),
      timeoutSeconds: Schema.optional(Schema.Number.pipe(Schema.between(0.1, 3600))),
      cwd: Schema.optional(Schema.String)
    }),
    success: BashResult,
    metadata: { sideEffect: "execute", idempotency: "unsupported", capabilities: ["process.execute"] },
    needsApproval: () => options.ask ?? true,
    handler: (args, context) =>
      Effect.gen(function*() {
        const handle = yield* handleOf(context)
        const chunks: Array<Uint8Array> = []
        let bytes = 0
        const run = Effect.scoped(Effect.gen(function*() {
          const child = yield* handle.spawn({ command: args.command, cwd: args.cwd, env: environmentFor(options, context) })
          yield* Stream.runForEach(child.output, (out) =>
            Effect.sync(() => {
              if (bytes < ARTIFACT_LIMIT) chunks.push(out.data)
              bytes += out.data.length
            }))
          return yield* child.exit
        }))
        const timeout = (args.timeoutSeconds ?? options.timeoutSeconds ?? 120) * 1000
        const exit = yield* Effect.timeoutOption(run, timeout)
        const whole = Buffer.concat(chunks)
        const cut = whole.length > OUTPUT_LIMIT
        const output = cut
          ? `${whole.subarray(0, OUTPUT_LIMIT / 4).toString("utf8")}\n[… ${whole.length - OUTPUT_LIMIT} bytes cut: read_artifact has them …]\n${
            whole.subarray(whole.length - (OUTPUT_LIMIT * 3) / 4).toString("utf8")
          }`
          : whole.toString("utf8")
        const artifactId = cut ? `bash-${context.operationId}` : undefined
        if (artifactId !== undefined) yield* handle.putArtifact(artifactId, whole.toString("utf8"))
        return {
          exitCode: exit._tag === "Some" ? exit.value.code : null,
          signal: exit._tag === "Some" ? exit.value.signal : "SIGKILL",
          timedOut: exit._tag === "None",
          output,
          bytes,
          ...(artifactId === undefined ? {} : { artifactId })
        }
      })
  })

const ReadArtifact = Schema.parseJson(Schema.Struct({
  artifactId: Schema.String,
  offset: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.nonNegative()))
}))

/** Reads a page of a workspace artifact, as `read_artifact` gives it. */
export const readArtifactPage = (argumentsText: string, context: Tool.ToolContext) =>
  Effect.gen(function*() {
    const args = Schema.decodeUnknownEither(ReadArtifact)(argumentsText.trim() === "" ? "{}" : argumentsText)
    if (Either.isLeft(args)) return Tool.errorOutcome("invalid arguments for read_artifact: expected { artifactId, offset? }")
    const { artifactId, offset = 0 } = args.right
    const handle = yield* handleOf(context)
    const text = yield* handle.getArtifact(artifactId)
    if (text === undefined) return Tool.errorOutcome(`no artifact has the id ${JSON.stringify(artifactId.slice(0, 80))}`)
    if (offset > text.length) return Tool.errorOutcome(`offset ${offset} is past the end of ${artifactId} (${text.length} characters)`)
    const end = Math.min(text.length, offset + ARTIFACT_PAGE)
    const next = end < text.length ? `; read on with "offset": ${end}` : "; this is the end"
    return { output: `[artifact ${artifactId}: characters ${offset}–${end} of ${text.length}${next}]\n${text.slice(offset, end)}`, isError: false }
  }).pipe(Effect.catchAll((error) => Effect.succeed(Tool.errorOutcome(error.message))))
