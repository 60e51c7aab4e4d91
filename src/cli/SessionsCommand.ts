/**
 * `troupe sessions …` and `troupe agents`: a client of a running daemon
 * (`SessionClient` over its socket, or `HttpSessionClient` over its HTTP
 * listener; see `Connect` for `--name`, `--socket`, `--tcp`, `--url` and
 * `--token`).
 *
 * | command | does |
 * | --- | --- |
 * | `list [--all] [--limit N]` | the newest root sessions, as a table |
 * | `create [--agent NAME] [--title T]` | a new session; prints its id |
 * | `show ID` | the session, its active turn and open callbacks |
 * | `events ID [--after N] [--follow] [--volatile]` | its events, one per line; `--follow` tails live ones |
 * | `send ID TEXT [--steer] [--wait]` | a message; `--wait` shows the turn it starts until it ends |
 * | `interrupt ID [TURN] [--reason R]` | stops exactly that turn (default: the active one) |
 * | `answer ID CALLBACK (--approve \| --approve-session \| --deny \| --output JSON [--error])` | answers a callback |
 * | `rename ID TITLE`, `archive ID [--unarchive]`, `close ID` | controls |
 * | `children ID [--limit N]` | a session's direct children, newest first, archived included |
 * | `tree ID [--all]` | the session and everything below it, indented by depth |
 *
 * Every command takes `--json`: JSON lines on stdout, nothing else there.
 *
 * Each subcommand is a module of `sessions/`; this one assembles them.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as Argv from "./Argv.js"
import * as Help from "./Help.js"
import { answer } from "./sessions/Answer.js"
import { children } from "./sessions/Children.js"
import { archive, close, rename } from "./sessions/Controls.js"
import { create } from "./sessions/Create.js"
import { events } from "./sessions/Events.js"
import { interrupt } from "./sessions/Interrupt.js"
import { list } from "./sessions/List.js"
import { send } from "./sessions/Send.js"
import { show } from "./sessions/Show.js"
import { treeCommand } from "./sessions/Tree.js"

/** The `agents` command: the agents a daemon serves. */
export { agents } from "./sessions/Agents.js"

/** The `sessions` command and its subcommands. */
export const command = Command.make("sessions").pipe(
  Command.withDescription(Help.describe(
  "Work with the sessions of a running daemon.",
  [
    ["troupe sessions list", "what the default daemon holds"],
    ["troupe sessions show --help", "how each subcommand is used"]
  ]
)),
  Command.withSubcommands([list, create, show, events, send, interrupt, answer, rename, archive, close, children, treeCommand])
)

/** A subcommand's name and options, for the check before parsing. */
const entry = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>) =>
  [[...Command.getNames(command)][0]!, Argv.leaf(command)] as const

/** The subcommands of `sessions` as the check before parsing (`Argv`) sees them. */
export const tree: Argv.Tree = Argv.group(Object.fromEntries([
  entry(list), entry(create), entry(show), entry(events), entry(send),
  entry(interrupt), entry(answer), entry(rename), entry(archive), entry(close), entry(children), entry(treeCommand)
]))
