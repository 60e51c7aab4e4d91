/**
 * What every HTTP request passes before an endpoint sees it, and how any
 * failure becomes a problem+json answer (HTTP.md "Conventions", "Limits"):
 *
 * - `Host` must be one of the listener's own addresses or a configured name
 *   (a DNS-rebinding page reaches us under its own name: refused);
 * - a state-changing request with an `Origin` other than the listener's own
 *   (or a configured `--http-cors` origin) is refused: no cross-site writes;
 * - on a listener that takes no writes (`writes`: `troupe inspect`), every
 *   state-changing endpoint is 403 `forbidden`, but for callback answers when
 *   it takes those;
 * - the route is matched against the API's own table first: an unknown path
 *   is 404 (or a static asset, when the listener serves some), a known path
 *   with another method 405 with `Allow`;
 * - a body is read once, bounded (`maxBodyBytes`: 413), must be
 *   `application/json` (415), parse (400 `malformed_message`) and nest no
 *   deeper than the wire allows; the endpoint then decodes the same text.
 *
 * Failures the API raises itself (a field that does not fit its schema) and
 * defects become problems here too: a defect is logged and answered
 * `internal`, never with its text.
 *
 * @since 0.3.0
 */
import { HttpApiError, HttpApp, HttpServerRequest, HttpServerResponse, HttpIncomingMessage } from "@effect/platform"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Api } from "../http/Api.js"
import * as Problem from "../http/Problem.js"
import * as Cbor from "../protocol/Cbor.js"

/** Serves files such as the inspector's page for GET/HEAD requests no endpoint takes; `None` is a 404. */
export type Assets = (
  request: HttpServerRequest.HttpServerRequest,
  path: string
) => Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>>

/**
 * Which state-changing endpoints a listener takes: `all` (a daemon's),
 * `answers` (only `POST …/callbacks/{callbackId}/answer`) or `none` (a viewer).
 */
export type Writes = "all" | "answers" | "none"

/** What the guard checks against. */
export interface Options {
  /** The `Host` values this listener answers to (lower case, `host:port`). */
  readonly hosts: () => ReadonlySet<string>
  /** Browser origins allowed to write and to read with CORS (`--http-cors`), exactly as sent (`https://app.example`). */
  readonly cors: ReadonlyArray<string>
  /** The largest body taken, in bytes. */
  readonly maxBodyBytes: number
  /** Static files beside the API (the inspector). */
  readonly assets?: Assets | undefined
  /** Which state-changing endpoints are taken (default `all`). */
  readonly writes?: Writes | undefined
}

interface RouteEntry {
  /** `group.endpoint`, as the API declares it (`callbacks.answer`). */
  readonly name: string
  readonly method: string
  readonly pattern: RegExp
  readonly hasPayload: boolean
}

/** The API's routes as patterns, read from its declaration. */
const routeTable: ReadonlyArray<RouteEntry> = Object.values(Api.groups).flatMap((group) =>
  Object.values(group.endpoints).map((endpoint) => ({
    name: `${group.identifier}.${endpoint.name}`,
    method: endpoint.method,
    pattern: new RegExp(`^${endpoint.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z]+/g, "[^/]+")}$`),
    hasPayload: Option.isSome(endpoint.payloadSchema)
  }))
)

const writes = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** Why a listener that takes no writes (or only answers) refuses this one; undefined when it takes it. */
export const refusedWrite = (taken: Writes, endpoint: string): string | undefined => {
  if (taken === "all" || (taken === "answers" && endpoint === "callbacks.answer")) return undefined
  return taken === "answers"
    ? "this listener is read-only but for callback answers (troupe inspect --allow-answers): it changes nothing else"
    : "this listener is read-only (troupe inspect): it changes nothing; start it with --allow-answers to answer callbacks"
}

/** The path of a request URL, without its query. */
export const pathOf = (url: string): string => {
  const at = url.indexOf("?")
  return at < 0 ? url : url.slice(0, at)
}

const isJsonType = (contentType: string): boolean => {
  const type = contentType.split(";")[0]!.trim().toLowerCase()
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"))
}

/** A problem answered by the guard itself, encoded as the API would. */
const fail = (status: Problem.Problem["status"], kind: string, message: string, extra?: { details?: unknown }) =>
  Effect.fail(Problem.make(status, kind, message, extra))

/** The body checks: size, media type, JSON, depth. */
const checkBody = (request: HttpServerRequest.HttpServerRequest, route: RouteEntry, maxBodyBytes: number) =>
  Effect.gen(function*() {
    const declared = Number(request.headers["content-length"] ?? "NaN")
    if (Number.isFinite(declared) && declared > maxBodyBytes) {
      return yield* fail(413, "invalid_payload", `the body (${declared} bytes) is over the limit of ${maxBodyBytes} bytes`)
    }
    const text = yield* request.text.pipe(
      HttpIncomingMessage.withMaxBodySize(Option.some(maxBodyBytes)),
      Effect.catchAll(() => fail(413, "invalid_payload", `the body is over the limit of ${maxBodyBytes} bytes, or unreadable`))
    )
    if (text.trim() === "") {
      if (route.hasPayload) return yield* fail(400, "invalid_payload", "a JSON body is required")
      return
    }
    const contentType = request.headers["content-type"] ?? ""
    if (!isJsonType(contentType)) {
      return yield* fail(415, "malformed_message", `bodies are application/json, not ${JSON.stringify(Problem.clip(contentType.slice(0, 64)))}`)
    }
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      return yield* fail(400, "malformed_message", "the body is not valid JSON")
    }
    if (Cbor.tooDeep(value, Cbor.MAX_DEPTH)) {
      return yield* fail(400, "malformed_message", `the body nests deeper than ${Cbor.MAX_DEPTH} levels`)
    }
  })

