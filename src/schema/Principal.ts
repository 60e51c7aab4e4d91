/**
 * Who acts: every session belongs to one principal's workspace, and a caller
 * sees only sessions of its own workspace.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import { userInfo } from "node:os"

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

/**
 * A principal's encoded form, as `Schema.encodeSync(Principal)` gives it (the same keys in the same
 * order), without its checks: a `Principal` was checked when it was made, and its fields are their
 * own encoded form. Stores write it once per session (its row, the create's fingerprint).
 */
export const principalFields = (principal: Principal): typeof Principal.Encoded =>
  principal.userId === undefined
    ? { customerId: principal.customerId, organizationId: principal.organizationId, workspaceId: principal.workspaceId }
    : {
      customerId: principal.customerId,
      organizationId: principal.organizationId,
      workspaceId: principal.workspaceId,
      userId: principal.userId
    }

/** The namespace of troupe's name-based UUIDs (the local principal's). */
export const NAMESPACE = "6f1d7c52-3f0e-4b8e-9a4c-2d6f3b1e8a57"

/** A version 5 (SHA-1, name-based) UUID of `name` in `namespace`. */
export const uuidv5 = (namespace: string, name: string): string => {
  const space = Buffer.from(namespace.replace(/-/g, ""), "hex")
  const hash = createHash("sha1").update(space).update(name, "utf8").digest()
  hash[6] = (hash[6]! & 0x0f) | 0x50
  hash[8] = (hash[8]! & 0x3f) | 0x80
  const hex = hash.subarray(0, 16).toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`
}

/** The OS user name; the uid, or `local`, where the system has no name for it. */
export const userName = (): string => {
  try {
    const name = userInfo().username
    if (name.length > 0) return name
  } catch {
    // No passwd entry (some containers): fall through.
  }
  return typeof process.getuid === "function" ? `uid-${process.getuid()}` : "local"
}

/**
 * The local principal of `user`: name-based UUIDs (`uuidv5(NAMESPACE,
 * "customer:<user>")`, `organization:`, `workspace:`), the same in every
 * process of that user, on every run and machine.
 */
export const forUser = (user: string): Principal =>
  new Principal({
    customerId: uuidv5(NAMESPACE, `customer:${user}`),
    organizationId: uuidv5(NAMESPACE, `organization:${user}`),
    workspaceId: uuidv5(NAMESPACE, `workspace:${user}`),
    userId: user.slice(0, 256)
  })

/**
 * The principal of the user running this process: who `troupe run` acts as,
 * and who `troupe sessions` is on a daemon's unix socket, so a script using it
 * sees the sessions that user's CLI made (and mints no UUIDs of its own).
 */
export const local: Principal = forUser(userName())
