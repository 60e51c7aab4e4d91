/**
 * Where a named daemon listens:
 * `<home>/run/sandboxes/<first 24 hex digits of sha256(utf-8 name)>/agent.sock`.
 *
 * The name is hashed rather than used as a path segment so any name is safe
 * on the file system (no separators, `..`, or case folding) and the path stays
 * short: unix socket paths are limited to about 100 bytes.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { ConfigError } from "effect/ConfigError"
import { createHash } from "node:crypto"
import { homedir } from "node:os"
import { join } from "node:path"
import { InvalidName } from "./ProtocolError.js"

/** The longest daemon name, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 128

/** Hex digits of the name's digest used as its directory. */
export const DIGEST_HEX_LENGTH = 24

/** The troupe home: `$TROUPE_HOME` if set and non-empty, else `~/.troupe`. */
export const home: Config.Config<string> = Config.nonEmptyString("TROUPE_HOME").pipe(
  Config.orElse(() => Config.sync(() => join(homedir(), ".troupe")))
)

// Matches only unpaired surrogates (in `u` mode a pair is one code point): UTF-8 would turn them into U+FFFD,
// so two different names would share a socket.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u

const invalid = (name: string, reason: string) => new InvalidName({ name: name.slice(0, 32), reason })

/** The name's directory under `run/sandboxes`: 24 hex digits of its SHA-256, or why the name is refused. */
export const digest = (name: string): Either.Either<string, InvalidName> => {
  if (LONE_SURROGATE.test(name)) return Either.left(invalid(name, "not well-formed Unicode"))
  const bytes = Buffer.from(name, "utf8")
  if (bytes.length === 0) return Either.left(invalid(name, "empty"))
  if (bytes.length > MAX_NAME_BYTES) {
    return Either.left(invalid(name, `${bytes.length} UTF-8 bytes, more than ${MAX_NAME_BYTES}`))
  }
  return Either.right(createHash("sha256").update(bytes).digest("hex").slice(0, DIGEST_HEX_LENGTH))
}

/** The socket path of daemon `name` under the troupe home `home`. */
export const socketPathIn = (home: string, name: string): Either.Either<string, InvalidName> =>
  Either.map(digest(name), (hex) => join(home, "run", "sandboxes", hex, "agent.sock"))

/** The socket path of daemon `name`, under `home` if given, else under the configured troupe home. */
export const socketPath = (name: string, home_?: string): Effect.Effect<string, InvalidName | ConfigError> =>
  home_ === undefined
    ? Effect.flatMap(home, (dir) => socketPathIn(dir, name))
    : socketPathIn(home_, name)
