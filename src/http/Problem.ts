/**
 * Errors of the HTTP API as `application/problem+json` (RFC 9457, HTTP.md
 * "Errors"): `{ type, title, status, kind, message, retryable?, details? }`,
 * where `kind` is the wire's error kind. One class per status, each carrying
 * its status as a literal, so the API's error union tells them apart when it
 * encodes one and the client picks the class by the answer's status.
 *
 * `message` is bounded (`clip`) and holds only what the caller sent or may
 * see: never a stack, a driver's error or another tenant's data.
 *
 * @since 0.3.0
 */
import { HttpApiSchema } from "@effect/platform"
import * as Schema from "effect/Schema"

/** The media type of every error answer. */
export const contentType = "application/problem+json"

/** At most this many bytes of text in a problem's message (HTTP.md: ≤ 128 bytes of the caller's input). */
export const MAX_MESSAGE = 240

/** A message cut to `MAX_MESSAGE` characters. */
export const clip = (text: string): string => (text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 1)}…`)

const fields = {
  /** A URI naming the problem type: `urn:troupe:problem:<kind>`. */
  type: Schema.String,
  /** The status's reason phrase. */
  title: Schema.String,
  /** The wire's error kind (`not_found`, `conflict`, …); clients match on it. */
  kind: Schema.String,
  message: Schema.String,
  retryable: Schema.optional(Schema.Boolean),
  details: Schema.optional(Schema.Unknown)
}

/** The status and the problem+json media type, as class annotations. */
const annotations = <A>(status: number, description: string): Schema.Annotations.Schema<A> => ({
  ...HttpApiSchema.annotations<A>({ status, description }),
  [HttpApiSchema.AnnotationEncoding]: { kind: "Json", contentType }
})

/** 400: `malformed_message` (not JSON, too deep, an unknown route's shape) or `invalid_payload` (a field that does not fit). */
export class BadRequest extends Schema.Class<BadRequest>("troupe/http/BadRequest")(
  { ...fields, status: Schema.Literal(400) },
  annotations(400, "The request is malformed or a field does not fit")
) {}

/** 401 `unauthenticated`: no token, or one the daemon does not know. */
export class Unauthorized extends Schema.Class<Unauthorized>("troupe/http/Unauthorized")(
  { ...fields, status: Schema.Literal(401) },
  annotations(401, "A valid bearer token is required")
) {}

/** 403 `forbidden`: a child's messages or close from outside, a refused Host or Origin. */
export class Forbidden extends Schema.Class<Forbidden>("troupe/http/Forbidden")(
  { ...fields, status: Schema.Literal(403) },
  annotations(403, "Not allowed for this caller or on this session")
) {}

/** 404 `not_found`: no such session (or another workspace's, identically), turn, agent or route. */
export class NotFound extends Schema.Class<NotFound>("troupe/http/NotFound")(
  { ...fields, status: Schema.Literal(404) },
  annotations(404, "No such session, turn, agent or route")
) {}

/** 405: the path exists, the method does not (`Allow` lists those that do). */
export class MethodNotAllowed extends Schema.Class<MethodNotAllowed>("troupe/http/MethodNotAllowed")(
  { ...fields, status: Schema.Literal(405) },
  annotations(405, "The path takes other methods")
) {}

/** 409: `conflict`, `stale_callback`, `turn_mismatch`, `session_closed`. */
export class Conflict extends Schema.Class<Conflict>("troupe/http/Conflict")(
  { ...fields, status: Schema.Literal(409) },
  annotations(409, "The request conflicts with the session's state")
) {}

/** 413: the body is over the listener's limit. */
export class PayloadTooLarge extends Schema.Class<PayloadTooLarge>("troupe/http/PayloadTooLarge")(
  { ...fields, status: Schema.Literal(413) },
  annotations(413, "The body is over the limit")
) {}

/** 415: a body that is not `application/json`. */
export class UnsupportedMediaType extends Schema.Class<UnsupportedMediaType>("troupe/http/UnsupportedMediaType")(
  { ...fields, status: Schema.Literal(415) },
  annotations(415, "Bodies are application/json")
) {}

/** 429 `busy`: too many open event streams for this principal, or the session's busy policy (`Retry-After`). */
export class TooManyRequests extends Schema.Class<TooManyRequests>("troupe/http/TooManyRequests")(
  { ...fields, status: Schema.Literal(429) },
  annotations(429, "Busy: retry after the time in Retry-After")
) {}

/** 500 `internal`: logged by the daemon, never described here. */
export class Internal extends Schema.Class<Internal>("troupe/http/Internal")(
  { ...fields, status: Schema.Literal(500) },
  annotations(500, "Internal error")
) {}

/** 503 `busy` or `internal` retryable: the store does not answer, or the daemon is draining. */
export class Unavailable extends Schema.Class<Unavailable>("troupe/http/Unavailable")(
  { ...fields, status: Schema.Literal(503) },
  annotations(503, "Unavailable: retry later")
) {}

/** Any problem answer. */
export type Problem =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | MethodNotAllowed
  | Conflict
  | PayloadTooLarge
  | UnsupportedMediaType
  | TooManyRequests
  | Internal
  | Unavailable

/** Every problem class, for declaring them on the API. */
export const all = [
  BadRequest,
  Unauthorized,
  Forbidden,
  NotFound,
  MethodNotAllowed,
  Conflict,
  PayloadTooLarge,
  UnsupportedMediaType,
  TooManyRequests,
  Internal,
  Unavailable
] as const

const titles: Record<Problem["status"], string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable"
}

/** The status each wire error kind is answered with (HTTP.md's table). */
export const statusOf = (kind: string): Problem["status"] => {
  switch (kind) {
    case "malformed_message":
    case "invalid_payload":
    case "unknown_type":
      return 400
    case "unauthenticated":
      return 401
    case "forbidden":
      return 403
    case "not_found":
      return 404
    case "conflict":
    case "stale_callback":
    case "turn_mismatch":
    case "session_closed":
      return 409
    case "busy":
      return 429
    default:
      return 500
  }
}

/** A problem of `status` and `kind`; the message is clipped. */
export const make = (
  status: Problem["status"],
  kind: string,
  message: string,
  extra: { readonly retryable?: boolean | undefined; readonly details?: unknown } = {}
): Problem => {
  const props = {
    type: `urn:troupe:problem:${kind}`,
    title: titles[status],
    kind,
    message: clip(message),
    ...(extra.retryable === undefined ? {} : { retryable: extra.retryable }),
    ...(extra.details === undefined ? {} : { details: extra.details })
  }
  switch (status) {
    case 400:
      return new BadRequest({ ...props, status })
    case 401:
      return new Unauthorized({ ...props, status })
    case 403:
      return new Forbidden({ ...props, status })
    case 404:
      return new NotFound({ ...props, status })
    case 405:
      return new MethodNotAllowed({ ...props, status })
    case 409:
      return new Conflict({ ...props, status })
    case 413:
      return new PayloadTooLarge({ ...props, status })
    case 415:
      return new UnsupportedMediaType({ ...props, status })
    case 429:
      return new TooManyRequests({ ...props, status })
    case 500:
      return new Internal({ ...props, status })
    case 503:
      return new Unavailable({ ...props, status })
  }
}

/** A problem for a wire error kind, at the status HTTP.md gives it. */
export const ofKind = (
  kind: string,
  message: string,
  extra: { readonly retryable?: boolean | undefined; readonly details?: unknown } = {}
): Problem => make(statusOf(kind), kind, message, extra)

/** Whether a value is one of the problem classes. */
export const isProblem = (value: unknown): value is Problem => all.some((cls) => value instanceof cls)
