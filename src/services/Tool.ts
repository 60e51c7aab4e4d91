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
 * A handler may take a second argument, the `ToolContext` of the call (its
 * session, turn, operation and call ids, the principal and the agent path),
 * for idempotency keys of its own; a tool may decide per call whether it
 * needs an approval (`needsApproval`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { MAX_JSON_DEPTH, tooDeep } from "../protocol/Cbor.js"
import { type Idempotency, type SideEffect, ToolSpec } from "../schema/Agent.js"
import type { OperationId, SessionId, TurnId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"

/** What a tool declares about running it. */
export interface Metadata {
  readonly sideEffect?: SideEffect | undefined
  readonly idempotency?: Idempotency | undefined
  /** Its results must reach the model whole: context compaction never archives them. */
  readonly preserveResult?: boolean | undefined
  /** Capability tags (`network`, `filesystem`, …): permission policies can deny or ask about them. */
  readonly capabilities?: ReadonlyArray<string> | undefined
  /** Cost dimensions running it spends (`money`, `compute`, …): permission policies can deny or ask about them. */
  readonly costs?: ReadonlyArray<string> | undefined
  /** A successful call ends the turn, its output (text, or JSON text) the turn's answer. */
  readonly terminal?: boolean | undefined
  /** Safe to run at the same time as other calls of the same model reply (they are still recorded in the model's order). */
  readonly parallel?: boolean | undefined
}

/** Where a call runs: stable across a crash and a re-run of the call, so a tool can key its own idempotency on it. */
export interface ToolContext {
  readonly sessionId: SessionId
  readonly turnId: TurnId
  /** The tool call's operation: one per call, the same when it is run again after a crash. */
  readonly operationId: OperationId
  /** The model's id for the call (unique within its reply). */
  readonly callId: string
  /** Whose session it is. */
  readonly principal: Principal
  /** Agent names from the root session down to this one. */
  readonly agentPath: ReadonlyArray<string>
  /** The root session of its tree (itself for a root): whose workspace the call works in. */
  readonly rootId?: SessionId | undefined
}

/** A tool: its contract, and a handler unless the client runs it. */
export interface Tool<A, I, S, SI, E = never, R = never> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, I>
  readonly success: Schema.Schema<S, SI>
  readonly metadata: { readonly [K in keyof Metadata]-?: Exclude<Metadata[K], undefined> }
  readonly handler: ((args: A, context: ToolContext) => Effect.Effect<S, E, R>) | undefined
  /** Whether this call needs an approval, whatever the permission policy says (absent: never on its own). */
  readonly needsApproval: ((args: A, context: ToolContext) => boolean | Effect.Effect<boolean, unknown, R>) | undefined
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
  readonly handler?: ((args: A, context: ToolContext) => Effect.Effect<S, E, R>) | undefined
  /** Asks for an approval of this call (true), beside what the permission policy says; failing means asking. */
  readonly needsApproval?: ((args: A, context: ToolContext) => boolean | Effect.Effect<boolean, unknown, R>) | undefined
}): Tool<A, I, S, SI, E, R> => {
  const declared = options.metadata
  const metadata = {
    sideEffect: declared?.sideEffect ?? "external",
    idempotency: declared?.idempotency ?? "unknown",
    preserveResult: declared?.preserveResult ?? false,
    capabilities: declared?.capabilities ?? [],
    costs: declared?.costs ?? [],
    terminal: declared?.terminal ?? false,
    parallel: declared?.parallel ?? false
  } as const
  const { $schema: _, ...parameters } = JSONSchema.make(options.parameters) as unknown as Record<string, unknown>
  return {
    name: options.name,
    description: options.description,
    parameters: options.parameters,
    success: options.success,
    metadata,
    handler: options.handler,
    needsApproval: options.needsApproval,
    spec: new ToolSpec({
      name: options.name,
      description: options.description,
      parameters,
      sideEffect: metadata.sideEffect,
      idempotency: metadata.idempotency,
      client: options.handler === undefined,
      // Only when set, so the specs (and hashes) of other tools stay as they were.
      // Only what was declared, so the specs (and hashes) and frozen agents of other tools stay as they were.
      ...(metadata.preserveResult ? { preserveResult: true } : {}),
      ...(metadata.capabilities.length > 0 ? { capabilities: metadata.capabilities } : {}),
      ...(metadata.costs.length > 0 ? { costs: metadata.costs } : {}),
      ...(metadata.terminal ? { terminal: true } : {}),
      ...(metadata.parallel ? { parallel: true } : {})
    })
  }
}

/** A tool error as the model sees it: `{ error }`, `isError: true`. */
export const errorOutcome = (error: string): ToolOutcome => ({ output: { error }, isError: true })

