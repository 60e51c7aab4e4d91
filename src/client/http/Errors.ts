/**
 * What a call of `HttpSessionClient` fails with, and how HTTP's failures
 * become them: the same classes as the socket client's, so a caller matches
 * on the same `kind`s whatever the transport.
 *
 * - A problem+json answer (`http/Problem`) is a `ServerError` with its
 *   `kind`, `message`, `retryable` and `details`, as a `core.error` is.
 * - A daemon that cannot be reached (fetch's transport failure) is a
 *   `ConnectError`; a stream cut before its end is `Closed`.
 * - An answer this client cannot read (another status, a body of the wrong
 *   shape) is `UnexpectedAnswer`.
 *
 * @since 0.3.0
 */
import type { HttpApiError, HttpClientError } from "@effect/platform"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Problem from "../../http/Problem.js"
import { ErrorKind } from "../../protocol/ProtocolError.js"
import type { InvalidInput } from "../../schema/Errors.js"
import { Closed, ConnectError } from "../AgentClient.js"
import { ServerError, UnexpectedAnswer } from "../session/Errors.js"

/** What a call of the HTTP client can fail with. */
export type HttpSessionClientError = ServerError | UnexpectedAnswer | ConnectError | Closed | InvalidInput

const isKind = Schema.is(ErrorKind)

/** A problem answer as the socket client's `ServerError` (a kind this client does not know is `internal`). */
export const fromProblem = (problem: Problem.Problem): ServerError =>
  new ServerError({
    kind: isKind(problem.kind) ? problem.kind : "internal",
    message: problem.message,
    ...(problem.retryable === undefined ? {} : { retryable: problem.retryable }),
    ...(problem.details === undefined ? {} : { details: problem.details })
  })

/** The errno code under a fetch failure (`ECONNREFUSED`), or its message. */
const reasonOf = (cause: unknown): string => {
  let at: unknown = cause
  for (let depth = 0; depth < 4 && typeof at === "object" && at !== null; depth++) {
    const { code, cause: next, errors } = at as { readonly code?: unknown; readonly cause?: unknown; readonly errors?: unknown }
    if (typeof code === "string") return code
    // Happy eyeballs tries each address: its AggregateError holds one error per address.
    at = next ?? (Array.isArray(errors) ? errors[0] : undefined)
  }
  const innermost = (cause as { readonly cause?: unknown } | undefined)?.cause
  return innermost instanceof Error ? innermost.message : cause instanceof Error ? cause.message : String(cause)
}

/** What a call of the API's client fails with before it is this client's error. */
export type ApiFailure = Problem.Problem | HttpApiError.HttpApiDecodeError | HttpClientError.HttpClientError | ParseResult.ParseError

/** Any failure of a request to `address` (for `request`, the endpoint's name) as this client's error. */
export const toClientError = (address: string, request: string) =>
(
  error: ApiFailure | HttpSessionClientError
): HttpSessionClientError => {
  if (Problem.isProblem(error)) return fromProblem(error)
  if (ParseResult.isParseError(error)) return new UnexpectedAnswer({ request, reason: error.message })
  switch (error._tag) {
    case "RequestError":
      return error.reason === "Transport"
        ? new ConnectError({ address, reason: reasonOf(error.cause) })
        : new UnexpectedAnswer({ request, reason: error.message })
    case "ResponseError":
      // A body cut off while it was read: the connection dropped under the answer.
      return error.reason === "Decode" && error.response.status < 300
        ? new Closed({ reason: reasonOf(error.cause) })
        : new UnexpectedAnswer({ request, reason: `status ${error.response.status}: ${error.message}` })
    case "HttpApiDecodeError":
      // The API's own answer to a request it could not decode (the daemon answers a problem instead; a plain HttpApi server may not).
      return new ServerError({ kind: "invalid_payload", message: error.message })
    default:
      return error
  }
}
