/**
 * Opaque listing cursors and page sizes shared by every store layer.
 *
 * A cursor is a position ("sessions created before this one") bound to the
 * listing it came from: the caller's tenancy and the listing's identity
 * (scope, anchor, archived flag). The binding is a digest, so the cursor shows
 * neither; a cursor presented to another listing or by another tenancy is
 * `InvalidInput`, never a page of something else.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { InvalidInput } from "../schema/Errors.js"
import { SessionId } from "../schema/Ids.js"
import type { Principal } from "../schema/Principal.js"
import type { ListScope } from "../schema/Session.js"
import { tenantOf } from "./SessionDraft.js"

const Position = Schema.parseJson(Schema.Struct({ before: SessionId, of: Schema.String }))

/** 64 bits of FNV-1a over `text`, as 16 hex digits: enough to tell listings apart, not a secret. */
const digest = (text: string): string => {
  let a = 0x811c9dc5
  let b = 0x01000193 ^ 0x9e3779b9
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193) >>> 0
    b = Math.imul(b ^ c ^ (a >>> 7), 0x01000193) >>> 0
  }
  return a.toString(16).padStart(8, "0") + b.toString(16).padStart(8, "0")
}

/** What a cursor is bound to: the tenancy and the listing. */
export const listing = (
  principal: Principal,
  which:
    | { readonly _tag: "list"; readonly scope: ListScope; readonly includeArchived: boolean }
    | { readonly _tag: "children"; readonly sessionId: SessionId }
): string => {
  const tenant = tenantOf(principal)
  if (which._tag === "children") return digest(`${tenant}|children|${which.sessionId}`)
  const scope = which.scope === "roots"
    ? "roots"
    : "children" in which.scope
    ? `children:${which.scope.children}`
    : `tree:${which.scope.tree}`
  return digest(`${tenant}|list|${scope}|${which.includeArchived ? 1 : 0}`)
}

/** Encodes "continue with sessions created before this one" in the listing `of`. */
export const encode = (before: SessionId, of: string): string =>
  Buffer.from(JSON.stringify({ before, of }), "utf8").toString("base64url")

/** Decodes a cursor from `encode` for the listing `of`; anything else is `InvalidInput`. */
export const decode = (cursor: string, of: string): Effect.Effect<SessionId, InvalidInput> => {
  const decoded = Schema.decodeUnknownEither(Position)(Buffer.from(cursor, "base64url").toString("utf8"))
  if (Either.isLeft(decoded)) {
    return Effect.fail(new InvalidInput({ what: "cursor", reason: "not a cursor issued by this store" }))
  }
  return decoded.right.of === of
    ? Effect.succeed(decoded.right.before)
    : Effect.fail(new InvalidInput({ what: "cursor", reason: "the cursor belongs to another listing" }))
}

/** The position of an optional cursor in the listing `of`. */
export const positionOf = (cursor: string | undefined, of: string): Effect.Effect<SessionId | undefined, InvalidInput> =>
  cursor === undefined ? Effect.succeed(undefined) : decode(cursor, of)

/** Page size: 1 to 500, default 50. */
export const limitOf = (limit: number | undefined): Effect.Effect<number, InvalidInput> =>
  limit === undefined
    ? Effect.succeed(50)
    : Number.isInteger(limit) && limit >= 1 && limit <= 500
    ? Effect.succeed(limit)
    : Effect.fail(new InvalidInput({ what: "limit", reason: "expected an integer from 1 to 500" }))
