/**
 * `troupe sessions …` and `troupe agents`: a client of a running daemon
 * (`SessionClient` over its socket; see `Connect` for `--name`, `--socket`,
 * `--tcp` and `--token`).
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
 * @since 0.1.0
 */
import { Args, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Deferred, Effect, Either, Fiber, Option, Schema, Stream } from "effect"
import type * as SessionClient from "../client/SessionClient.js"
import * as Messages from "../protocol/Messages.js"
import { Snapshot } from "../schema/Event.js"
import { CallbackId, SessionId, TurnId } from "../schema/Ids.js"
import type { CallbackOpened } from "../schema/Record.js"
import { Session } from "../schema/Session.js"
import * as Argv from "./Argv.js"
import * as Connect from "./Connect.js"
import * as EventFormat from "./EventFormat.js"
import * as ExitCode from "./ExitCode.js"
import * as Help from "./Help.js"
import * as Output from "./Output.js"
import * as Signals from "./Signals.js"
import * as TurnView from "./TurnView.js"
import * as Words from "./Words.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON lines on stdout."))

/** An id argument checked against its schema: a malformed id is a usage error, not a trip to the daemon. */
const idArg = <A>(name: string, schema: Schema.Schema<A, string>, description: string) => {
  const decode = Schema.decodeUnknownEither(schema)
  return Args.text({ name }).pipe(
    Args.withDescription(description),
    Args.mapEffect((text) =>
      Either.match(decode(text), {
        onLeft: () => Effect.fail(HelpDoc.p(`${name}: ${JSON.stringify(text.slice(0, 40))} is not a valid id`)),
        onRight: Effect.succeed
      })
    )
  )
}

const sessionId = idArg("SESSION", SessionId, "The session's id (ses_…).")

const encodeSession = Schema.encodeSync(Session)
const encodeSnapshot = Schema.encodeSync(Snapshot)

/** Runs a client command: connect, act, map errors to exits. */
const withClient = <A>(
  o: Connect.ConnectOptions,
  body: (connected: Connect.Connected) => Effect.Effect<A, SessionClient.SessionClientError | ExitCode.CliFailure>
): Effect.Effect<A, ExitCode.CliFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const connected = yield* Connect.connect(o)
    return yield* body(connected).pipe(
      Effect.mapError((error) => (error._tag === "CliFailure" ? error : connected.fail(error)))
    )
  }))

const date = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace("T", " ")

/** Columns padded to their widest cell; the last column is not padded. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> => {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? []
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join("  ").trimEnd())
}

/** A session's one-line summary values. */
const summaryRow = (session: Session): ReadonlyArray<string> => [
  session.id,
  session.status + (session.archived ? " (archived)" : ""),
  date(session.updatedAt),
  session.agent.name,
  session.title ?? ""
]

/** Up to `limit` items of a paged listing, `pageMax` at most a page, following `nextCursor`. */
const collect = <A, E>(
  limit: number,
  pageMax: number,
  page: (size: number, cursor: string | undefined) => Effect.Effect<{ readonly items: ReadonlyArray<A>; readonly nextCursor?: string | undefined }, E>
) =>
  Effect.gen(function*() {
    const items: Array<A> = []
    let cursor: string | undefined
    while (items.length < limit) {
      const next = yield* page(Math.max(1, Math.min(pageMax, limit - items.length)), cursor)
      items.push(...next.items)
      cursor = next.nextCursor
      if (cursor === undefined || next.items.length === 0) break
    }
    return items
  })

// ---------------------------------------------------------------------------

