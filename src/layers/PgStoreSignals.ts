/**
 * `StoreSignals` for workers sharing one PostgreSQL database. A push to an
 * inbox is signalled by a trigger (migration `6_change_signals`) with
 * `pg_notify` from the committing transaction, so it leaves exactly when the
 * push is visible, whoever pushed. Log appends and volatile deltas are
 * announced by the process that committed them, just after, over its signals
 * connection, and only for sessions another process watches (decision 0053):
 * batched (one NOTIFY in flight; whatever piled up meanwhile goes in the next,
 * each session's highest seq only), so the pool's commits never wait on
 * NOTIFY's database-wide lock, and a process nobody else watches sends none.
 * One dedicated `LISTEN` connection per process, owned by the layer's scope,
 * receives them and reconnects when it is lost (then every watcher is told
 * `Missed` and reads the store again).
 *
 * Who watches what travels on the same channel (`PgWatches` keeps the
 * bookkeeping): a session watched here for the first time is told to the
 * processes known to be present before the watch returns, and a process that
 * hears it announces that session's head at once, so no commit falls between a
 * watcher's read of the store and its first signal. A process's own watches
 * do not make it announce: its host publishes its commits in-process (as on
 * SQLite). A troupe from before decision 0053 never says what it watches:
 * beside this one it follows commits through its backstop reads only.
 *
 * The channel is per schema (`troupe_` and 16 hex digits of the schema name's
 * md5), so stores in different schemas of one database do not hear each other.
 * A payload holds lines: `i <session> <position>` (inbox pushed), `l <session>
 * <seq>` (log appended up to seq), `d <origin> <session> <turn> <json texts>`
 * (volatile deltas, best effort, in chunks under the 8000-byte payload limit;
 * a larger single delta is skipped), `c` (the pool's hint: sessions became
 * claimable; every process hears it, the sender's too; sent on its own and
 * waited for, since the draining process that sends it may exit right after),
 * and the watch lines `h <origin>`, `p <origin>`, `w <origin> <session> [d]`,
 * `u <origin> <session>`, `b <origin>`. A process does not read its own
 * deltas or watch lines back.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import type pg from "pg"
import { AssistantDelta } from "../schema/Event.js"
import { type SessionId, type TurnId, ulid } from "../schema/Ids.js"
import { Signal, StoreSignals, type WatchOptions } from "../services/StoreSignals.js"
import * as PgWatches from "./PgWatches.js"
import * as SignalHub from "./SignalHub.js"

/** How to reach the database (the same URL as the store's). */
export interface Options {
  readonly url: string
  /**
   * How often watches no longer used are withdrawn, and the processes on the
   * database are looked up (default 5 seconds): a session stays told as
   * watched for one to two of these after its last watch ended.
   */
  readonly sweep?: Duration.DurationInput | undefined
}

/** The channel of the connection's schema. */
const channelQuery = `SELECT 'troupe_' || left(md5(current_schema()), 16) AS channel`

const { applicationName } = PgWatches

/** The signals connections on the database. */
const activityQuery =
  `SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '${applicationName} %'`

/** Bytes of a payload, under PostgreSQL's 8000. */
const payloadLimit = 7900

/** Announcements waiting to be sent before new ones are dropped (a dropped one is caught by the backstop). */
const forwardBacklog = 4096

type Outgoing =
  | { readonly _tag: "log"; readonly sessionId: SessionId; readonly seq: number }
  | { readonly _tag: "deltas"; readonly sessionId: SessionId; readonly events: ReadonlyArray<AssistantDelta> }
  | { readonly _tag: "lines"; readonly lines: ReadonlyArray<string>; readonly sent?: Deferred.Deferred<void> | undefined }

/** Parses one line of a payload into the signal it carries, unless it is this process's own deltas or not one of ours. */
const parseLine = (line: string, origin: string): Signal | undefined => {
  const kind = line[0]
  const rest = line.slice(2)
  if (kind === "i" || kind === "l") {
    const space = rest.indexOf(" ")
    if (space < 0) return undefined
    const sessionId = rest.slice(0, space) as SessionId
    return kind === "i" ? Signal.Inbox({ sessionId }) : Signal.Log({ sessionId, seq: Number(rest.slice(space + 1)) })
  }
  if (kind !== "d") return undefined
  const [from, sessionId, turnId] = rest.split(" ", 3) as [string, SessionId, TurnId]
  if (from === origin || turnId === undefined) return undefined
  const json = rest.slice(from.length + sessionId.length + turnId.length + 3)
  try {
    const texts = JSON.parse(json) as ReadonlyArray<string>
    return Signal.Deltas({
      sessionId,
      events: texts.map((text) => new AssistantDelta({ sessionId, turnId, text }, true))
    })
  } catch {
    return undefined
  }
}

