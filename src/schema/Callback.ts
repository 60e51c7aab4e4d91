/**
 * Callbacks: requests for something outside the runtime to answer.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import { CallbackId, OperationId, SessionId, TurnId } from "./Ids.js"
import { Json } from "./Json.js"

/** `approval`: may this tool call run? `client_tool`: run this tool on the client. */
export const CallbackKind = Schema.Literal("approval", "client_tool")
/** @since 0.1.0 */
export type CallbackKind = typeof CallbackKind.Type

/** How a callback was closed. */
export const CallbackResolution = Schema.Literal("answered", "cancelled", "expired")
/** @since 0.1.0 */
export type CallbackResolution = typeof CallbackResolution.Type

/** An open callback as the store keeps it until it is resolved. */
export class OpenCallback extends Schema.Class<OpenCallback>("troupe/OpenCallback")({
  callbackId: CallbackId,
  sessionId: SessionId,
  turnId: TurnId,
  operationId: OperationId,
  kind: CallbackKind,
  request: Json,
  /** The seq of the `callback_opened` record. */
  openedSeq: Schema.Number,
  openedAt: Schema.Number
}) {}

/** What an `approval` callback asks: may the model's call of `toolName` run? */
export class ApprovalRequest extends Schema.TaggedClass<ApprovalRequest>("troupe/Callback/ApprovalRequest")(
  "approval",
  {
    toolName: Schema.String,
    /** The model's id for this tool call. */
    callId: Schema.String,
    /** The arguments as the model wrote them (JSON text). */
    arguments: Schema.String
  }
) {}

/** What a `client_tool` callback asks: run `toolName` on the client and send back its result. */
export class ClientToolRequest extends Schema.TaggedClass<ClientToolRequest>("troupe/Callback/ClientToolRequest")(
  "client_tool",
  {
    toolName: Schema.String,
    callId: Schema.String,
    arguments: Schema.String
  }
) {}

/** A callback's request, by kind. */
export const CallbackRequest = Schema.Union(ApprovalRequest, ClientToolRequest)
/** @since 0.1.0 */
export type CallbackRequest = typeof CallbackRequest.Type

/** An approval decision: run it, run it and every later call of this tool in the session, or refuse it. */
export const ApprovalDecision = Schema.Literal("approve", "approve_session", "deny")
/** @since 0.1.0 */
export type ApprovalDecision = typeof ApprovalDecision.Type

/** The answer to an `approval` callback. */
export class ApprovalAnswer extends Schema.Class<ApprovalAnswer>("troupe/Callback/ApprovalAnswer")({
  decision: ApprovalDecision,
  /** Shown to the model with a denial. */
  reason: Schema.optional(Schema.String)
}) {}

/** The result an approval that nobody answered in time is resolved with (`callback_resolved` with resolution `expired`). */
export const ExpiredApproval = Schema.Struct({
  expired: Schema.Literal(true),
  expiresAt: Schema.Number
})
/** @since 0.3.0 */
export type ExpiredApproval = typeof ExpiredApproval.Type

/** An approval's result as its `callback_resolved` records it: a person's answer, or its expiry. */
export const ApprovalResult = Schema.Union(ApprovalAnswer, ExpiredApproval)
/** @since 0.3.0 */
export type ApprovalResult = typeof ApprovalResult.Type

/** An approval's recorded result; `None` when there is none (a cancelled approval). */
export const decodeApprovalResult: (result: unknown) => Option.Option<ApprovalResult> = Schema.decodeUnknownOption(ApprovalResult)

/** The answer to a `client_tool` callback: the tool's output, as the model will see it. */
export class ClientToolAnswer extends Schema.Class<ClientToolAnswer>("troupe/Callback/ClientToolAnswer")({
  // Json is Unknown, which a missing key would satisfy: an answer must say what the tool returned.
  output: Json.pipe(Schema.filter((value) => value !== undefined, { message: () => "output is required" })),
  isError: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {}

/** The answer schema of each kind. */
export const answerSchema = {
  approval: ApprovalAnswer,
  client_tool: ClientToolAnswer
} as const

/**
 * An open callback as a provider receives it: where it comes from in the
 * session tree (`parentSessionId`, and `agentPath`, the agent names from the
 * root session down to this one) and its typed request.
 */
export class PendingCallback extends Schema.Class<PendingCallback>("troupe/PendingCallback")({
  callbackId: CallbackId,
  sessionId: SessionId,
  parentSessionId: Schema.NullOr(SessionId),
  agentPath: Schema.Array(Schema.String),
  turnId: TurnId,
  operationId: OperationId,
  kind: CallbackKind,
  request: CallbackRequest,
  openedAt: Schema.Number,
  /** When an unanswered approval expires (epoch ms), if its turn has an approval timeout; an answer after it is stale. */
  expiresAt: Schema.optional(Schema.Number)
}) {}

/** The request of each kind. */
export interface RequestOf {
  readonly approval: ApprovalRequest
  readonly client_tool: ClientToolRequest
}

/** A pending callback of kind `K`, its request typed by that kind. */
export type CallbackOf<K extends CallbackKind = CallbackKind> = K extends CallbackKind
  ? PendingCallback & { readonly kind: K; readonly request: RequestOf[K] }
  : never

/** What a handler answers a callback of kind `K` with (the encoded answer: a plain object). */
export type AnswerOf<K extends CallbackKind = CallbackKind> = (typeof answerSchema)[K]["Encoded"]

/**
 * A provider's handler for the kinds `K`: `Some(answer)` answers, `None`
 * leaves the callback to the next provider (or a manual answer). An answer
 * that does not decode as its kind's at run time (a cast, plain JavaScript)
 * ends the provider with `InvalidCallbackAnswer`.
 */
export type Handler<E = never, K extends CallbackKind = CallbackKind> = (
  callback: CallbackOf<K>
) => Effect.Effect<Option.Option<AnswerOf<K>>, E>