const list = Command.make(
  "list",
  {
    ...Connect.options,
    json,
    all: Options.boolean("all").pipe(Options.withDescription("Include archived sessions.")),
    limit: Options.integer("limit").pipe(
      Options.withPseudoName("N"),
      Options.withDescription("At most this many sessions, from 1 to 1000 (default 50)."),
      Options.withDefault(50),
      Options.mapEffect((n) =>
        n >= 1 && n <= 1000 ? Effect.succeed(n) : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--limit: ${n} is not from 1 to 1000`)))
      )
    )
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const sessions = yield* collect(o.limit, 500, (limit, cursor) =>
          client.list({ scope: "roots", includeArchived: o.all, limit, ...(cursor === undefined ? {} : { cursor }) }))
        if (o.json) {
          for (const session of sessions) yield* out.jsonLine(encodeSession(session))
          return
        }
        if (sessions.length === 0) return yield* out.note("no sessions")
        for (const row of table([["ID", "STATUS", "UPDATED", "AGENT", "TITLE"], ...sessions.map(summaryRow)])) {
          yield* out.line(row)
        }
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "List the newest root sessions.",
  [
    ["troupe sessions list", "the 50 newest sessions of the default daemon"],
    ["troupe sessions list --all --limit 5 --json", "the 5 newest, archived ones too, as JSON lines"]
  ]
)))

const create = Command.make(
  "create",
  {
    ...Connect.options,
    json,
    agent: Options.text("agent").pipe(
      Options.withPseudoName("NAME"),
      Options.withDescription("One of the daemon's agents (`troupe agents`; default: its first)."),
      Options.optional
    ),
    title: Options.text("title").pipe(Options.withPseudoName("TEXT"), Options.withDescription("The session's title (default: none)."), Options.optional)
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const agent = Option.isSome(o.agent)
          ? o.agent.value
          : yield* Effect.flatMap(client.agents, (agents) =>
            agents.length === 0
              ? Effect.fail(ExitCode.refused("the daemon serves no agents"))
              : Effect.succeed(agents[0]!.name))
        const session = yield* client.create({ agent, ...(Option.isSome(o.title) ? { title: o.title.value } : {}) })
        if (o.json) return yield* out.jsonLine(encodeSession(session))
        yield* out.line(session.id)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Create a session of one of the daemon's agents and print its id.",
  [
    ["troupe sessions create --agent helper --title \"Release notes\"", "a session of the agent helper; prints ses_\u2026"],
    ["troupe sessions create --tcp 127.0.0.1:7000 --token \"$TOKEN\"", "on a daemon over TCP, with its first agent"]
  ]
)))

/** The callbacks still open in a session's log (replayed: the wire has no list of them). */
const openCallbacks = (client: SessionClient.SessionClient, id: SessionId) =>
  client.events(id, { follow: false }).pipe(
    Stream.runFold(new Map<string, CallbackOpened>(), (open, frame) => {
      const event = frame.event
      if (event._tag !== "durable") return open
      if (event.record._tag === "callback_opened") open.set(event.record.callbackId, event.record)
      if (event.record._tag === "callback_resolved") open.delete(event.record.callbackId)
      return open
    }),
    Effect.map((open) => [...open.values()])
  )

const callbackLine = (sessionId: SessionId, callback: CallbackOpened, flags: string) => {
  const request = callback.request as { readonly toolName?: unknown; readonly arguments?: unknown }
  const call = typeof request.toolName === "string"
    ? EventFormat.toolCall(request.toolName, typeof request.arguments === "string" ? request.arguments : "")
    : EventFormat.clip(JSON.stringify(request), 100)
  const how = callback.kind === "approval" ? "--approve | --approve-session | --deny" : "--output JSON [--error]"
  return `${callback.callbackId}  ${callback.kind}  ${call}\n    answer: troupe sessions answer ${flags === "" ? "" : `${flags} `}${sessionId} ${callback.callbackId} ${how}`
}

const show = Command.make(
  "show",
  { ...Connect.options, json, session: sessionId },
  (o) =>
    withClient(o, ({ client, flags }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const snapshot = yield* client.snapshot(o.session)
        const callbacks = snapshot.openCallbacks > 0 ? yield* openCallbacks(client, o.session) : []
        if (o.json) {
          return yield* out.jsonLine({ ...encodeSnapshot(snapshot), callbacks })
        }
        const s = snapshot.session
        const rows: Array<[string, string]> = [
          ["session", s.id],
          ["title", s.title ?? "(none)"],
          ["agent", `${s.agent.name} (model ${s.agent.model.name})`],
          ["status", s.status + (s.archived ? ", archived" : "")],
          ["turn", s.activeTurnId ?? "(none active)"],
          ["events", `${snapshot.cursor} (the last cursor)`],
          ["inbox", `${snapshot.pendingInputs} pending`],
          ["callbacks", `${snapshot.openCallbacks} open`],
          ["created", date(s.createdAt)],
          ["updated", date(s.updatedAt)]
        ]
        if (s.parentId !== null) rows.splice(1, 0, ["parent", s.parentId])
        for (const row of table(rows)) yield* out.line(row)
        for (const callback of callbacks) yield* out.line(`  ${callbackLine(s.id, callback, flags)}`)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Show a session: status, active turn, cursor, pending inputs and open callbacks.",
  [
    ["troupe sessions show ses_01J\u2026", "the session, and how to answer each open callback"],
    ["troupe sessions show ses_01J\u2026 --json", "the same as one JSON line"]
  ]
)))

const events = Command.make(
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

const send = Command.make(
  "send",
  {
    ...Connect.options,
    json,
    session: sessionId,
    text: Words.args("TEXT", "The message: one quoted argument, or several words joined with spaces."),
    steer: Options.boolean("steer").pipe(Options.withDescription("Steer the running turn instead of queueing a new one.")),
    wait: Options.boolean("wait").pipe(
      Options.withAlias("w"),
      Options.withDescription("Show the turn the message starts (or steers) until it ends or waits for your reply; exit 1 if it fails.")
    )
  },
  (o) =>
    withClient(o, ({ client, flags }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const mode = o.steer ? "steer" as const : "queue" as const
        if (!o.wait) {
          const accepted = yield* client.send(o.session, { text: o.text, mode })
          if (o.json) return yield* out.jsonLine(accepted)
          return yield* out.line(
            `${accepted.disposition ?? "accepted"}${accepted.turnId === undefined ? "" : ` ${accepted.turnId}`}`
          )
        }
        const signal = yield* Signals.listen
        const snapshot = yield* client.snapshot(o.session)
        const inputId = `cli-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`
        const view = TurnView.make(
          out,
          { _tag: "input", inputId, running: o.steer ? snapshot.session.activeTurnId ?? undefined : undefined },
          {
            onCallback: (opened) => Option.some(`? waiting: ${callbackLine(o.session, opened, flags)}`),
            waitsForUser: snapshot.session.agent.noToolPolicy === "wait_user"
          }
        )
        // Subscribed before sending, from the last event on: the first event (that one, replayed)
        // says the subscription is live, and the message's events all come after it.
        const subscribed = yield* Deferred.make<void>()
        const ending = yield* client.events(o.session, { after: Math.max(0, snapshot.cursor - 1), volatile: !o.json }).pipe(
          Stream.tap(() => Deferred.succeed(subscribed, undefined)),
          Stream.filter((frame) => frame.cursor === undefined || frame.cursor > snapshot.cursor),
          Stream.mapEffect((frame) => view.onEvent(frame.event)),
          Stream.filterMap((end) => end),
          Stream.runHead,
          // A stream that fails before its first event must not leave the sender waiting.
          Effect.ensuring(Deferred.succeed(subscribed, undefined)),
          Effect.forkScoped
        )
        yield* Deferred.await(subscribed)
        yield* client.send(o.session, { text: o.text, mode, inputId })
        const ended = Fiber.join(ending)
        const first = yield* Effect.raceFirst(Effect.map(ended, Either.right), Effect.map(signal, Either.left))
        if (Either.isLeft(first)) {
          return yield* Effect.fail(new ExitCode.CliFailure({
            code: ExitCode.ExitCode.Interrupted,
            message: "stopped waiting (the turn goes on; `troupe sessions interrupt` stops it)"
          }))
        }
        if (Option.isNone(first.right)) return yield* Effect.fail(ExitCode.refused("the session closed"))
        const step = first.right.value
        if (step._tag === "WaitingForUser") {
          // The turn is not over: the agent asked for more, and the next message answers it.
          if (!o.json) yield* out.note(`? waiting for your reply: troupe sessions send ${o.session} "…"`)
          return
        }
        if (step.record.outcome !== "completed") return yield* Effect.fail(ExitCode.turnFailed(""))
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Send a message to a session (--wait shows the turn until it ends).",
  [
    ["troupe sessions send ses_01J\u2026 \"What changed?\"", "queue a message; prints how it was accepted"],
    ["troupe sessions send --wait ses_01J\u2026 what changed since yesterday", "send, then show the turn until it ends (exit 1 if it fails)"]
  ]
)))

const interrupt = Command.make(
  "interrupt",
  {
    ...Connect.options,
    json,
    session: sessionId,
    turn: idArg("TURN", TurnId, "The turn to stop (default: the session's active turn).").pipe(Args.optional),
    reason: Options.text("reason").pipe(Options.withPseudoName("TEXT"), Options.withDescription("Why (recorded with the turn)."), Options.optional)
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const turn = Option.isSome(o.turn)
          ? o.turn.value
          : yield* Effect.flatMap(client.get(o.session), (session) =>
            session.activeTurnId === null
              ? Effect.fail(ExitCode.refused(`${o.session} has no active turn`))
              : Effect.succeed(session.activeTurnId))
        const outcome = yield* client.interrupt(o.session, turn, Option.getOrUndefined(o.reason))
        if (o.json) return yield* out.jsonLine(outcome)
        yield* out.line(`${outcome.outcome} ${outcome.turnId ?? turn}`)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Interrupt exactly one turn of a session (default: its active turn).",
  [
    ["troupe sessions interrupt ses_01J\u2026", "stop the active turn"],
    ["troupe sessions interrupt ses_01J\u2026 turn_01J\u2026 --reason \"wrong file\"", "stop exactly that turn, saying why"]
  ]
)))

const answer = Command.make(
  "answer",
  {
    ...Connect.options,
    json,
    session: sessionId,
    callback: idArg("CALLBACK", CallbackId, "The callback's id (cb_…; see `troupe sessions show`)."),
    approve: Options.boolean("approve").pipe(Options.withDescription("Approve this tool call.")),
    approveSession: Options.boolean("approve-session").pipe(
      Options.withDescription("Approve this call and every later call of the same tool in the session.")
    ),
    deny: Options.boolean("deny").pipe(Options.withDescription("Deny this tool call.")),
    reason: Options.text("reason").pipe(Options.withPseudoName("TEXT"), Options.withDescription("Why (shown to the model with a denial)."), Options.optional),
    output: Options.text("output").pipe(
      Options.withPseudoName("JSON"),
      Options.withDescription("A client tool's result: JSON, or plain text (sent as a string)."),
      Options.optional
    ),
    error: Options.boolean("error").pipe(Options.withDescription("With --output: the client tool failed."))
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const chosen = [o.approve, o.approveSession, o.deny, Option.isSome(o.output)].filter(Boolean).length
        if (chosen !== 1) {
          return yield* Effect.fail(ExitCode.usage("give exactly one of --approve, --approve-session, --deny and --output"))
        }
        const reason = Option.isSome(o.reason) ? { reason: o.reason.value } : {}
        const result = Option.isSome(o.output)
          ? { output: parseOutput(o.output.value), ...(o.error ? { isError: true } : {}) }
          : { decision: o.approve ? "approve" : o.approveSession ? "approve_session" : "deny", ...reason }
        yield* client.answerCallback(o.session, { callbackId: o.callback, result })
        const out = yield* Output.make({ json: o.json })
        if (o.json) return yield* out.jsonLine({ accepted: true, callbackId: o.callback })
        yield* out.line(`accepted ${o.callback}`)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "Answer an open callback: an approval, or a client tool's result.",
  [
    ["troupe sessions answer ses_01J\u2026 cb_01J\u2026 --approve", "approve one tool call (the ids are in `troupe sessions show`)"],
    ["troupe sessions answer ses_01J\u2026 cb_01J\u2026 --output '{\"size\": 12}'", "give a client tool's result"]
  ]
)))

/** `--output` text as JSON, or as a string when it is not JSON. */
const parseOutput = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** Prints a session after a control command. */
const printSession = (o: { readonly json: boolean }, session: Session) =>
  Effect.gen(function*() {
    const out = yield* Output.make({ json: o.json })
    if (o.json) return yield* out.jsonLine(encodeSession(session))
    for (const row of table([summaryRow(session)])) yield* out.line(row)
  }).pipe(Effect.scoped)

const rename = Command.make(
  "rename",
  { ...Connect.options, json, session: sessionId, title: Words.args("TITLE", "The new title: one quoted argument, or several words.") },
  (o) => withClient(o, ({ client }) => Effect.flatMap(client.rename(o.session, o.title), (session) => printSession(o, session)))
).pipe(Command.withDescription(Help.describe(
  "Rename a session.",
  [
    ["troupe sessions rename ses_01J\u2026 Release notes, draft 2", "the new title (several words are joined)"]
  ]
)))

const archive = Command.make(
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

const close = Command.make(
  "close",
  { ...Connect.options, json, session: sessionId },
  (o) => withClient(o, ({ client }) => Effect.flatMap(client.close(o.session), (session) => printSession(o, session)))
).pipe(Command.withDescription(Help.describe(
  "Close a session (its running turn is interrupted; it accepts nothing more).",
  [
    ["troupe sessions close ses_01J\u2026", "close it for good"]
  ]
)))

const encodeChild = Schema.encodeSync(Messages.ChildItem)
const encodeNode = Schema.encodeSync(Messages.TreeItem)

const children = Command.make(
  "children",
  {
    ...Connect.options,
    json,
    session: sessionId,
    limit: Options.integer("limit").pipe(
      Options.withDescription("At most this many children (default 50)."),
      Options.withDefault(50)
    )
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const items = yield* collect(o.limit, 500, (limit, cursor) =>
          client.children(o.session, { limit, ...(cursor === undefined ? {} : { cursor }) }))
        if (o.json) {
          for (const item of items) yield* out.jsonLine(encodeChild(item))
          return
        }
        if (items.length === 0) return yield* out.note("no children")
        const rows = items.map((item) => [item.alias ?? "-", ...summaryRow(item.session)])
        for (const row of table([["ALIAS", "ID", "STATUS", "UPDATED", "AGENT", "TITLE"], ...rows])) yield* out.line(row)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription("List a session's direct children, newest first (archived ones included)."))

const treeCommand = Command.make(
  "tree",
  {
    ...Connect.options,
    json,
    session: sessionId,
    all: Options.boolean("all").pipe(Options.withDescription("Include archived sessions."))
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const answer = yield* client.tree(o.session, { includeArchived: o.all })
        const root = answer.root
        if (o.json) {
          yield* out.jsonLine(encodeNode({ session: root, parentId: root.parentId ?? root.id, alias: root.alias, agentPath: root.agentPath }))
          for (const node of answer.nodes) yield* out.jsonLine(encodeNode(node))
          return
        }
        // Nodes come parents first; each is printed under its parent, children oldest first, indented by depth.
        const below = new Map<string, Array<typeof Messages.TreeItem.Type>>()
        for (const node of answer.nodes) {
          const siblings = below.get(node.parentId) ?? []
          siblings.push(node)
          below.set(node.parentId, siblings)
        }
        const rows: Array<ReadonlyArray<string>> = []
        const walk = (session: Session, alias: string | null, depth: number) => {
          const [id, ...rest] = summaryRow(session)
          rows.push([`${"  ".repeat(depth)}${alias ?? "-"}`, id!, ...rest])
          for (const child of below.get(session.id) ?? []) walk(child.session, child.alias, depth + 1)
        }
        walk(root, root.alias, 0)
        for (const row of table([["ALIAS", "ID", "STATUS", "UPDATED", "AGENT", "TITLE"], ...rows])) yield* out.line(row)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription("Show a session and every session below it (archived ones with --all)."))

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

/** The `agents` command: the agents a daemon serves. */
export const agents = Command.make(
  "agents",
  { ...Connect.options, json },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const items = yield* client.agents
        if (o.json) {
          for (const item of items) yield* out.jsonLine(item)
          return
        }
        for (const row of table([["NAME", "DESCRIPTION"], ...items.map((item) => [item.name, item.description])])) {
          yield* out.line(row)
        }
      }).pipe(Effect.scoped))
).pipe(Command.withDescription(Help.describe(
  "List the agents a running daemon serves.",
  [
    ["troupe agents", "the names and descriptions"],
    ["troupe agents --socket /run/troupe.sock --json", "of the daemon on that socket, as JSON lines"]
  ]
)))