/** The signals a payload carries (one per line it understands). */
export const parse = (payload: string, origin: string): ReadonlyArray<Signal> => {
  const signals: Array<Signal> = []
  for (const line of payload.split("\n")) {
    const signal = parseLine(line, origin)
    if (signal !== undefined) signals.push(signal)
  }
  return signals
}

/** Whether a payload carries the pool's hint (a `c` line). */
export const claimable = (payload: string): boolean => payload.split("\n").includes("c")

/** Lines packed into payloads under the limit, in order. */
export const pack = (lines: ReadonlyArray<string>): ReadonlyArray<string> => {
  const payloads: Array<string> = []
  let current = ""
  for (const line of lines) {
    if (current.length > 0 && Buffer.byteLength(current) + 1 + Buffer.byteLength(line) > payloadLimit) {
      payloads.push(current)
      current = ""
    }
    current = current.length === 0 ? line : `${current}\n${line}`
  }
  if (current.length > 0) payloads.push(current)
  return payloads
}

/** The lines that carry `events` (one turn's, in order), each under the limit; a delta too big alone is skipped. */
export const deltaPayloads = (origin: string, sessionId: SessionId, events: ReadonlyArray<AssistantDelta>) => {
  const payloads: Array<string> = []
  let turnId: TurnId | undefined
  let texts: Array<string> = []
  let size = 0
  const flush = () => {
    if (turnId !== undefined && texts.length > 0) payloads.push(`d ${origin} ${sessionId} ${turnId} ${JSON.stringify(texts)}`)
    texts = []
    size = 0
  }
  const head = origin.length + sessionId.length + 40
  for (const event of events) {
    if (event.turnId !== turnId) {
      flush()
      turnId = event.turnId
    }
    const bytes = Buffer.byteLength(JSON.stringify(event.text)) + 1
    if (head + bytes + 2 > payloadLimit) continue
    if (head + size + bytes + 2 > payloadLimit) flush()
    texts.push(event.text)
    size += bytes
  }
  flush()
  return payloads
}

/** The lines of a batch of announcements: watch lines in order, deltas in order, then each session's highest appended seq. */
const linesOf = (origin: string, batch: Iterable<Outgoing>): Array<string> => {
  const heads = new Map<SessionId, number>()
  const deltas = new Map<SessionId, Array<AssistantDelta>>()
  const lines: Array<string> = []
  for (const item of batch) {
    if (item._tag === "lines") lines.push(...item.lines)
    else if (item._tag === "log") heads.set(item.sessionId, Math.max(item.seq, heads.get(item.sessionId) ?? 0))
    else {
      const list = deltas.get(item.sessionId)
      if (list === undefined) deltas.set(item.sessionId, [...item.events])
      else list.push(...item.events)
    }
  }
  for (const [sessionId, events] of deltas) lines.push(...deltaPayloads(origin, sessionId, events))
  for (const [sessionId, seq] of heads) lines.push(`l ${sessionId} ${seq}`)
  return lines
}

