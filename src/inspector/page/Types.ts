/**
 * The shapes the page reads from the HTTP API, as JSON (the schemas' encoded
 * forms). Type-only imports: the bundle carries none of the schema code.
 *
 * @since 0.3.0
 */
import type * as Schema from "effect/Schema"
import type { PendingCallback as PendingCallbackSchema } from "../../schema/Callback.js"
import type { RecordBody as RecordBodySchema } from "../../schema/Record.js"
import type { Session as SessionSchema, TreeNode as TreeNodeSchema } from "../../schema/Session.js"

/** A session as the API answers it. */
export type Session = Schema.Schema.Encoded<typeof SessionSchema>
/** One node of `GET /v1/sessions/{id}/tree`. */
export type TreeNode = Schema.Schema.Encoded<typeof TreeNodeSchema>
/** A pending callback as `callbacks` and `callbacks/stream` send it. */
export type PendingCallback = Schema.Schema.Encoded<typeof PendingCallbackSchema>
/** The body of one log record. */
export type RecordBody = Schema.Schema.Encoded<typeof RecordBodySchema>

/** One durable event of a session's stream: its cursor, time and record. */
export interface DurableEvent {
  readonly cursor: number
  readonly at: number
  readonly record: RecordBody
}

/** `{ items, nextCursor? }`. */
export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly nextCursor?: string
}

/** A listed session's summary (`GET /v1/sessions?summaries=true`): counted by the server from its log. */
export interface Summary {
  readonly turns: number
  readonly totalTokens: number
  readonly pendingCallbacks: number
}

/** A page of `GET /v1/sessions?summaries=true`: the sessions, and each one's summary by id. */
export interface SessionPage extends Page<Session> {
  readonly summaries?: Readonly<Record<string, Summary>>
}

/** A problem+json answer (HTTP.md, "Errors"). */
export interface Problem {
  readonly status: number
  readonly kind: string
  readonly title?: string
  readonly message: string
  readonly details?: unknown
}
