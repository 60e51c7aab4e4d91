/**
 * Where a client's calls go: the connection in use (`Link`) and how a
 * dropped one is replaced (`Source`); a client made by `make` has a fixed
 * source that never reconnects.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as AgentClient from "../AgentClient.js"
import type { SessionClientError } from "./Errors.js"

/**
 * One connection of a client: calls go to `connection` until it drops. `dead`
 * is set once the connection has closed, whoever closed it.
 */
export interface Link {
  readonly connection: AgentClient.Connection
  dead: boolean
  /** Closes the connection and everything opened for it. */
  readonly release: Effect.Effect<void>
}

/** Where a client's calls go, and how it replaces a connection that dropped. */
export interface Source {
  /** The connection calls use now; `connection` of the client. */
  readonly current: () => Link
  /** The current link, or a new one when it is dead and the client can reconnect. */
  readonly live: Effect.Effect<Link, SessionClientError>
  /**
   * Called after `dropped` failed a call with `error`: a new link (the one
   * another caller already made, or a fresh one), or `error` itself when the
   * client cannot reconnect.
   */
  readonly renew: (dropped: Link, error: AgentClient.Closed) => Effect.Effect<Link, SessionClientError>
}

/** A link over a connection someone else owns. */
export const fixedLink = (connection: AgentClient.Connection): Link => ({ connection, dead: false, release: Effect.void })

/** A source that never reconnects. */
export const fixedSource = (link: Link): Source => ({
  current: () => link,
  live: Effect.succeed(link),
  renew: (_, error) => Effect.fail(error)
})

/** The connection underneath dropped (`AgentClient.Closed`). */
export const isClosed = (error: unknown): error is AgentClient.Closed => error instanceof AgentClient.Closed
