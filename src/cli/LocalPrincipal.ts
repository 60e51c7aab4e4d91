/**
 * The principal of the machine's own user: who `troupe run` acts as, and who
 * a daemon's trusted-local peers (its unix socket, its stdio) are.
 *
 * Its three ids are name-based UUIDs (RFC 4122 version 5: SHA-1 of a fixed
 * troupe namespace and a name), derived from the OS user name:
 *
 *   customerId     = uuidv5(NAMESPACE, "customer:<user>")
 *   organizationId = uuidv5(NAMESPACE, "organization:<user>")
 *   workspaceId    = uuidv5(NAMESPACE, "workspace:<user>")
 *   userId         = "<user>"
 *
 * So they are the same in every process of that user, on every run, and on
 * every machine: sessions made by `troupe run` are seen by that user's daemon
 * over its unix socket, and survive restarts.
 *
 * @since 0.1.0
 */
import * as Principal from "../schema/Principal.js"

/** The namespace of troupe's name-based UUIDs. */
export const NAMESPACE = Principal.NAMESPACE

/** A version 5 (SHA-1, name-based) UUID of `name` in `namespace`. */
export const uuidv5 = Principal.uuidv5

/** The OS user name; the uid, or `local`, where the system has no name for it. */
export const userName = Principal.userName

/** The local principal of `user`. */
export const forUser = Principal.forUser

/** The local principal of the user running this process (`Principal.local`). */
export const current = (): Principal.Principal => Principal.local
