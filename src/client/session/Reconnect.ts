/**
 * How a client made by `connect` opens its connections: each one dialled
 * and authenticated in a scope of its own, and replaced after a drop,
 * retrying as `reconnectSchedule` says.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Envelope from "../../protocol/Envelope.js"
import * as Handshake from "../../protocol/Handshake.js"
import type * as Messages from "../../protocol/Messages.js"
import * as AgentClient from "../AgentClient.js"
import type { SessionClient } from "./Api.js"
import { build, make } from "./Client.js"
import type { SessionClientError } from "./Errors.js"
import { fixedSource, type Link } from "./Link.js"

/** How a client made by `connect` replaces a connection that dropped. */
export interface ReconnectOptions {
  /** Connection attempts per drop before giving up (default 10). */
  readonly attempts?: number | undefined
  /** The delay before the second attempt; it doubles with each further one (default 100 ms). */
  readonly initialDelay?: Duration.DurationInput | undefined
  /** The longest delay between two attempts (default 5 s). */
  readonly maxDelay?: Duration.DurationInput | undefined
}

/** The defaults of `ReconnectOptions`. */
export const reconnectDefaults = {
  attempts: 10,
  initialDelay: Duration.millis(100),
  maxDelay: Duration.seconds(5)
} as const

/** Connection settings, plus the token to authenticate with (none: the listener must be trusted-local). */
export interface ConnectOptions extends AgentClient.ConnectOptions {
  readonly token?: string | undefined
  /** Sent with `auth.hello`: a name for this client. */
  readonly client?: string | undefined
  /** Asks the daemon to keep the product events this connection causes out of analytics. */
  readonly excludeFromAnalytics?: boolean | undefined
  /**
   * Whether this client's own telemetry is on (default: `telemetryEnabled`, from the
   * environment). When it is off and `excludeFromAnalytics` is not given, the client
   * asks to be excluded (see `connect`).
   */
  readonly telemetryEnabled?: boolean | undefined
  /** How to reconnect after the connection drops (`false`: never; the default: `reconnectDefaults`). */
  readonly reconnect?: ReconnectOptions | false | undefined
}

/**
 * `TROUPE_TELEMETRY_ENABLED` (default `true`), the same variable the runtime's
 * `Telemetry.enabled` reads, read here so that the client needs nothing of
 * the runtime: a client that finds it false asks to be excluded from analytics.
 */
export const telemetryEnabled: Config.Config<boolean> = Config.boolean("TROUPE_TELEMETRY_ENABLED").pipe(
  Config.withDefault(true)
)

/**
 * The delays between connection attempts: exponential from `initialDelay`,
 * capped at `maxDelay`, jittered (so clients of a restarted daemon do not
 * come back in step), for at most `attempts` attempts in all.
 */
export const reconnectSchedule = (options: ReconnectOptions = {}): Schedule.Schedule<unknown> =>
  Schedule.exponential(options.initialDelay ?? reconnectDefaults.initialDelay, 2).pipe(
    Schedule.union(Schedule.spaced(options.maxDelay ?? reconnectDefaults.maxDelay)),
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(Math.max(0, (options.attempts ?? reconnectDefaults.attempts) - 1)))
  )

/** Failures worth another attempt: the daemon is away, restarting, or at its connection limit. */
const transient = (error: AgentClient.ConnectFailure | SessionClientError): boolean => {
  switch (error._tag) {
    case "ConnectError":
    case "HandshakeError":
    case "Closed":
      return true
    case "Refused":
      return error.kind === "busy"
    case "ServerError":
      return error.retryable === true
    default:
      return false
  }
}

/** Opens connections with `open` (and says hello on each when `options` ask for it), reconnecting as `options` say. */
export const connectWith = (
  open: Effect.Effect<AgentClient.Connection, AgentClient.ConnectFailure, Scope.Scope>,
  options: ConnectOptions
): Effect.Effect<SessionClient, AgentClient.ConnectFailure | SessionClientError, Scope.Scope> =>
  Effect.gen(function*() {
    const hello: typeof Messages.AuthHello.Type | undefined =
      options.token !== undefined || options.excludeFromAnalytics !== undefined || options.client !== undefined
        ? {
          ...(options.token === undefined ? {} : { token: options.token }),
          ...(options.client === undefined ? {} : { client: options.client }),
          ...(options.excludeFromAnalytics === undefined ? {} : { excludeFromAnalytics: options.excludeFromAnalytics })
        }
        : undefined

    // A client whose own telemetry is off says so (PROTOCOL.md `auth.hello`), so the daemon keeps
    // the events it causes out of analytics. Without a token it can only say hello to a listener
    // that trusts it (its `core.ready` lists no auth): elsewhere the hello would be refused.
    const telemetryOff = options.excludeFromAnalytics === undefined &&
      !(options.telemetryEnabled ?? (yield* Effect.orElseSucceed(telemetryEnabled, () => true)))
    const trusts = (connection: AgentClient.Connection) =>
      Either.match(Envelope.decodeBody(connection.readyBytes()), {
        onLeft: () => false,
        onRight: (body) =>
          Either.match(Handshake.decodeReadyPayload(body.payload), {
            onLeft: () => false,
            onRight: (ready) => ready.auth.length === 0
          })
      })

    // One connection in a scope of its own, authenticated; a failure closes what was opened.
    const dial: Effect.Effect<Link, AgentClient.ConnectFailure | SessionClientError> = Effect.uninterruptibleMask(
      (restore) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          return yield* restore(Effect.gen(function*() {
            const connection = yield* Scope.extend(open, scope)
            if (hello !== undefined) {
              yield* make(connection).hello(telemetryOff ? { ...hello, excludeFromAnalytics: true } : hello)
            } else if (telemetryOff && trusts(connection)) {
              yield* make(connection).hello({ excludeFromAnalytics: true })
            }
            const link: Link = { connection, dead: false, release: Scope.close(scope, Exit.void) }
            yield* Effect.forkIn(
              Effect.andThen(connection.closed, Effect.sync(() => {
                link.dead = true
              })),
              scope
            )
            return link
          })).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
        })
    )

    let current = yield* dial
    let shuttingDown = false
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        shuttingDown = true
        return current.release
      })
    )
    if (options.reconnect === false) return build(fixedSource(current))

    const schedule = reconnectSchedule(options.reconnect)
    const lock = yield* Effect.makeSemaphore(1)
    const renew = (dropped: Link, error: AgentClient.Closed): Effect.Effect<Link, SessionClientError> =>
      lock.withPermits(1)(Effect.suspend(() => {
        // Another caller saw the same drop and has already reconnected.
        if (current !== dropped) return Effect.succeed(current)
        if (shuttingDown) return Effect.fail(error)
        return Effect.gen(function*() {
          yield* dropped.release
          const link = yield* dial.pipe(
            Effect.retry({ schedule, while: (failure) => !shuttingDown && transient(failure) }),
            Effect.catchAll((failure): Effect.Effect<never, SessionClientError> =>
              failure._tag === "ConnectError" || failure._tag === "HandshakeError" || failure._tag === "Refused"
                ? Effect.fail(new AgentClient.Closed({ reason: `${error.reason}; reconnecting failed: ${failure.message}` }))
                : Effect.fail(failure)
            )
          )
          if (shuttingDown) {
            yield* link.release
            return yield* Effect.fail(error)
          }
          current = link
          return link
        })
      }))
    return build({
      current: () => current,
      live: Effect.suspend(() =>
        current.dead ? renew(current, new AgentClient.Closed({ reason: "the connection dropped" })) : Effect.succeed(current)
      ),
      renew
    })
  })
