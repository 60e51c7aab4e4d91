/**
 * Tools: what an agent may call. `Tool.make` pairs a model-facing contract
 * (name, description, parameters as a Schema, from which the JSON Schema the
 * model sees is derived) with a handler. A tool without a handler is a client
 * tool: the client runs it, through a `client_tool` callback.
 *
 * Running a tool never crashes a turn: arguments that are not JSON or do not
 * match the parameters, and a handler's failure, come back as a `ToolOutcome`
 * with `isError: true` and a message the model can act on.
 *
 * @since 0.1.0
 */
import { Effect, JSONSchema, ParseResult, Schema } from "effect"
import { MAX_JSON_DEPTH, tooDeep } from "../protocol/Cbor.js"
import { type Idempotency, type SideEffect, ToolSpec } from "../schema/Agent.js"

/** What a tool declares about running it. */
export interface Metadata {
  readonly sideEffect?: SideEffect | undefined
  readonly idempotency?: Idempotency | undefined
  /** Its results must reach the model whole: context compaction never archives them. */
  readonly preserveResult?: boolean | undefined
}

/** A tool: its contract, and a handler unless the client runs it. */
export interface Tool<A, I, S, SI, E = never, R = never> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, I>
  readonly success: Schema.Schema<S, SI>
  readonly metadata: Required<Metadata>
  readonly handler: ((args: A) => Effect.Effect<S, E, R>) | undefined
  /** The frozen, model-facing description (JSON Schema parameters). */
  readonly spec: ToolSpec
}

/** The result of one tool call, as the model will see it. */
export interface ToolOutcome {
  /** JSON value: the encoded success, or `{ error }`. */
  readonly output: unknown
  readonly isError: boolean
}

/** Defines a tool. Omit `handler` for a client tool. */
export const make = <A, I, S, SI, E = never, R = never>(options: {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, I>
  readonly success: Schema.Schema<S, SI>
  readonly metadata?: Metadata | undefined
  readonly handler?: ((args: A) => Effect.Effect<S, E, R>) | undefined
}): Tool<A, I, S, SI, E, R> => {
  const metadata = {
    sideEffect: options.metadata?.sideEffect ?? "external",
    idempotency: options.metadata?.idempotency ?? "unknown",
    preserveResult: options.metadata?.preserveResult ?? false
  } as const
  const { $schema: _, ...parameters } = JSONSchema.make(options.parameters) as unknown as Record<string, unknown>
  return {
    name: options.name,
    description: options.description,
    parameters: options.parameters,
    success: options.success,
    metadata,
    handler: options.handler,
    spec: new ToolSpec({
      name: options.name,
      description: options.description,
      parameters,
      sideEffect: metadata.sideEffect,
      idempotency: metadata.idempotency,
      client: options.handler === undefined,
      // Only when set, so the specs (and hashes) of other tools stay as they were.
      ...(metadata.preserveResult ? { preserveResult: true } : {})
    })
  }
}

/** A tool error as the model sees it: `{ error }`, `isError: true`. */
export const errorOutcome = (error: string): ToolOutcome => ({ output: { error }, isError: true })

/**
 * Runs a server tool on the model's argument text. Bad JSON, arguments that do
 * not match the parameters, and a failure of the handler are error outcomes;
 * only defects of the handler stay defects.
 */
export const run = <A, I, S, SI, E, R>(
  tool: Tool<A, I, S, SI, E, R>,
  argumentsText: string
): Effect.Effect<ToolOutcome, never, R> =>
  Effect.gen(function*() {
    if (tool.handler === undefined) {
      return errorOutcome(`${tool.name} is a client tool: the client runs it`)
    }
    let json: unknown
    try {
      json = argumentsText.trim() === "" ? {} : JSON.parse(argumentsText)
    } catch {
      return errorOutcome(`the arguments of ${tool.name} are not valid JSON`)
    }
    // JSON.parse reads any depth; decoding, storing and sending the arguments are bounded like the wire.
    if (tooDeep(json, MAX_JSON_DEPTH)) {
      return errorOutcome(`the arguments of ${tool.name} are nested deeper than ${MAX_JSON_DEPTH} levels`)
    }
    const args = yield* Effect.either(Schema.decodeUnknown(tool.parameters)(json))
    if (args._tag === "Left") {
      return errorOutcome(
        `invalid arguments for ${tool.name}: ${ParseResult.TreeFormatter.formatErrorSync(args.left)}`
      )
    }
    const result = yield* Effect.either(tool.handler(args.right))
    if (result._tag === "Left") {
      const failure = result.left as unknown
      const message = failure instanceof Error ? failure.message : typeof failure === "string" ? failure : JSON.stringify(failure)
      return errorOutcome(message ?? `${tool.name} failed`)
    }
    const encoded = yield* Effect.either(Schema.encode(tool.success)(result.right))
    if (encoded._tag === "Left") {
      return errorOutcome(`${tool.name} returned a result that does not match its success schema`)
    }
    return { output: encoded.right, isError: false }
  })
