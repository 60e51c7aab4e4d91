/**
 * `troupe serve`: the daemon's command line. Its options (`ServeOptions`) are
 * parsed here; the daemon itself (`Daemon.serve`) is loaded only when the
 * command runs, so the client commands start without the runtime, the store
 * drivers and the exporters.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Help from "./Help.js"
import * as ServeOptions from "./ServeOptions.js"

/** Parses a duration: `10s`, `500ms`, `2m`, or a number of seconds (`ServeOptions.parseDuration`). */
export const parseDuration = ServeOptions.parseDuration

/** The `serve` command. */
export const command = Command.make("serve", ServeOptions.options, (o) =>
  Effect.flatMap(Effect.promise(() => import("./Daemon.js")), (Daemon) => Daemon.serve(o))).pipe(
  Command.withDescription(Help.describe(
    "Run the troupe daemon: sessions over a unix socket (default: the daemon named \"default\"), TCP or stdio.",
    [
      ["troupe serve", "the default daemon, on its socket under $TROUPE_HOME, sessions in $TROUPE_HOME/troupe.db"],
      ["troupe serve --agents agents.json --tcp 127.0.0.1:7000 --tokens tokens.json", "your agents, also over TCP, for the clients the tokens file names"],
      ["troupe serve --store postgres:postgres://db/troupe --grace 30s", "sessions in PostgreSQL; on SIGTERM, turns get 30 s to finish"]
    ]
  ))
)