/** Builds the signals: the listening connection lives in a fiber of the scope, reconnecting while the scope lasts. */
export const make = (options: Options) =>
  Effect.gen(function*() {
    // Loaded when the signals are built, not when troupe is imported (docs/decisions/0044-drivers-load-when-used.md).
    const { default: Pg }: { readonly default: typeof pg } = yield* Effect.promise(() => import("pg"))
    const origin = yield* ulid
    const hub = SignalHub.make()
    const outbox = yield* Queue.dropping<Outgoing>(forwardBacklog)
    let current: { readonly client: pg.Client; readonly channel: string } | undefined
    const offer = (item: Outgoing) => void Queue.unsafeOffer(outbox, item)
    const watches = PgWatches.make(origin, {
      say: (lines) => offer({ _tag: "lines", lines }),
      again: (sessionId, seq) => offer({ _tag: "log", sessionId, seq })
    })
    const lookAround = (client: pg.Client) =>
      Effect.map(
        Effect.tryPromise(() => client.query<{ name: string }>(activityQuery)),
        (result) => watches.listed(result.rows.map((row) => row.name))
      )

    const onPayload = (payload: string) => {
      for (const line of payload.split("\n")) watches.heard(line)
      for (const signal of parse(payload, origin)) hub.emit(signal)
      if (claimable(payload)) hub.claimable()
    }

    /** One connection's life: connect, LISTEN, hand notifications to the hub until it errors or ends. */
    const connection = Effect.scoped(Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise(async () => {
          const client = new Pg.Client({ connectionString: options.url, application_name: `${applicationName} ${origin}` })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end().catch(() => undefined))
      )
      const channel = (yield* Effect.tryPromise(() => client.query<{ channel: string }>(channelQuery))).rows[0]!.channel
      // A NOTIFY sent here is a transaction of its own: a hint needs no wait for the disk.
      yield* Effect.tryPromise(() => client.query("SET synchronous_commit TO off"))
      // Said once the connection ends with the layer (a crash is noticed in `pg_stat_activity` instead).
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => client.query("SELECT pg_notify($1, $2)", [channel, `b ${origin}`]).catch(() => undefined)).pipe(
          Effect.timeout("1 second"),
          Effect.ignore
        )
      )
      // Until the connection errors or ends.
      yield* Effect.async<void>((resume) => {
        const done = () => resume(Effect.void)
        client.on("error", done)
        client.on("end", done)
        client.on("notification", (message) => {
          if (message.channel === channel && message.payload !== undefined) onPayload(message.payload)
        })
        // Listening from here on; whatever committed while no connection listened is read again.
        client.query(`LISTEN "${channel}"`).then(() => {
          current = { client, channel }
          hub.missedAll()
          // Said after LISTEN, so whoever answers is heard; every watch here goes with it (the others may have missed some).
          offer({ _tag: "lines", lines: watches.listening() })
        }, done)
      })
    }).pipe(Effect.ensuring(Effect.sync(() => {
      current = undefined
    }))))
    yield* connection.pipe(
      Effect.catchAll((error) => Effect.logDebug("store signals connection failed", error)),
      Effect.zipRight(Effect.sleep(Duration.millis(100))),
      Effect.repeat(Schedule.forever),
      Effect.forkScoped
    )

    // Sends what this process announced, one NOTIFY at a time, whatever piled up meanwhile batched together.
    const send = Effect.flatMap(Queue.takeBetween(outbox, 1, forwardBacklog), (batch) => {
      const target = current
      const sent = target === undefined
        ? Effect.void
        : Effect.forEach(
          pack(linesOf(origin, batch)),
          (payload) => Effect.tryPromise(() => target.client.query("SELECT pg_notify($1, $2)", [target.channel, payload])),
          { discard: true }
        )
      return sent.pipe(
        Effect.catchAll((error) => Effect.logDebug("signals not sent", error)),
        // Whoever waits for its lines to leave waits no longer, sent or not.
        Effect.ensuring(Effect.sync(() => {
          for (const item of batch) if (item._tag === "lines" && item.sent !== undefined) Deferred.unsafeDone(item.sent, Exit.void)
        }))
      )
    })
    yield* Effect.forkScoped(Effect.forever(send))

    // Withdraws watches no longer used, forgets old heads, and looks at who is on the database.
    const sweep = Effect.suspend(() => {
      const lines = watches.sweep()
      if (lines.length > 0 && current !== undefined && watches.othersKnown()) offer({ _tag: "lines", lines })
      // Only while others are known: alone, nothing to look for.
      const target = current
      return target === undefined || !watches.othersKnown() ? Effect.void : Effect.ignore(lookAround(target.client))
    })
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(options.sweep ?? Duration.seconds(5))).pipe(Effect.delay(options.sweep ?? Duration.seconds(5))))

    /** Counts a watch of `sessionId` for the scope; tells the processes present when it is new to them (and waits for that). */
    const register = (sessionId: SessionId, deltas: boolean) =>
      Effect.flatMap(Effect.scope, (scope) => {
        const { end, line } = watches.watch(sessionId, deltas, current !== undefined)
        const release = Scope.addFinalizer(scope, Effect.sync(end))
        if (line === undefined) return release
        // Through the outbox, in order with the hello and the withdrawals; waited for (at most a second).
        const sent = Deferred.unsafeMake<void>(FiberId.none)
        offer({ _tag: "lines", lines: [line], sent })
        return Effect.zipRight(release, Effect.interruptible(Effect.ignore(Effect.timeout(Deferred.await(sent), "1 second"))))
      })

    return StoreSignals.of({
      watch: (sessionId: SessionId, watchOptions?: WatchOptions) =>
        Effect.tap(hub.watch(sessionId, watchOptions), () => Effect.uninterruptible(register(sessionId, watchOptions?.deltas === true))),
      onSignal: hub.onSignal,
      announce: (sessionId, seq) =>
        Effect.sync(() => {
          watches.announced(sessionId, seq)
          if (current !== undefined && watches.watchedElsewhere(sessionId)) offer({ _tag: "log", sessionId, seq })
        }),
      forward: (sessionId, events) =>
        Effect.sync(() => {
          if (current !== undefined && events.length > 0 && watches.deltasWantedElsewhere(sessionId)) offer({ _tag: "deltas", sessionId, events })
        }),
      // Sent at once and waited for (at most a second), not batched: a draining process may exit right after.
      announceClaimable: Effect.suspend(() => {
        const target = current
        if (target === undefined) return Effect.void
        return Effect.tryPromise(() => target.client.query("SELECT pg_notify($1, 'c')", [target.channel])).pipe(
          Effect.interruptible,
          Effect.timeout("1 second"),
          Effect.catchAll((error) => Effect.logDebug("pool hint not sent", error))
        )
      }),
      watchClaimable: hub.watchClaimable,
      shared: true,
      announcesCommits: true
    })
  })

/** Signals over the database at `url`. */
export const layer = (options: Options): Layer.Layer<StoreSignals> => Layer.scoped(StoreSignals, make(options))
