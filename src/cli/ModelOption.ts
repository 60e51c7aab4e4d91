/**
 * `--model`: which model layer answers.
 *
 * - `auto` (default): the OpenAI-compatible model when one is configured
 *   (`TROUPE_MODEL_BASE_URL` or `TROUPE_MODEL` set; see docs/models.md), else
 *   the scripted model with the built-in demo agent, and a one-line note.
 * - `scripted`: the scripted model, whatever the environment says.
 * - `openai-compatible`: the OpenAI-compatible model from the environment
 *   (`TROUPE_MODEL_BASE_URL`, `TROUPE_MODEL_API_KEY`, `TROUPE_MODEL`, …).
 *
 * @since 0.1.0
 */
import { Options } from "@effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as ConfigError from "effect/ConfigError"
import type * as Layer from "effect/Layer"
import type { Agent } from "../schema/Agent.js"
import type { ModelKind } from "../schema/ProductEvent.js"
import type { Model } from "../services/Model.js"
import type { Toolkit } from "../services/Toolkit.js"

/** What `--model` may say. */
export type Choice = "auto" | "scripted" | "openai-compatible"

/** The `--model` option. */
export const option: Options.Options<Choice> = Options.choice("model", ["auto", "scripted", "openai-compatible"]).pipe(
  Options.withDescription(
    "The model: auto (OpenAI-compatible when TROUPE_MODEL_BASE_URL or TROUPE_MODEL is set, else scripted), scripted, or openai-compatible."
  ),
  Options.withDefault("auto" as const)
)

/** The model chosen, with the agent served when no agents file is given. */
export interface Resolved {
  readonly kind: ModelKind
  readonly layer: Layer.Layer<Model>
  /** The built-in agents that fit this model, the default one first. */
  readonly builtIns: ReadonlyArray<Agent>
  /** The server tools of the built-in agent. */
  readonly tools: Layer.Layer<Toolkit>
  /** How to describe the model in one line (never holds the API key). */
  readonly description: string
  /** Said once on stderr when the scripted model stands in for an unconfigured one (the caller says what it runs on it). */
  readonly note: Option.Option<string>
  /** Whether agents whose model is `default` can run: the scripted model, or `TROUPE_MODEL` set. */
  readonly hasDefault: boolean
}

/** Whether an agent asks for the deployment's default model. */
export const usesDefault = (agent: Agent): boolean => agent.model.name === "" || agent.model.name === "default"

/** Why agents on the default model cannot run, when they cannot. */
export const missingDefault = (model: Resolved, agents: ReadonlyArray<Agent>): Option.Option<string> => {
  const stuck = agents.filter(usesDefault).map((agent) => agent.name)
  return model.hasDefault || stuck.length === 0
    ? Option.none()
    : Option.some(
      `TROUPE_MODEL is not set, and ${stuck.join(", ")} ${stuck.length === 1 ? "asks" : "ask"} for the default model: set TROUPE_MODEL (or name a model in the agents file)`
    )
}

/** Whether the environment names an OpenAI-compatible model. */
export const configured: Config.Config<boolean> = Config.all([
  Config.option(Config.nonEmptyString("TROUPE_MODEL_BASE_URL")),
  Config.option(Config.nonEmptyString("TROUPE_MODEL"))
]).pipe(Config.map(([baseUrl, model]) => Option.isSome(baseUrl) || Option.isSome(model)))

/** The built-in agents and their tools: loaded when a model is resolved (a command that runs a turn), not for --help. */
const demoAgent = Effect.promise(() => import("./DemoAgent.js"))

const scripted = (note: Option.Option<string>): Effect.Effect<Resolved> =>
  Effect.zipWith(Effect.promise(() => import("../layers/ScriptedModel.js")), demoAgent, (ScriptedModel, DemoAgent) => ({
    kind: "scripted",
    layer: ScriptedModel.layer(DemoAgent.scripts),
    builtIns: [DemoAgent.demo, DemoAgent.assistant],
    tools: DemoAgent.toolkit,
    description: "scripted",
    note,
    hasDefault: true
  }))

/** Resolves `--model` against the environment; a malformed model variable is a `ConfigError`. */
export const resolve = (choice: Choice): Effect.Effect<Resolved, ConfigError.ConfigError> =>
  Effect.gen(function*() {
    if (choice === "scripted") return yield* scripted(Option.none())
    if (choice === "auto" && !(yield* configured)) {
      return yield* scripted(Option.some(
        "no model configured (set TROUPE_MODEL_BASE_URL and TROUPE_MODEL, see docs/models.md)"
      ))
    }
    // Loaded here: the client commands never need an HTTP client.
    const OpenAiCompatibleModel = yield* Effect.promise(() => import("../layers/OpenAiCompatibleModel.js"))
    const DemoAgent = yield* demoAgent
    const options = yield* OpenAiCompatibleModel.config
    return {
      kind: "openai_compatible",
      layer: OpenAiCompatibleModel.layer(options),
      builtIns: [DemoAgent.assistant],
      tools: DemoAgent.toolkit,
      description: `openai-compatible ${options.baseUrl ?? OpenAiCompatibleModel.defaultBaseUrl}${
        options.model === undefined ? "" : ` (${options.model})`
      }`,
      note: Option.none(),
      hasDefault: options.model !== undefined
    } satisfies Resolved
  })
