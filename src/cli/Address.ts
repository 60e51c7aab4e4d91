/**
 * Where a daemon listens, as the command line says it: `--name NAME` (the
 * socket `Naming.socketPath(NAME)` under `$TROUPE_HOME`), `--socket PATH`,
 * `--tcp HOST:PORT`. `troupe serve` listens there; the client commands
 * connect there, or to an HTTP listener with `--url http://HOST:PORT`. With none of them, both sides use the daemon named
 * `default`.
 *
 * @since 0.1.0
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { resolve } from "node:path"
import * as Naming from "../protocol/Naming.js"
import * as ExitCode from "./ExitCode.js"

/** The name of the daemon used when no address is given. */
export const DEFAULT_NAME = "default"

/** A TCP host and port. */
export interface HostPort {
  readonly host: string
  readonly port: number
}

/** Parses `HOST:PORT` (`[::1]:PORT` for IPv6; `:PORT` is `127.0.0.1:PORT`). */
export const parseHostPort = (text: string): Either.Either<HostPort, string> => {
  const at = text.lastIndexOf(":")
  if (at < 0) return Either.left(`${JSON.stringify(text)}: expected HOST:PORT`)
  let host = text.slice(0, at)
  const portText = text.slice(at + 1)
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1)
  if (host === "") host = "127.0.0.1"
  const port = Number(portText)
  if (!/^\d{1,5}$/.test(portText) || port > 65535) {
    return Either.left(`${JSON.stringify(text)}: the port must be a number from 0 to 65535`)
  }
  return Either.right({ host, port })
}

const invalid = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

/** `--name NAME`. */
export const name: Options.Options<Option.Option<string>> = Options.text("name").pipe(
  Options.withPseudoName("NAME"),
  Options.withDescription(
    "The daemon's name: its socket is $TROUPE_HOME/run/sandboxes/<hash of NAME>/agent.sock (default name: default)."
  ),
  Options.optional
)

/** `--socket PATH`. */
export const socket: Options.Options<Option.Option<string>> = Options.text("socket").pipe(
  Options.withPseudoName("PATH"),
  Options.withDescription("A unix socket path, instead of a named daemon's."),
  Options.map(resolve),
  Options.optional
)

/** `--tcp HOST:PORT`. */
export const tcp: Options.Options<Option.Option<HostPort>> = Options.text("tcp").pipe(
  Options.withPseudoName("HOST:PORT"),
  Options.withDescription("A TCP address (port 0 picks a free one when serving). TCP peers always need a token."),
  Options.mapEffect((text) =>
    Either.match(parseHostPort(text), { onLeft: (reason) => Effect.fail(invalid(`--tcp: ${reason}`)), onRight: Effect.succeed })
  ),
  Options.optional
)

/** Parses an `http://` or `https://` base URL. */
export const parseUrl = (text: string): Either.Either<string, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left(`${JSON.stringify(text)}: expected http://HOST:PORT`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return Either.left(`${JSON.stringify(text)}: expected an http:// or https:// URL`)
  }
  // The API lives under /v1 of the listener's root: a path given here would be a mistake, not a prefix.
  return Either.right(url.origin)
}

/** `--url http://HOST:PORT`: a daemon's HTTP listener (`troupe serve --http`). */
export const url: Options.Options<Option.Option<string>> = Options.text("url").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription("A daemon's HTTP listener (troupe serve --http HOST:PORT), instead of its socket."),
  Options.mapEffect((text) =>
    Either.match(parseUrl(text), { onLeft: (reason) => Effect.fail(invalid(`--url: ${reason}`)), onRight: Effect.succeed })
  ),
  Options.optional
)

/** The socket path of a named daemon, or a usage error for a name that cannot be one. */
export const socketOf = (daemonName: string): Effect.Effect<string, ExitCode.CliFailure> =>
  Naming.socketPath(daemonName).pipe(
    Effect.mapError((error) =>
      ExitCode.usage(
        error._tag === "InvalidName"
          ? `--name: ${JSON.stringify(error.name)} is not a daemon name (${error.reason})`
          : `TROUPE_HOME: ${String(error)}`
      )
    )
  )

/** The unix socket given by `--name` or `--socket` (an error when both are). */
export const unixPath = (options: {
  readonly name: Option.Option<string>
  readonly socket: Option.Option<string>
}): Effect.Effect<Option.Option<string>, ExitCode.CliFailure> => {
  if (Option.isSome(options.name) && Option.isSome(options.socket)) {
    return Effect.fail(ExitCode.usage("give --name or --socket, not both"))
  }
  if (Option.isSome(options.socket)) return Effect.succeed(options.socket)
  if (Option.isSome(options.name)) return Effect.map(socketOf(options.name.value), Option.some)
  return Effect.succeed(Option.none())
}
