/**
 * `troupe inspect`: the inspector's command line, over the options in
 * `InspectOptions`. The viewer itself (`Inspect.inspect`) is loaded only
 * when the command runs, with the store drivers and the HTTP server.
 *
 * @since 0.3.0
 */
import { Command } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Help from "./Help.js"
import * as InspectOptions from "./InspectOptions.js"

/** The `inspect` command. */
export const command = Command.make("inspect", InspectOptions.options, (o) =>
  Effect.flatMap(Effect.promise(() => import("./Inspect.js")), (Inspect) => Inspect.inspect(o))).pipe(
  Command.withDescription(Help.describe(
    "Serve the web inspector over a store, with no daemon: sessions, trees and turns, live; read-only unless --allow-answers.",
    [
      ["troupe inspect", "the sessions in $TROUPE_HOME/troupe.db, on a free loopback port (printed); open it in a browser"],
      ["troupe inspect --store postgres:postgres://db/troupe --http 127.0.0.1:7070 --allow-answers", "a PostgreSQL store on a fixed port; pending approvals can be answered"],
      ["troupe inspect --http 0.0.0.0:7070 --tokens tokens.json", "off loopback: every request needs a token of the tokens file"]
    ]
  ))
)
