/**
 * The seam between a connection (framing, handshake, ids, limits) and what
 * its messages mean. The connection answers `core.*` and `auth.hello` itself;
 * a `Router` names the handler of every other message type; the
 * connection decodes a frame, checks authentication, and runs the handler in a
 * fiber owned by the connection, answering with the handler's terminal
 * message or with `core.error` when it fails with a `WireError`.
 *
 * Two kinds of exchange (PROTOCOL.md "Exchanges"):
 * - `request`: one frame in (flags 0), one TERMINAL frame out.
 * - `stream`: opened with SESSION_START; the handler `emit`s any number of
 *   frames and its result is the TERMINAL frame. Follow-up frames the client
 *   sends on the same id (e.g. `session.events.cancel`) arrive in `followUps`.
 *   When the connection closes, the handler's fiber is interrupted.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Queue from "effect/Queue"
import type { Principal } from "../schema/Principal.js"
import { ErrorKind } from "../protocol/ProtocolError.js"

/** A failure answered with `core.error`; `message` is safe to show any client. */
export class WireError extends Schema.TaggedError<WireError>()("WireError", {
  kind: ErrorKind,
  message: Schema.String,
  retryable: Schema.optional(Schema.Boolean),
  details: Schema.optional(Schema.Unknown)
}) {}

/** What a connection knows about its peer. */
export interface Peer {
  /** The authenticated principal, once `auth.hello` succeeded (or the listener trusts the peer). */
  readonly principal: Option.Option<Principal>
  /** The client asked that product events it causes be excluded from analytics. */
  readonly excludeFromAnalytics: boolean
  /** Which listener accepted it: `unix`, `tcp` or `stdio`. */
  readonly listener: "unix" | "tcp" | "stdio"
}

/** One outgoing message. */
export interface Outgoing {
  readonly type: string
  readonly payload: unknown
}

/** One exchange, as a handler sees it. */
export interface Exchange {
  readonly id: number
  readonly type: string
  /** The decoded payload (validate it: `WireError` kind `invalid_payload` when it does not fit). */
  readonly payload: unknown
  readonly peer: Peer
  /** Streams only: sends a non-terminal frame on this id; waits while the connection's write buffer is full. */
  readonly emit: (message: Outgoing) => Effect.Effect<void>
  /** Streams only: frames the client sent on this id after opening it. */
  readonly followUps: Queue.Dequeue<Outgoing>
}

/** A message type's handler: the result is the TERMINAL answer. */
export type Handler = (exchange: Exchange) => Effect.Effect<Outgoing, WireError>

/** How a message type is exchanged, and who handles it. Routes are only reached once the peer is authenticated. */
export interface Route {
  readonly kind: "request" | "stream"
  readonly handler: Handler
}

/** The port: routes by message type. */
export class Router extends Context.Tag("troupe/Router")<
  Router,
  {
    readonly route: (type: string) => Route | undefined
  }
>() {}
