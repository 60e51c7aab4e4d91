/**
 * A `Model` over `@effect/ai`'s `LanguageModel`, so any `@effect/ai` provider
 * layer (OpenAI, Anthropic, Google, Amazon Bedrock, OpenRouter…) can drive a
 * troupe turn: instructions become the system message, the conversation a
 * `Prompt`, each `ToolSpec` a tool described by its own JSON Schema, and
 * `AiError`s `ModelError`s (docs/models.md).
 *
 * The bridge itself is `ai/LanguageModelBridge`: it loads, with `@effect/ai`,
 * when the layer is built or `make` runs, not when troupe is imported
 * (docs/decisions/0049-a-bundled-dist.md).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LanguageModelBridge from "./ai/LanguageModelBridge.js"

const bridge = Effect.promise(() => import("./ai/LanguageModelBridge.js"))

/** Builds the model from the `LanguageModel` in context. */
export const make: typeof LanguageModelBridge.make = Effect.flatMap(bridge, (m) => m.make)

/** A `Model` layer over any `@effect/ai` provider's `LanguageModel`. */
export const layer: typeof LanguageModelBridge.layer = Layer.unwrapEffect(Effect.map(bridge, (m) => m.layer))
