/**
 * The inspector served by an HTTP listener: `GET /` is the page,
 * `/inspector/app.js` and `/inspector/app.css` its code and styles; every
 * other path is not the inspector's (the listener answers it). The page
 * uses only the listener's public API (DESIGN §11), so it can do nothing a
 * client with the same token could not; its answers say so to the browser
 * too: a Content-Security-Policy that lets it reach its own origin only, no
 * framing, no sniffing, no referrer.
 *
 * Answers are gzipped when the browser accepts it and carry an ETag
 * (`If-None-Match` gets 304); the assets are made once, by the first
 * request (`Assets`).
 *
 * @since 0.3.0
 */
import { type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { InspectorUnavailable } from "../schema/Errors.js"
import * as Assets from "./Assets.js"

/** The page's paths and the file each serves. */
export const routes: Readonly<Record<string, keyof typeof Assets.files>> = {
  "/": "index.html",
  "/index.html": "index.html",
  "/inspector/app.js": "app.js",
  "/inspector/app.css": "app.css"
}

/** What every answer of the inspector carries. */
export const securityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

/** Whether `path` (without its query) is one of the inspector's. */
export const owns = (path: string): boolean => Object.hasOwn(routes, path.split("?")[0]!)

/** The answer for one request, given the assets. */
export const respond = (
  assets: Assets.Assets,
  method: string,
  path: string,
  headers: Readonly<Record<string, string | undefined>>
): Option.Option<HttpServerResponse.HttpServerResponse> => {
  const name = routes[path.split("?")[0]!]
  if (name === undefined) return Option.none()
  if (method !== "GET" && method !== "HEAD") {
    return Option.some(HttpServerResponse.text("method not allowed", { status: 405, headers: { ...securityHeaders, allow: "GET, HEAD" } }))
  }
  const file = assets.get(name)!
  if (headers["if-none-match"] === file.etag) {
    return Option.some(HttpServerResponse.empty({ status: 304, headers: { ...securityHeaders, etag: file.etag } }))
  }
  const gzip = /\bgzip\b/.test(headers["accept-encoding"] ?? "")
  const body = gzip ? file.gzip : file.body
  return Option.some(HttpServerResponse.uint8Array(method === "HEAD" ? new Uint8Array() : body, {
    contentType: file.contentType,
    headers: { ...securityHeaders, etag: file.etag, vary: "accept-encoding", ...(gzip ? { "content-encoding": "gzip" } : {}) }
  }))
}

/** The answer when the page could not be made: the API still works. */
const unavailable = (error: InspectorUnavailable) =>
  HttpServerResponse.text(`${error.message}\n\nThe HTTP API under /v1 works regardless.\n`, { status: 503, headers: securityHeaders })

/**
 * A handler for a listener (the HTTP listener's `staticAssets`): `Some(answer)`
 * for the inspector's paths, `None` for every other; `path` defaults to the
 * request's.
 */
export type Handler = (
  request: HttpServerRequest.HttpServerRequest,
  path?: string
) => Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>>

/** What the page is told about its listener. */
export interface Options {
  /**
   * Which changes the listener takes (`HttpGuard.Writes`, default `all`): the
   * page shows only the controls that can work (a read-only `troupe inspect`
   * has no rename, archive or answer buttons).
   */
  readonly writes?: "all" | "answers" | "none" | undefined
}

/**
 * The page told which changes its listener takes: a `<meta name="troupe-writes">`
 * in `index.html` (the Content-Security-Policy allows no inline script).
 */
export const withWrites = (assets: Assets.Assets, writes: NonNullable<Options["writes"]>): Assets.Assets => {
  if (writes === "all") return assets
  const html = new TextDecoder().decode(assets.get("index.html")!.body)
  const told = html.replace("<head>", `<head>\n<meta name="troupe-writes" content="${writes}">`)
  return new Map([...assets, ["index.html", Assets.asset("index.html", new TextEncoder().encode(told))]])
}

/** Makes the handler; the assets are made by the first request that needs them, once. */
export const makeWith = (options: Options): Effect.Effect<Handler> =>
  Effect.map(Effect.cached(Effect.map(Assets.make, (made) => withWrites(made, options.writes ?? "all"))), (assets) => (request, given) => {
    const path = given ?? new URL(request.url, "http://inspector").pathname
    if (!owns(path)) return Effect.succeed(Option.none())
    return assets.pipe(
      Effect.map((ready) => respond(ready, request.method, path, request.headers)),
      Effect.catchAll((error) => Effect.succeed(Option.some(unavailable(error))))
    )
  })

/** Makes the handler of a listener that takes every change (`troupe serve --http`). */
export const make: Effect.Effect<Handler> = makeWith({})