/**
 * The model's argument text decoded as the tool's parameters, or the error outcome the model sees:
 * in place (an `Either`), or an Effect when only the Effect decoder can say (see below).
 */
const argumentsOf = <A, I, S, SI, E, R>(
  tool: Tool<A, I, S, SI, E, R>,
  argumentsText: string
): Either.Either<A, ToolOutcome> | Effect.Effect<Either.Either<A, ToolOutcome>> => {
  let json: unknown
  try {
    json = argumentsText.trim() === "" ? {} : JSON.parse(argumentsText)
  } catch {
    return Either.left(errorOutcome(`the arguments of ${tool.name} are not valid JSON`))
  }
  // JSON.parse reads any depth; decoding, storing and sending the arguments are bounded like the wire.
  if (tooDeep(json, MAX_JSON_DEPTH)) {
    return Either.left(errorOutcome(`the arguments of ${tool.name} are nested deeper than ${MAX_JSON_DEPTH} levels`))
  }
  // Decoded in place; only a failure (or a schema that cannot decode synchronously) goes through the Effect decoder,
  // so that its error outcome is exactly the one that decoder gives.
  const decoded = Schema.decodeUnknownEither(tool.parameters)(json)
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  return Schema.decodeUnknown(tool.parameters)(json).pipe(
    Effect.mapError((error) =>
      errorOutcome(`invalid arguments for ${tool.name}: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
    ),
    Effect.either
  )
}

/** `argumentsOf` as an Effect. */
const decodeArguments = <A, I, S, SI, E, R>(
  tool: Tool<A, I, S, SI, E, R>,
  argumentsText: string
): Effect.Effect<Either.Either<A, ToolOutcome>> => {
  const args = argumentsOf(tool, argumentsText)
  return Either.isEither(args) ? Effect.succeed(args) : args
}

/** A handler's result encoded by the tool's success schema (in place when it can be), or the error outcome. */
const encodeResult = <A, I, S, SI, E, R>(tool: Tool<A, I, S, SI, E, R>, result: S): Effect.Effect<ToolOutcome> => {
  const encoded = Schema.encodeEither(tool.success)(result)
  if (Either.isRight(encoded)) return Effect.succeed({ output: encoded.right, isError: false })
  return Effect.match(Schema.encode(tool.success)(result), {
    onFailure: () => errorOutcome(`${tool.name} returned a result that does not match its success schema`),
    onSuccess: (output): ToolOutcome => ({ output, isError: false })
  })
}

/**
 * Runs a server tool on the model's argument text. Bad JSON, arguments that do
 * not match the parameters, and a failure of the handler are error outcomes;
 * only defects of the handler stay defects.
 */
export const run = <A, I, S, SI, E, R>(
  tool: Tool<A, I, S, SI, E, R>,
  argumentsText: string,
  context: ToolContext
): Effect.Effect<ToolOutcome, never, R> =>
  Effect.suspend(() => {
    const handler = tool.handler
    if (handler === undefined) {
      return Effect.succeed(errorOutcome(`${tool.name} is a client tool: the client runs it`))
    }
    const withArguments = (args: Either.Either<A, ToolOutcome>) =>
      Either.isLeft(args)
        ? Effect.succeed(args.left)
        : Effect.matchEffect(handler(args.right, context), {
          onFailure: (failure: unknown) => {
            const message = failure instanceof Error ? failure.message : typeof failure === "string" ? failure : JSON.stringify(failure)
            return Effect.succeed(errorOutcome(message ?? `${tool.name} failed`))
          },
          onSuccess: (result) => encodeResult(tool, result)
        })
    // Arguments decoded in place go straight on (no flatMap step and its succeed per call).
    const args = argumentsOf(tool, argumentsText)
    return Either.isEither(args) ? withArguments(args) : Effect.flatMap(args, withArguments)
  })

/**
 * Whether this call needs an approval by the tool's own judgement
 * (`needsApproval`). Arguments that do not decode need none: the call will
 * not run anyway. A `needsApproval` that fails or dies means asking.
 */
export const needsApproval = <A, I, S, SI, E, R>(
  tool: Tool<A, I, S, SI, E, R>,
  argumentsText: string,
  context: ToolContext
): Effect.Effect<boolean, never, R> =>
  Effect.gen(function*() {
    const decide = tool.needsApproval
    if (decide === undefined) return false
    const args = yield* decodeArguments(tool, argumentsText)
    if (Either.isLeft(args)) return false
    return yield* Effect.suspend(() => {
      const answer = decide(args.right, context)
      return Effect.isEffect(answer) ? answer : Effect.succeed(answer)
    }).pipe(Effect.catchAllCause(() => Effect.succeed(true)))
  })
