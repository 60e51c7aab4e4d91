/**
 * The options of `troupe serve`, apart from the command: `Serve` parses them,
 * and `Daemon` (loaded only when the command runs) takes what they parse to,
 * so `Daemon` needs nothing of `Serve`: no import circle.
 *
 * @since 0.1.0
 */
import { type Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Address from "./Address.js"
import * as ModelOption from "./ModelOption.js"
import * as StoreOption from "./StoreOption.js"
import * as WorkspaceOption from "./WorkspaceOption.js"

/** Parses a duration: `10s`, `500ms`, `2m`, or a number of seconds. */
export const parseDuration = (text: string): Either.Either<Duration.Duration, string> => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$/.exec(text)
  if (match === null) return Either.left(`${JSON.stringify(text)}: expected a duration such as 10s, 500ms or 2m`)
  const value = Number(match[1])
  switch (match[2]) {
    case "ms":
      return Either.right(Duration.millis(value))
    case "m":
      return Either.right(Duration.minutes(value))
    default:
      return Either.right(Duration.seconds(value))
  }
}

const durationOption = (name: string, description: string, fallback: string, off = false) =>
  Options.text(name).pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(description),
    Options.withDefault(fallback),
    Options.mapEffect((text) =>
      off && text.trim() === "off"
        ? Effect.succeed(Duration.infinity)
        : Either.match(parseDuration(text), {
          onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: ${reason}`))),
          onRight: (duration) =>
            Duration.greaterThan(duration, Duration.zero)
              ? Effect.succeed(duration)
              : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: must be more than 0`)))
        })
    )
  )

const limitOption = (name: string, description: string, fallback: number) =>
  Options.integer(name).pipe(
    Options.withPseudoName("N"),
    Options.withDescription(description),
    Options.withDefault(fallback),
    Options.mapEffect((n) =>
      n >= 1 ? Effect.succeed(n) : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: must be at least 1`)))
    )
  )

/** The options of `troupe serve`. */
export const options = {
  store: StoreOption.option,
  sqliteSync: StoreOption.sqliteSync,
  workspace: WorkspaceOption.option,
  workspacePerSession: WorkspaceOption.perSession,
  env: WorkspaceOption.env,
  name: Address.name,
  socket: Address.socket,
  tcp: Address.tcp,
  stdio: Options.boolean("stdio").pipe(
    Options.withDescription("Serve one client over stdin/stdout (the process that started the daemon); exits when it leaves.")
  ),
  agents: Options.file("agents", { exists: "yes" }).pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription("Agent definitions (JSON, see docs/configuration.md); default: the built-in agent."),
    Options.optional
  ),
  tokens: Options.file("tokens", { exists: "yes" }).pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription("Tokens and the principals they stand for (JSON, see docs/configuration.md)."),
    Options.optional
  ),
  model: ModelOption.option,
  grace: Options.text("grace").pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription("How long running turns may take to finish or park when stopping (default 10s)."),
    Options.withDefault("10s"),
    Options.mapEffect((text) =>
      Either.match(parseDuration(text), {
        onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--grace: ${reason}`))),
        onRight: Effect.succeed
      })
    )
  ),
  leaseTtl: durationOption(
    "lease-ttl",
    "How long a session's lease outlives a worker that stopped renewing it (killed, paused): another worker sharing the store takes the session over after it (default 15s).",
    "15s"
  ),
  maxBusy: limitOption(
    "max-busy",
    "Sessions this daemon drives at once; a worker of a pool that is full claims no more (default 64).",
    64
  ),
  authTimeout: durationOption(
    "auth-timeout",
    "How long a client that must authenticate (TCP) has to send a valid token before it is closed (default 10s).",
    "10s"
  ),
  idleTimeout: durationOption(
    "idle-timeout",
    "Close a connection with no request, event stream or callback provider open for this long (default 15m; `off`).",
    "15m",
    true
  ),
  maxConnections: limitOption(
    "max-connections",
    "Connections per listener; one more is refused `busy` (default 1024). Each listener counts its own.",
    1024
  ),
  http: Options.text("http").pipe(
    Options.withPseudoName("HOST:PORT"),
    Options.withDescription("Also serve the HTTP API (docs/http.md) on this address; repeatable. Clients need a token unless --http-trust-local."),
    Options.repeated,
    Options.mapEffect((texts) =>
      Effect.forEach(texts, (text) =>
        Either.match(Address.parseHostPort(text), {
          onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--http: ${reason}`))),
          onRight: Effect.succeed
        }))
    )
  ),
  httpTrustLocal: Options.boolean("http-trust-local").pipe(
    Options.withDescription("HTTP requests without a token act as the local user (loopback --http addresses only).")
  ),
  httpCors: Options.text("http-cors").pipe(
    Options.withPseudoName("ORIGIN"),
    Options.withDescription("A browser origin allowed to call the HTTP API cross-site (e.g. https://app.example); repeatable."),
    Options.repeated
  ),
  maxUnauthenticated: limitOption(
    "max-unauthenticated",
    "Connections per listener still to authenticate; one more closes the one waiting longest (default 64).",
    64
  )
}

/** What `troupe serve` was given. */
export type ServeOptions = Command.Command.ParseConfig<typeof options>
