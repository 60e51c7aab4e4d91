/**
 * Callback handlers typed by kind: an approval handler answers with an
 * approval answer, and each client tool's handler with that tool's success
 * (encoded with the tool's own schema into the `client_tool` answer). `make`
 * turns them into the `kinds` and `handler` that `provideCallbacks` takes
 * (`Sessions`, `SessionClient`), and `check` is the run-time guard every
 * provider applies: an answer that does not decode as its kind's ends the
 * provider with `InvalidCallbackAnswer`, naming the callback.
 *
 * @since 0.4.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import {
  type AnswerOf,
  answerSchema,
  type CallbackKind,
  type CallbackOf,
  type Handler,
  type PendingCallback
} from "./Callback.js"
import { InvalidCallbackAnswer } from "./Errors.js"

/** What a client tool handler needs of a tool: its name and schemas (a `Tool` from `Tool.make` fits). */
export interface ToolContract<A, I, S, SI> {
  readonly name: string
  readonly parameters: Schema.Schema<A, I>
  readonly success: Schema.Schema<S, SI>
}

/** The handler of one client tool, made by `clientTool`. */
export interface ClientToolHandler<E = never> {
  readonly name: string
  readonly handle: (callback: CallbackOf<"client_tool">) => Effect.Effect<Option.Option<AnswerOf<"client_tool">>, E | InvalidCallbackAnswer>
}

/** A provider's handlers by kind; a kind left out is not served. */
export interface CallbackHandlers<E = never> {
  /** Answers approvals: `Some({ decision, reason? })`, or `None` to leave it to others. */
  readonly approval?: ((callback: CallbackOf<"approval">) => Effect.Effect<Option.Option<AnswerOf<"approval">>, E>) | undefined
  /** Runs client tools, one handler per tool (`clientTool`); a call of another tool is left to others. */
  readonly clientTools?: ReadonlyArray<ClientToolHandler<E>> | undefined
}

/**
 * Checks a handler's answer against its callback's kind, returning the
 * answer as it will be sent, or `InvalidCallbackAnswer` naming the callback.
 */
export const check = (
  callback: PendingCallback,
  answer: unknown
): Either.Either<AnswerOf, InvalidCallbackAnswer> => {
  const schema = answerSchema[callback.kind] as unknown as Schema.Schema<unknown, AnswerOf>
  return Schema.decodeUnknownEither(schema)(answer).pipe(
    Either.flatMap((decoded) => Schema.encodeEither(schema)(decoded)),
    Either.mapLeft((error) => invalid(callback, ParseResult.TreeFormatter.formatErrorSync(error)))
  )
}

const invalid = (callback: PendingCallback, reason: string) =>
  new InvalidCallbackAnswer({
    sessionId: callback.sessionId,
    callbackId: callback.callbackId,
    kind: callback.kind,
    ...(callback.request._tag === "client_tool" ? { toolName: callback.request.toolName } : {}),
    reason
  })

/**
 * A client tool's handler: the call's arguments decoded with the tool's
 * parameters (arguments that do not decode are answered as a tool error the
 * model sees, as a host tool's would be), and its result encoded with the
 * tool's success schema; a result that does not encode is
 * `InvalidCallbackAnswer`. `None` leaves the call to another provider.
 */
export const clientTool = <A, I, S, SI, E = never>(
  tool: ToolContract<A, I, S, SI>,
  run: (args: A, callback: CallbackOf<"client_tool">) => Effect.Effect<Option.Option<S>, E>
): ClientToolHandler<E> => ({
  name: tool.name,
  handle: (callback) => {
    const args = parseArguments(callback.request.arguments)
    const decoded = Either.flatMap(args, (json) =>
      Either.mapLeft(
        Schema.decodeUnknownEither(tool.parameters)(json),
        (error) => `the arguments of ${tool.name} do not match its parameters: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
      ))
    if (Either.isLeft(decoded)) {
      return Effect.succeed(Option.some({ output: { error: decoded.left }, isError: true }))
    }
    return Effect.flatMap(run(decoded.right, callback), (result) =>
      Option.match(result, {
        onNone: () => Effect.succeedNone,
        onSome: (value) =>
          Schema.encodeUnknownEither(tool.success)(value).pipe(
            Either.mapLeft((error) => invalid(callback, `not a success of ${tool.name}: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)),
            Either.map((output) => Option.some<AnswerOf<"client_tool">>({ output })),
            (either) => Either.isLeft(either) ? Effect.fail(either.left) : Effect.succeed(either.right)
          )
      }))
  }
})

const parseArguments = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(text.trim() === "" ? {} : JSON.parse(text))
  } catch {
    return Either.left("the arguments are not valid JSON")
  }
}

/**
 * The `kinds` and `handler` to give `provideCallbacks`: approvals go to
 * `approval`, client tool calls to the handler of their tool (a tool without
 * one is left to others).
 */
export const make = <E = never>(handlers: CallbackHandlers<E>): {
  readonly kinds: ReadonlyArray<CallbackKind>
  readonly handler: Handler<E | InvalidCallbackAnswer>
} => {
  const tools = new Map((handlers.clientTools ?? []).map((tool) => [tool.name, tool] as const))
  const kinds: Array<CallbackKind> = []
  if (handlers.approval !== undefined) kinds.push("approval")
  if (tools.size > 0) kinds.push("client_tool")
  const approval = handlers.approval
  return {
    kinds,
    handler: (callback): Effect.Effect<Option.Option<AnswerOf>, E | InvalidCallbackAnswer> => {
      if (callback.kind === "approval") {
        return approval === undefined ? Effect.succeedNone : approval(callback as CallbackOf<"approval">)
      }
      const tool = tools.get(callback.request.toolName)
      return tool === undefined ? Effect.succeedNone : tool.handle(callback as CallbackOf<"client_tool">)
    }
  }
}
