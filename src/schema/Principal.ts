/**
 * Who acts: every session belongs to one principal's workspace, and a caller
 * sees only sessions of its own workspace.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/** A lower-case or upper-case RFC 4122 UUID string. */
export const Uuid = Schema.String.pipe(
  Schema.pattern(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, {
    message: () => "expected a UUID"
  })
)

/**
 * The acting principal: three distinct UUIDs and an optional user id. Unknown
 * fields are refused, so a typo never silently widens or narrows a scope.
 */
export class Principal extends Schema.Class<Principal>("troupe/Principal")(
  Schema.Struct({
    customerId: Uuid,
    organizationId: Uuid,
    workspaceId: Uuid,
    userId: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)))
  }).annotations({ parseOptions: { onExcessProperty: "error" } }).pipe(
    Schema.filter((p) =>
      new Set([p.customerId.toLowerCase(), p.organizationId.toLowerCase(), p.workspaceId.toLowerCase()]).size === 3 ||
      "customerId, organizationId and workspaceId must be three distinct UUIDs"
    )
  )
) {}

/** Decodes unknown input into a `Principal`, refusing excess properties. */
export const decodePrincipal = Schema.decodeUnknown(Principal, { onExcessProperty: "error" })
