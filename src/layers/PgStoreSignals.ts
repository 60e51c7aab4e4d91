/**
 * `StoreSignals` for workers sharing one PostgreSQL database: triggers of the
 * store's tables (migration `6_change_signals`) send `pg_notify` from the
 * committing transaction, so a signal leaves exactly when the change is
 * visible; one dedicated `LISTEN` connection per process, owned by the
 * layer's scope, receives them and reconnects when it is lost (then every
 * watcher is told `Missed` and reads the store again).
 *
 * The channel is per schema (`troupe_` and 16 hex digits of the schema name's
 * md5), so stores in different schemas of one database do not hear each other.
 * Payloads: `i <session> <position>` (inbox pushed), `l <session> <seq>` (log
 * appended up to seq), `d <origin> <session> <turn> <json texts>` (volatile
 * deltas, forwarded best effort by the process running the turn, in chunks
 * under the 8000-byte payload limit; a larger single delta is skipped).
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Queue, Schedule } from "effect"
import pg from "pg"
import { AssistantDelta } from "../schema/Event.js"
import { type SessionId, type TurnId, ulid } from "../schema/Ids.js"
import { Signal, StoreSignals } from "../services/StoreSignals.js"
import * as SignalHub from "./SignalHub.js"

/** How to reach the database (the same URL as the store's). */
export interface Options {
  readonly url: string
}

/** The channel of the connection's schema. */
const channelQuery = `SELECT 'troupe_' || left(md5(current_schema()), 16) AS channel`

/** Bytes of a payload, under PostgreSQL's 8000. */
const payloadLimit = 7900

/** Deltas waiting to be forwarded before new ones are dropped. */
const forwardBacklog = 4096

interface Forward {
  readonly sessionId: SessionId
  readonly events: ReadonlyArray<AssistantDelta>
}

/** Parses a payload into the signal it carries, unless it is this process's own deltas or not one of ours. */
export const parse = (payload: string, origin: string): Signal | undefined => {
  const kind = payload[0]
  const rest = payload.slice(2)
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

/** The payloads that carry `events` (one turn's, in order), each under the limit; a delta too big alone is skipped. */
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

/** Builds the signals: the listening connection lives in a fiber of the scope, reconnecting while the scope lasts. */
export const make = (options: Options) =>
  Effect.gen(function*() {
    const origin = yield* ulid
    const hub = SignalHub.make()
    const outbox = yield* Queue.dropping<Forward>(forwardBacklog)
    let current: { readonly client: pg.Client; readonly channel: string } | undefined

    /** One connection's life: connect, LISTEN, hand notifications to the hub until it errors or ends. */
    const connection = Effect.scoped(Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise(async () => {
          const client = new pg.Client({ connectionString: options.url, application_name: "troupe-signals" })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end().catch(() => undefined))
      )
      const channel = (yield* Effect.tryPromise(() => client.query<{ channel: string }>(channelQuery))).rows[0]!.channel
      // A NOTIFY of deltas is a transaction of its own: best effort needs no wait for the disk.
      yield* Effect.tryPromise(() => client.query("SET synchronous_commit TO off"))
      // Until the connection errors or ends.
      yield* Effect.async<void>((resume) => {
        const done = () => resume(Effect.void)
        client.on("error", done)
        client.on("end", done)
        client.on("notification", (message) => {
          if (message.channel !== channel || message.payload === undefined) return
          const signal = parse(message.payload, origin)
          if (signal !== undefined) hub.emit(signal)
        })
        // Listening from here on; whatever committed while no connection listened is read again.
        client.query(`LISTEN "${channel}"`).then(() => {
          current = { client, channel }
          hub.missedAll()
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

    // Forwards deltas one NOTIFY at a time, whatever piled up meanwhile batched together.
    const send = Effect.gen(function*() {
      const batch = yield* Queue.takeBetween(outbox, 1, forwardBacklog)
      const target = current
      if (target === undefined) return
      const bySession = new Map<SessionId, Array<AssistantDelta>>()
      for (const item of batch) {
        const list = bySession.get(item.sessionId)
        if (list === undefined) bySession.set(item.sessionId, [...item.events])
        else list.push(...item.events)
      }
      for (const [sessionId, events] of bySession) {
        for (const payload of deltaPayloads(origin, sessionId, events)) {
          yield* Effect.tryPromise(() => target.client.query("SELECT pg_notify($1, $2)", [target.channel, payload]))
        }
      }
    }).pipe(Effect.catchAll((error) => Effect.logDebug("deltas not forwarded", error)))
    yield* Effect.forkScoped(Effect.forever(send))

    return StoreSignals.of({
      watch: hub.watch,
      forward: (sessionId, events) =>
        Effect.sync(() => {
          if (current !== undefined && events.length > 0) Queue.unsafeOffer(outbox, { sessionId, events })
        }),
      shared: true
    })
  })

/** Signals over the database at `url`. */
export const layer = (options: Options): Layer.Layer<StoreSignals> => Layer.scoped(StoreSignals, make(options))
