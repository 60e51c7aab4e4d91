/**
 * Opaque listing cursors and page sizes shared by every store layer.
 *
 * @since 0.1.0
 */
import { Effect, Either, Schema } from "effect"
import { InvalidInput } from "../schema/Errors.js"
import { SessionId } from "../schema/Ids.js"

const Position = Schema.parseJson(Schema.Struct({ before: SessionId }))

/** Encodes "continue with sessions created before this one". */
export const encode = (before: SessionId): string =>
  Buffer.from(JSON.stringify({ before }), "utf8").toString("base64url")

/** Decodes a cursor from `encode`; anything else is `InvalidInput`. */
export const decode = (cursor: string): Effect.Effect<SessionId, InvalidInput> => {
  const decoded = Schema.decodeUnknownEither(Position)(Buffer.from(cursor, "base64url").toString("utf8"))
  return Either.isRight(decoded)
    ? Effect.succeed(decoded.right.before)
    : Effect.fail(new InvalidInput({ what: "cursor", reason: "not a cursor issued by this store" }))
}

/** Page size: 1 to 500, default 50. */
export const limitOf = (limit: number | undefined): Effect.Effect<number, InvalidInput> =>
  limit === undefined
    ? Effect.succeed(50)
    : Number.isInteger(limit) && limit >= 1 && limit <= 500
    ? Effect.succeed(limit)
    : Effect.fail(new InvalidInput({ what: "limit", reason: "expected an integer from 1 to 500" }))
