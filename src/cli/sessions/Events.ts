/**
 * `troupe sessions events`: a session's events, one per line; `--follow` tails live ones.
 *
 * @since 0.1.0
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Connect from "../Connect.js"
import * as Help from "../Help.js"
import * as Output from "../Output.js"
import * as Signals from "../Signals.js"
import { json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"

/** `sessions events`: a session's events; `--follow` tails live ones until Ctrl-C. */
export const events = Command.make(
  "events",
  {
    ...Connect.options,
    json,
    session: sessionId,
    after: Options.integer("after").pipe(
      Options.withPseudoName("CURSOR"),
      Options.withDescription("Start after this cursor, 0 or more (default 0: from the beginning)."),
      Options.withDefault(0),
      Options.mapEffect((n) =>
        n >= 0 ? Effect.succeed(n) : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--after: ${n} is not a cursor (0 or more)`)))
      )
    ),
    follow: Options.boolean("follow").pipe(
      Options.withAlias("f"),
      Options.withDescription("Keep following live events (until Ctrl-C or the session closes).")
    ),
    volatile: Options.boolean("volatile").pipe(Options.withDescription("Include assistant deltas (with --follow)."))
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        // Loaded here: --help does not need the event formats.
        const EventFormat = yield* Effect.promise(() => import("../EventFormat.js"))
        const stream = client.events(o.session, { after: o.after, follow: o.follow, volatile: o.volatile }).pipe(
          Stream.runForEach((frame) => (o.json ? out.jsonLine(EventFormat.toJson(frame.event)) : out.line(EventFormat.line(frame.event))))
        )
        if (!o.follow) return yield* stream
        // Following ends with Ctrl-C: that is how it is meant to stop, so it exits 0.
        const signal = yield* Signals.listen
        yield* Effect.raceFirst(stream, Effect.asVoid(signal))
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Print a session's events; --follow tails live ones.",
  [
    ["troupe sessions events ses_01J\u2026", "every event so far, one per line"],
    ["troupe sessions events ses_01J\u2026 --after 12 --follow --volatile", "from cursor 12 on, live, with the answer as it streams"]
  ]
)))
