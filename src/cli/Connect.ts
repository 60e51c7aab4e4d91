/**
 * How the client commands (`troupe sessions …`, `troupe agents`) reach a
 * running daemon: `--name NAME` (default `default`), `--socket PATH` or
 * `--tcp HOST:PORT` over the socket protocol, or `--url http://HOST:PORT`
 * over HTTP, with `--token` (or `TROUPE_TOKEN`) when the listener is not
 * trusted-local. This is the one place the transport is chosen: the
 * commands see a `SessionsApi`, which the socket client and the HTTP client
 * both are, failing with the same error kinds. A socket client run with
 * `TROUPE_TELEMETRY_ENABLED=false` asks the daemon to keep the events it
 * causes out of analytics. A dropped connection is opened again (an HTTP
 * event stream is asked for again with `Last-Event-ID`), so `sessions
 * events --follow` survives a daemon restart and resumes after the last
 * event it printed.
 *
 * Failures become exit codes: a daemon that cannot be reached is 3, a
 * request it refuses (`core.error`) is 4.
 *
 * @since 0.1.0
 */
import { Options } from "@effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type * as AgentClient from "../client/AgentClient.js"
import type * as HttpSessionClient from "../client/HttpSessionClient.js"
import type * as SessionClient from "../client/SessionClient.js"
import * as Address from "./Address.js"
import * as ExitCode from "./ExitCode.js"

/** The options every client command takes. */
export const options = {
  name: Address.name,
  socket: Address.socket,
  tcp: Address.tcp,
  url: Address.url,
  token: Options.redacted("token").pipe(
    Options.withPseudoName("TOKEN"),
    Options.withDescription("The token to authenticate with (default: $TROUPE_TOKEN; none is needed on the local socket)."),
    Options.withFallbackConfig(Config.redacted("TROUPE_TOKEN")),
    Options.optional
  )
}

/** What the connection options parse to. */
export interface ConnectOptions {
  readonly name: Option.Option<string>
  readonly socket: Option.Option<string>
  readonly tcp: Option.Option<Address.HostPort>
  readonly url: Option.Option<string>
  readonly token: Option.Option<Redacted.Redacted>
}

/** What a call fails with, over either transport. */
export type CallError = SessionClient.SessionClientError | HttpSessionClient.HttpSessionClientError

/** The sessions API the commands use, whichever transport is under it. */
export type Remote = SessionClient.SessionsApi<CallError>

/** Anything connecting or calling can fail with. */
export type ClientFailure = AgentClient.ConnectFailure | CallError

/** The exit a client error causes, with a one-line message. */
export const failure = (error: ClientFailure, address: string, hasToken = false): ExitCode.CliFailure => {
  switch (error._tag) {
    case "ConnectError":
      return ExitCode.unreachable(
        error.reason === "ENOENT" || error.reason === "ECONNREFUSED"
          ? `no daemon is listening on ${address} (${error.reason}); start one with \`troupe serve${address.startsWith("http") ? " --http HOST:PORT" : ""}\``
          : error.message
      )
    case "HandshakeError":
    case "Refused":
      return ExitCode.unreachable(error.message)
    case "Closed":
      return ExitCode.unreachable(`the daemon at ${address} closed the connection (${error.reason})`)
    case "ServerError":
      return error.kind === "unauthenticated"
        ? new ExitCode.CliFailure({
          code: ExitCode.ExitCode.Refused,
          message: hasToken ? `the daemon at ${address} did not accept the token` : `the daemon at ${address} needs a token`,
          hint: hasToken ? "check --token or TROUPE_TOKEN against the daemon's tokens file" : "pass --token TOKEN or set TROUPE_TOKEN"
        })
        : ExitCode.refused(`${error.kind}: ${error.message}`)
    case "UnexpectedAnswer":
      return new ExitCode.CliFailure({ code: ExitCode.ExitCode.Internal, message: error.message })
    case "InvalidInput":
      return ExitCode.usage(error.message)
    case "IdRangeExhausted":
    case "InvalidFrame":
      return new ExitCode.CliFailure({ code: ExitCode.ExitCode.Internal, message: error.message })
  }
}

/** A connected client, and the address it reached (for messages). */
export interface Connected {
  readonly client: Remote
  readonly address: string
  /** The connection options to repeat in a command this one suggests (`--tcp 127.0.0.1:7000 --token "$TROUPE_TOKEN"`; never the token itself). */
  readonly flags: string
  /** Maps a failure of a call on this client to its exit. */
  readonly fail: (error: CallError) => ExitCode.CliFailure
}

/** The connection options of `o`, as words to repeat in a suggested command (the token stays in its variable). */
export const flagsOf = (o: ConnectOptions): string =>
  [
    ...Option.toArray(Option.map(o.name, (name) => `--name ${name}`)),
    ...Option.toArray(Option.map(o.socket, (path) => `--socket ${path}`)),
    ...Option.toArray(Option.map(o.tcp, ({ host, port }) => `--tcp ${host.includes(":") ? `[${host}]` : host}:${port}`)),
    ...Option.toArray(Option.map(o.url, (url) => `--url ${url}`)),
    ...(Option.isSome(o.token) ? [`--token "$TROUPE_TOKEN"`] : [])
  ].join(" ")

/** Connects (and authenticates when a token is given) for the life of the scope. */
export const connect = (o: ConnectOptions): Effect.Effect<Connected, ExitCode.CliFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const unix = yield* Address.unixPath(o)
    if ([Option.isSome(unix), Option.isSome(o.tcp), Option.isSome(o.url)].filter(Boolean).length > 1) {
      return yield* Effect.fail(ExitCode.usage("give one of --name, --socket, --tcp and --url"))
    }
    const token = Option.map(o.token, Redacted.value)
    const hasToken = Option.isSome(token)
    if (Option.isSome(o.url)) {
      // HTTP holds no connection: the first call finds out whether the daemon is there.
      const address = o.url.value
      const HttpSessionClient = yield* Effect.promise(() => import("../client/HttpSessionClient.js"))
      const client = yield* HttpSessionClient.make(address, Option.isSome(token) ? { token: token.value } : {})
      return { client, address, flags: flagsOf(o), fail: (error: CallError) => failure(error, address, hasToken) }
    }
    // Loaded when a command connects: `--help` and the embedded commands need neither the client nor the listeners.
    const [Client, Listeners] = yield* Effect.promise(() =>
      Promise.all([import("../client/SessionClient.js"), import("../server/Listener.js")])
    )
    // SessionClient says hello with the token, and tells the daemon when this client's telemetry is
    // off; a dropped connection (a restarted daemon under `events --follow`) is opened again.
    const clientOptions: SessionClient.ConnectOptions = {
      timeout: "5 seconds",
      ...(Option.isSome(token) ? { token: token.value, client: "troupe-cli" } : {})
    }
    let address: string
    let connecting: Effect.Effect<SessionClient.SessionClient, ClientFailure, Scope.Scope>
    if (Option.isSome(o.tcp)) {
      const { host, port } = o.tcp.value
      address = Listeners.formatAddress({ _tag: "Tcp", host, port })
      connecting = Client.connectTcp(host, port, clientOptions)
    } else {
      const path = Option.isSome(unix) ? unix.value : yield* Address.socketOf(Address.DEFAULT_NAME)
      address = Listeners.formatAddress({ _tag: "Unix", path })
      connecting = Client.connect(path, clientOptions)
    }
    const client = yield* connecting.pipe(Effect.mapError((error) => failure(error, address, hasToken)))
    return { client, address, flags: flagsOf(o), fail: (error) => failure(error, address, hasToken) }
  })
