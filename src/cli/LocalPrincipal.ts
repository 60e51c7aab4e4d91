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
import { createHash } from "node:crypto"
import { userInfo } from "node:os"
import { Principal } from "../schema/Principal.js"

/** The namespace of troupe's name-based UUIDs. */
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

/** The local principal of `user`. */
export const forUser = (user: string): Principal =>
  new Principal({
    customerId: uuidv5(NAMESPACE, `customer:${user}`),
    organizationId: uuidv5(NAMESPACE, `organization:${user}`),
    workspaceId: uuidv5(NAMESPACE, `workspace:${user}`),
    userId: user.slice(0, 256)
  })

/** The local principal of the user running this process. */
export const current = (): Principal => forUser(userName())