/** The first issue of a request that does not fit an endpoint's schemas, as `where: problem`. */
const decodeProblem = (error: HttpApiError.HttpApiDecodeError): Problem.Problem => {
  const [issue] = error.issues
  const where = issue === undefined || issue.path.length === 0 ? "" : `${issue.path.map(String).join(".")}: `
  return Problem.make(400, "invalid_payload", `${where}${issue?.message ?? error.message}`)
}

/** Any failure of the app as a problem; defects are logged, never described. */
const toProblem = (cause: Cause.Cause<unknown>): Effect.Effect<never, Problem.Problem> => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (Problem.isProblem(error)) return Effect.fail(error)
    if (error instanceof HttpApiError.HttpApiDecodeError) return Effect.fail(decodeProblem(error))
    if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "RouteNotFound") {
      return fail(404, "not_found", "no such route")
    }
  }
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
  return Effect.zipRight(
    Effect.logError("an HTTP request failed").pipe(Effect.annotateLogs({ cause: Cause.pretty(cause) })),
    fail(500, "internal", "internal error")
  )
}

/** The guard as API middleware: checks, then the endpoint, failures mapped to problems. */
export const middleware = (options: Options) =>
(app: HttpApp.Default): HttpApp.Default<Problem.Problem> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const host = (request.headers["host"] ?? "").toLowerCase()
    if (!options.hosts().has(host)) {
      return yield* fail(403, "forbidden", `this listener does not answer to the Host ${JSON.stringify(Problem.clip(host.slice(0, 64)))}`)
    }
    const method = request.method.toUpperCase()
    const origin = request.headers["origin"]
    if (origin !== undefined && writes.has(method) && origin !== `http://${host}` && !options.cors.includes(origin)) {
      return yield* fail(403, "forbidden", "cross-origin writes are refused (start the daemon with --http-cors ORIGIN to allow one)")
    }
    const path = pathOf(request.url)
    const matching = routeTable.filter((route) => route.pattern.test(path))
    const route = matching.find((entry) => entry.method === method || (method === "HEAD" && entry.method === "GET"))
    if (route === undefined) {
      if (matching.length > 0) {
        const allow = [...new Set(matching.map((entry) => entry.method))].join(", ")
        return yield* fail(405, "malformed_message", `${method} is not allowed here; use ${allow}`, { details: { allow } })
      }
      if (options.assets !== undefined && (method === "GET" || method === "HEAD")) {
        const asset = yield* options.assets(request, path)
        if (Option.isSome(asset)) return asset.value
      }
      return yield* fail(404, "not_found", "no such route")
    }
    if (writes.has(method)) {
      const refused = refusedWrite(options.writes ?? "all", route.name)
      if (refused !== undefined) return yield* fail(403, "forbidden", refused)
      yield* checkBody(request, route, options.maxBodyBytes)
    }
    return yield* app
  }).pipe(Effect.catchAllCause(toProblem))

/**
 * The outermost wrapper: CORS for configured origins (preflights answered
 * here), `Allow` on a 405 and `Retry-After` on `busy` answers.
 */
export const outer = (options: Pick<Options, "cors">) =>
(app: HttpApp.Default): HttpApp.Default =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const origin = request.headers["origin"]
    const allowed = origin !== undefined && options.cors.includes(origin)
    if (request.method === "OPTIONS") {
      if (!allowed) return HttpServerResponse.empty({ status: 403 })
      return HttpServerResponse.empty({
        status: 204,
        headers: {
          "access-control-allow-origin": origin,
          "access-control-allow-methods": "GET, POST, PATCH, OPTIONS",
          "access-control-allow-headers": "authorization, content-type, idempotency-key, last-event-id",
          "access-control-max-age": "600",
          vary: "origin"
        }
      })
    }
    // The server writes the app's answer before this wrapper sees it, so the headers go in as a pre-response handler.
    yield* HttpApp.appendPreResponseHandler((_request, answer) =>
      Effect.sync(() => {
        let response = answer
        if (allowed) {
          response = HttpServerResponse.setHeaders(response, { "access-control-allow-origin": origin, vary: "origin" })
        }
        if (response.status === 429 || response.status === 503) response = HttpServerResponse.setHeader(response, "retry-after", "1")
        if (response.status === 405) {
          const allow = routeTable.filter((route) => route.pattern.test(pathOf(request.url))).map((route) => route.method)
          response = HttpServerResponse.setHeader(response, "allow", [...new Set(allow)].join(", "))
        }
        return response
      })
    )
    return yield* app
  })
