/**
 * Callbacks: requests for something outside the runtime to answer.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
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
