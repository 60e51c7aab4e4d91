/**
 * What a connection is served with: its limits and settings (`Options`,
 * with `defaults`), what the listener knows of the peer (`Accepted`), and
 * the rate limit on warnings about bad input (`PeerWarnings`).
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Frame from "../../protocol/Frame.js"
import * as Handshake from "../../protocol/Handshake.js"
import type { AuthPeer } from "../Authenticator.js"

/** The `agent_version` a daemon announces in `core.ready`. */
export const AGENT_VERSION = "troupe 0.1.0"

/** Limits and settings of a connection; every field has a default. */
export interface Options {
  /** The correlation ids the client may use (default: all of `[1, 2^32-1)`). */
  readonly idRange?: Handshake.IdRange | undefined
  /** The largest `len` accepted (default and maximum 4 MiB); a larger frame is `FrameTooLarge` and closes the connection. */
  readonly maxFrameSize?: number | undefined
  /** Open streams per connection (default 64); one more is answered with `busy`. */
  readonly maxStreams?: number | undefined
  /** Requests in flight per connection (default 256); one more is answered with `busy`. */
  readonly maxInFlight?: number | undefined
  /** Follow-up frames buffered per stream before its handler takes them (default 64); one more ends the stream with `busy`. */
  readonly maxFollowUps?: number | undefined
  /** How long closing waits for the peer to read our last frames and hang up (default 2 s). */
  readonly closeTimeout?: Duration.DurationInput | undefined
  /** The `agent_version` announced in `core.ready`. */
  readonly agentVersion?: string | undefined
  /**
   * How long a peer that must authenticate has for `auth.hello` to succeed
   * (default 10 s); then it gets `core.error { kind: "unauthenticated" }` on
   * id 0 and is closed. `Duration.infinity` never closes it.
   */
  readonly authTimeout?: Duration.DurationInput | undefined
  /**
   * How long a connection may stay without an exchange before it is closed
   * with `core.shutdown` on id 0 (default: never). An open stream (an event
   * subscription, a callback provider) or a request in flight is an exchange,
   * so such a connection is never idle.
   */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * Frames a peer that must authenticate may send before an `auth.hello`
   * succeeds (default 32); one more gets `core.error unauthenticated` on id 0
   * and the connection is closed. Bounds what a peer without a token can make
   * the daemon do (and how many tokens it can try) per connection.
   */
  readonly maxUnauthenticatedFrames?: number | undefined
  /** Where warnings about a peer's bad input go, rate-limited (default: one limiter per connection). */
  readonly warnings?: PeerWarnings | undefined
}

/**
 * A rate limit on the warning lines bad peer input causes: at most one per
 * `interval`, telling how many were held back since the last. Shared by the
 * connections of a server, so a flood of bad frames costs one line a second.
 */
export class PeerWarnings {
  private next = 0
  private held = 0
  constructor(private readonly intervalMillis: number = 1000) {}

  /** The line to log for `what` now, or undefined while the limit holds it back. */
  admit(nowMillis: number, what: string): string | undefined {
    if (nowMillis < this.next) {
      this.held++
      return undefined
    }
    this.next = nowMillis + this.intervalMillis
    const held = this.held
    this.held = 0
    return held === 0 ? what : `${what} (and ${held} more since the last warning)`
  }
}

/** The defaults of `Options`. */
export const defaults = {
  idRange: Handshake.IdRange.whole,
  maxFrameSize: Frame.MAX_FRAME_LEN,
  maxStreams: 64,
  maxInFlight: 256,
  maxFollowUps: 64,
  closeTimeout: Duration.seconds(2),
  agentVersion: AGENT_VERSION,
  authTimeout: Duration.seconds(10),
  maxUnauthenticatedFrames: 32
} as const

/** Clock readings announced in `core.ready`, as nanoseconds since the Unix epoch. */
export interface ReadyTimes {
  /** When the daemon process started. */
  readonly bootTimeNs: bigint
  /** When the server began to set up. */
  readonly initTimeNs: bigint
  /** When the listener that accepted the connection was bound. */
  readonly readyTimeNs: bigint
}

/**
 * A listener's hold on a connection that has not authenticated yet: the
 * connection reports when it has, and gives way (`core.error busy` on id 0,
 * then close) when the listener needs its place for a newer one.
 */
export interface Admission {
  /** Called once the peer is authenticated: it no longer counts as unauthenticated. */
  readonly authenticated: () => void
  /** Completes when the listener wants this unauthenticated connection gone. */
  readonly evicted: Effect.Effect<void>
}

/** What the listener knows about an accepted connection. */
export interface Accepted extends AuthPeer {
  /** Readings for `core.ready`; the connection's accept time for all three when absent. */
  readonly times?: ReadyTimes | undefined
  /** The listener's limit on unauthenticated connections, if it has one. */
  readonly admission?: Admission | undefined
}


/** `Options` with every default filled in. */
export interface Resolved {
  readonly idRange: Handshake.IdRange
  readonly maxFrameSize: number
  readonly maxStreams: number
  readonly maxInFlight: number
  readonly maxFollowUps: number
  readonly closeTimeout: Duration.DurationInput
  readonly agentVersion: string
  readonly authTimeout: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly maxUnauthenticatedFrames: number
  readonly warnings: PeerWarnings | undefined
}

/** `options` with the defaults filled in. */
export const resolve = (options: Options = {}): Resolved => ({
  idRange: options.idRange ?? defaults.idRange,
  maxFrameSize: Math.min(options.maxFrameSize ?? defaults.maxFrameSize, Frame.MAX_FRAME_LEN),
  maxStreams: options.maxStreams ?? defaults.maxStreams,
  maxInFlight: options.maxInFlight ?? defaults.maxInFlight,
  maxFollowUps: options.maxFollowUps ?? defaults.maxFollowUps,
  closeTimeout: options.closeTimeout ?? defaults.closeTimeout,
  agentVersion: options.agentVersion ?? defaults.agentVersion,
  authTimeout: Duration.decode(options.authTimeout ?? defaults.authTimeout),
  idleTimeout: options.idleTimeout === undefined ? Duration.infinity : Duration.decode(options.idleTimeout),
  maxUnauthenticatedFrames: options.maxUnauthenticatedFrames ?? defaults.maxUnauthenticatedFrames,
  warnings: options.warnings
})
