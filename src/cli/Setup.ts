/**
 * What `troupe serve` and `troupe run` both set up before they do their own
 * work: the telemetry layer from the environment, the store, the model and
 * the agents, and the runtime (`Troupe.layer`) over them. Every failure comes
 * with its telemetry category (`daemon.failed` reports it) and its exit.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Context from "effect/Context"
import type * as Scope from "effect/Scope"
import type * as InProcessHost from "../actors/InProcessHost.js"
import * as EnvTelemetry from "../layers/EnvTelemetry.js"
import type { Agent } from "../schema/Agent.js"
import type { FailureCategory } from "../schema/ProductEvent.js"
import type { Telemetry } from "../services/Telemetry.js"
import * as Toolsets from "../services/Toolsets.js"
import * as Troupe from "../Troupe.js"
import * as AgentsFile from "./AgentsFile.js"
import * as ExitCode from "./ExitCode.js"
import * as ModelOption from "./ModelOption.js"
import * as StoreOption from "./StoreOption.js"
import * as WorkspaceOption from "./WorkspaceOption.js"
import * as WorkspaceToolkit from "./WorkspaceToolkit.js"

/** A failure while setting up: its telemetry category and the exit it causes. */
export interface SetupFailure {
  readonly category: FailureCategory
  readonly failure: ExitCode.CliFailure
}

/** What the command line chose. */
export interface Choices {
  readonly store: Option.Option<StoreOption.Store>
  /** `--sqlite-sync` (absent: normal). */
  readonly sqliteSync?: "normal" | "full" | undefined
  readonly model: ModelOption.Choice
  readonly agents: Option.Option<string>
  /** `--workspace` and `--workspace-per-session`: where the agents' built-in tools work. */
  readonly workspace?: Option.Option<string> | undefined
  readonly workspacePerSession?: boolean | undefined
  /** `--env NAME=VALUE`: variables for the built-in commands. */
  readonly env?: WorkspaceOption.Choice["env"]
}

/** The store, the model and the agents, resolved. */
export interface Resolved {
  readonly store: StoreOption.Store
  readonly model: ModelOption.Resolved
  /** The agents of `--agents`, or the built-in ones. */
  readonly agents: ReadonlyArray<Agent>
  /** Whether the agents came from a file (their tools are client tools). */
  readonly fromFile: boolean
  /** The file's MCP servers, served as toolsets of the same names. */
  readonly mcpServers?: AgentsFile.Declared["mcpServers"] | undefined
  /** Where the built-in tools work (used only when an agent names one, or `--workspace` was given). */
  readonly workspace?: WorkspaceOption.Choice | undefined
}

const invalid = (message: string): SetupFailure => ({ category: "invalid_input", failure: ExitCode.usage(message) })

/** A cause's message, for one line. */
export const causeMessage = (cause: unknown): string =>
  cause instanceof Error ? cause.message : typeof cause === "string" ? cause : "unknown cause"

/** The telemetry layer the environment selects, built in the scope. */
export const telemetry: Effect.Effect<Context.Context<Telemetry>, ExitCode.CliFailure, Scope.Scope> = Layer.build(
  EnvTelemetry.layerConfig
).pipe(Effect.mapError((error) => ExitCode.usage(`telemetry configuration: ${String(error)}`)))

/** Resolves `--store`, `--model` and `--agents` (reading the agents file). */
export const resolve = (choices: Choices): Effect.Effect<Resolved, SetupFailure> =>
  Effect.gen(function*() {
    const store = yield* StoreOption.resolveStore(choices.store).pipe(
      Effect.map((store) => StoreOption.withSync(store, choices.sqliteSync ?? "normal")),
      Effect.mapError((error) => invalid(`TROUPE_HOME: ${String(error)}`))
    )
    const model = yield* ModelOption.resolve(choices.model).pipe(
      Effect.mapError((error) => invalid(`model configuration: ${String(error)}`))
    )
    const declared = Option.isSome(choices.agents)
      ? yield* AgentsFile.loadDeclared(choices.agents.value).pipe(Effect.mapError((error) => invalid(error.message)))
      : { agents: model.builtIns, mcpServers: {}, env: {} }
    return {
      store,
      model,
      agents: declared.agents,
      fromFile: Option.isSome(choices.agents),
      mcpServers: declared.mcpServers,
      workspace: { workspace: choices.workspace, workspacePerSession: choices.workspacePerSession, env: choices.env, agentEnv: declared.env }
    }
  })

/**
 * The toolsets a file's `mcpServers` declare; none without them. The MCP driver
 * (and its SDK) is loaded only when a file names a server, so a daemon without
 * one starts without it.
 */
const toolsetsLayer = (servers: NonNullable<Resolved["mcpServers"]>): Layer.Layer<Toolsets.Toolsets> =>
  Object.keys(servers).length === 0
    ? Toolsets.layerNoop
    : Layer.unwrapEffect(Effect.promise(() => import("../layers/McpToolsets.js")).pipe(
      Effect.map((McpToolsets) => McpToolsets.layer({ toolsets: McpToolsets.fromServers(servers) }))
    ))

/** The runtime over the resolved store and model (and `host` tuning), built in the scope; a store that cannot be opened is exit 5. */
export const runtime = (
  resolved: Resolved,
  telemetry: Context.Context<Telemetry>,
  host: InProcessHost.Options = {}
): Effect.Effect<Context.Context<Troupe.Services>, SetupFailure, Scope.Scope> =>
  Layer.build(
    Troupe.layer(StoreOption.layer(resolved.store), {
      // A daemon and `troupe run` may share a file or a database: each notices the other's commands.
      host: resolved.store.kind === "memory" ? host : Troupe.sharedStoreHost(host),
      signals: StoreOption.signalsLayer(resolved.store),
      model: resolved.model.layer,
      // The one catalog: what a spawn, a handoff's subagents and a remote create resolve by name.
      agents: resolved.agents,
      // The built-in agents' tools run here; a file's agents have client tools, and the built-ins they name
      // (`builtins`), which run here on the workspace.
      tools: WorkspaceToolkit.toolkit(resolved.workspace ?? {}, resolved.agents, resolved.fromFile ? undefined : resolved.model.tools),
      toolsets: toolsetsLayer(resolved.mcpServers ?? {}),
      telemetry: Layer.succeedContext(telemetry)
    })
  ).pipe(
    Effect.mapError((error): SetupFailure => ({
      category: "unavailable",
      failure: ExitCode.startFailed(
        `cannot open the store ${StoreOption.describe(resolved.store)}: ${causeMessage(error.cause)}`
      )
    }))
  )
