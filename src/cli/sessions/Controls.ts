/**
 * `troupe sessions rename`, `archive` and `close`: the controls, each printing the session after.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Connect from "../Connect.js"
import * as Help from "../Help.js"
import * as Words from "../Words.js"
import { json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"
import { printSession } from "./Table.js"

/** `sessions rename`: a new title. */
export const rename = Command.make(
  "rename",
  { ...Connect.options, json, session: sessionId, title: Words.args("TITLE", "The new title: one quoted argument, or several words.") },
  (o) => withClient(o, ({ client }) => Effect.flatMap(client.rename(o.session, o.title), (session) => printSession(o, session)))
).pipe(Command.withDescription(Help.describe(
  "Rename a session.",
  [
    ["troupe sessions rename ses_01J\u2026 Release notes, draft 2", "the new title (several words are joined)"]
  ]
)))

/** `sessions archive`: hides a session from `list` (or shows it again with `--unarchive`). */
export const archive = Command.make(
  "archive",
  {
    ...Connect.options,
    json,
    session: sessionId,
    unarchive: Options.boolean("unarchive").pipe(Options.withDescription("Unarchive instead."))
  },
  (o) =>
    withClient(o, ({ client }) => Effect.flatMap(client.archive(o.session, !o.unarchive), (session) => printSession(o, session)))
).pipe(Command.withDescription(Help.describe(
  "Archive a session (hidden from `list` without --all), or unarchive it.",
  [
    ["troupe sessions archive ses_01J\u2026", "hide it from `troupe sessions list`"],
    ["troupe sessions archive ses_01J\u2026 --unarchive", "show it again"]
  ]
)))

/** `sessions close`: closes a session for good. */
export const close = Command.make(
  "close",
  { ...Connect.options, json, session: sessionId },
  (o) => withClient(o, ({ client }) => Effect.flatMap(client.close(o.session), (session) => printSession(o, session)))
).pipe(Command.withDescription(Help.describe(
  "Close a session (its running turn is interrupted; it accepts nothing more).",
  [
    ["troupe sessions close ses_01J\u2026", "close it for good"]
  ]
)))
