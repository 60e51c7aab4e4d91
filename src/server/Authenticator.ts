/**
 * Who a connection acts for. `auth.hello { token }` is checked here, and so
 * is a connection that arrives without a token: on a trusted-local listener
 * (a unix socket only the daemon's user can open, or the stdio of the process
 * that started the daemon) `layerTrustedLocal` authenticates it as the
 * configured local principal. See docs/decisions/0004-trusted-local.md.
 *
 * Tokens are compared by their SHA-256 digest, so a lookup takes the same
 * path whatever the token, and a token never appears in an error or a log.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import { readFile, stat } from "node:fs/promises"
import { Principal } from "../schema/Principal.js"
import { WireError } from "./Router.js"

/** What the authenticator knows about the connecting peer. */
export interface AuthPeer {
  /** Which listener accepted the connection. */
  readonly listener: "unix" | "tcp" | "stdio"
  /** The listener vouches that the peer runs as the daemon's user. */
  readonly trustedLocal: boolean
}

/** The port: a token (or none) and a peer to a principal, or `unauthenticated`. */
export class Authenticator extends Context.Tag("troupe/Authenticator")<
  Authenticator,
  {
    /** The principal for `token` (`undefined`: the peer sent none), or `WireError` kind `unauthenticated`. */
    readonly authenticate: (token: string | undefined, peer: AuthPeer) => Effect.Effect<Principal, WireError>
  }
>() {}

/** The token file is missing, unreadable or not of the documented shape. `reason` never holds a token. */
export class AuthConfigError extends Schema.TaggedError<AuthConfigError>()("AuthConfigError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `token file ${this.path}: ${this.reason}`
  }
}

/** The error every refused credential gets: it does not say whether a token exists. */
export const unauthenticated = (message = "a valid token is required"): WireError =>
  new WireError({ kind: "unauthenticated", message })

const digest = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex")

/** An authenticator over a token table (token → principal). */
export const fromTable = (table: ReadonlyMap<string, Principal> | Readonly<Record<string, Principal>>): Authenticator["Type"] => {
  const byDigest = new Map<string, Principal>()
  const entries = table instanceof Map ? table.entries() : Object.entries(table)
  for (const [token, principal] of entries) {
    if (token.length > 0) byDigest.set(digest(token), principal)
  }
  return Authenticator.of({
    authenticate: (token) => {
      if (token === undefined || token.length === 0) return Effect.fail(unauthenticated())
      const principal = byDigest.get(digest(token))
      return principal === undefined ? Effect.fail(unauthenticated("invalid token")) : Effect.succeed(principal)
    }
  })
}

/** Refuses everyone: the authenticator of a daemon that has no tokens. */
export const denyAll: Authenticator["Type"] = Authenticator.of({
  authenticate: () => Effect.fail(unauthenticated())
})

/** Tokens given in code. */
export const layerStatic = (table: Readonly<Record<string, Principal>>): Layer.Layer<Authenticator> =>
  Layer.succeed(Authenticator, fromTable(table))

/** Refuses every token (pair with `layerTrustedLocal` for a local-only daemon). */
export const layerDenyAll: Layer.Layer<Authenticator> = Layer.succeed(Authenticator, denyAll)

const decodePrincipal = Schema.decodeUnknownEither(Principal, { onExcessProperty: "error" })

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Parses a token file's text: `{ "tokens": { "<token>": { customerId,
 * organizationId, workspaceId, userId? } } }`. Entries are named by position in
 * errors, never by their token.
 */
export const parseTokenFile = (path: string, text: string): Either.Either<Map<string, Principal>, AuthConfigError> => {
  const fail = (reason: string) => Either.left(new AuthConfigError({ path, reason }))
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return fail("not valid JSON")
  }
  if (!isRecord(json) || !isRecord(json["tokens"])) return fail("expected an object with a \"tokens\" object")
  const table = new Map<string, Principal>()
  let index = 0
  for (const [token, value] of Object.entries(json["tokens"])) {
    index++
    if (token.length === 0) return fail(`token #${index} is empty`)
    const decoded = decodePrincipal(value)
    if (Either.isLeft(decoded)) {
      return fail(`the principal of token #${index} is invalid: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)
    }
    table.set(token, decoded.right)
  }
  return Either.right(table)
}

/**
 * Tokens from a JSON file, read once when the layer is built. A file that
 * others can read is used, with a warning: it holds credentials.
 */
export const layerFile = (path: string): Layer.Layer<Authenticator, AuthConfigError> =>
  Layer.effect(
    Authenticator,
    Effect.gen(function*() {
      const text = yield* Effect.tryPromise({
        try: () => readFile(path, "utf8"),
        catch: (error) => new AuthConfigError({ path, reason: `cannot be read (${codeOf(error)})` })
      })
      const mode = yield* Effect.promise(() => stat(path).then((s) => s.mode, () => 0))
      if ((mode & 0o077) !== 0) {
        yield* Effect.logWarning(`token file ${path} is readable by other users (mode ${(mode & 0o777).toString(8)})`)
      }
      const table = yield* parseTokenFile(path, text)
      return fromTable(table)
    })
  )

const codeOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : "unknown error"

/**
 * Trusted-local on top of `fallback`: a peer on a trusted-local listener that
 * sends no token is `principal`; anything else (a token, or an untrusted
 * listener) goes to `fallback`.
 */
export const trustedLocal = (principal: Principal, fallback: Authenticator["Type"] = denyAll): Authenticator["Type"] =>
  Authenticator.of({
    authenticate: (token, peer) =>
      token === undefined && peer.trustedLocal ? Effect.succeed(principal) : fallback.authenticate(token, peer)
  })

/**
 * Trusted-local peers are `principal`; tokens are checked by `fallback`
 * (default: every token is refused, so only local peers get in).
 */
export const layerTrustedLocal = <E = never, R = never>(
  principal: Principal,
  fallback?: Layer.Layer<Authenticator, E, R>
): Layer.Layer<Authenticator, E, R> =>
  fallback === undefined
    ? Layer.succeed(Authenticator, trustedLocal(principal))
    : Layer.effect(Authenticator, Effect.map(Authenticator, (inner) => trustedLocal(principal, inner))).pipe(
      Layer.provide(fallback)
    )
