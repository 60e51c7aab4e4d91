/**
 * Who watches what among the processes on one PostgreSQL channel
 * (`PgStoreSignals`, decision 0053): the watch lines, what this process knows
 * of the others (`Peers`: who is present, which sessions they watch), and its
 * own watches (`Watches`: counted by session, what the others were told, the
 * heads it announced lately). The lines it says go out through the signals'
 * ordered outbox (`say`, `again`); the connection, the outbox and the sweep's
 * timer stay `PgStoreSignals`'.
 *
 * A process says `h` (hello) each time it listens; every other one answers
 * `p` (present) with the sessions it watches. A session watched here for the
 * first time is told to the processes known to be present (`w`, with `d` when
 * its deltas are wanted); one no longer watched for a while is withdrawn
 * (`u`); a process that stops says `b`. A process that hears `w` for a session
 * it committed to lately announces that session's head again. Watches of a
 * process whose connection `pg_stat_activity` listed and no longer lists (it
 * crashed) are dropped.
 *
 * @since 0.1.0
 */
import type { SessionId } from "../schema/Ids.js"

/** The application name of every signals connection, followed by ` <origin>`. */
export const applicationName = "troupe-signals"

/** A line about who watches what (`h`, `p`, `w`, `u`, `b`), from another process. */
export type WatchLine =
  | { readonly _tag: "hello" | "present" | "bye"; readonly origin: string }
  | { readonly _tag: "watch"; readonly origin: string; readonly sessionId: SessionId; readonly deltas: boolean }
  | { readonly _tag: "unwatch"; readonly origin: string; readonly sessionId: SessionId }

/** The watch line `line` is, unless it is not one or it is `origin`'s own. */
export const parseWatch = (line: string, origin: string): WatchLine | undefined => {
  const kind = line[0]
  if (line[1] !== " " || (kind !== "h" && kind !== "p" && kind !== "b" && kind !== "w" && kind !== "u")) return undefined
  const [from, sessionId, flag] = line.slice(2).split(" ", 3)
  if (from === undefined || from === "" || from === origin) return undefined
  if (kind === "h") return { _tag: "hello", origin: from }
  if (kind === "p") return { _tag: "present", origin: from }
  if (kind === "b") return { _tag: "bye", origin: from }
  if (sessionId === undefined || sessionId === "") return undefined
  return kind === "w"
    ? { _tag: "watch", origin: from, sessionId: sessionId as SessionId, deltas: flag === "d" }
    : { _tag: "unwatch", origin: from, sessionId: sessionId as SessionId }
}

/** The `w` line that tells `sessionId` is watched by `origin` (`deltas`: with its deltas). */
export const watchLine = (origin: string, sessionId: SessionId, deltas: boolean): string =>
  deltas ? `w ${origin} ${sessionId} d` : `w ${origin} ${sessionId}`

/** What this process knows of the others on its channel: who is there, and which sessions they watch. */
export interface Peers {
  /** Processes heard from, and whether `pg_stat_activity` listed their connection yet. */
  readonly present: Map<string, { listed: boolean }>
  /** Sessions other processes watch: by session, the watching processes and whether they want its deltas. */
  readonly watches: Map<SessionId, Map<string, boolean>>
}

/** Nobody known yet. */
export const noPeers = (): Peers => ({ present: new Map(), watches: new Map() })

/** Drops a process and its watches. */
const forget = (peers: Peers, origin: string) => {
  peers.present.delete(origin)
  for (const [sessionId, by] of peers.watches) {
    if (by.delete(origin) && by.size === 0) peers.watches.delete(sessionId)
  }
}

/**
 * Applies a watch line to `peers`; the session whose head to announce again
 * (`watch`), if any. A hello or a present is followed by every watch of its
 * sender, so it replaces whatever was known of them.
 */
export const hear = (peers: Peers, line: WatchLine): SessionId | undefined => {
  switch (line._tag) {
    case "bye":
      forget(peers, line.origin)
      return undefined
    case "hello":
    case "present": {
      const state = peers.present.get(line.origin) ?? { listed: false }
      forget(peers, line.origin)
      peers.present.set(line.origin, state)
      return undefined
    }
    case "watch": {
      if (!peers.present.has(line.origin)) peers.present.set(line.origin, { listed: false })
      let by = peers.watches.get(line.sessionId)
      if (by === undefined) peers.watches.set(line.sessionId, by = new Map())
      by.set(line.origin, line.deltas || by.get(line.origin) === true)
      return line.sessionId
    }
    case "unwatch": {
      const by = peers.watches.get(line.sessionId)
      if (by !== undefined && by.delete(line.origin) && by.size === 0) peers.watches.delete(line.sessionId)
      return undefined
    }
  }
}

/**
 * Applies a look at `pg_stat_activity` (the application names of the signals
 * connections on the database) to `peers`: a process listed before and not
 * now is gone (one whose connection was never listed, as behind a pooler that
 * drops the name, is kept).
 */
export const listed = (peers: Peers, names: ReadonlyArray<string>): void => {
  const origins = new Set<string>()
  for (const name of names) if (name.startsWith(`${applicationName} `)) origins.add(name.slice(applicationName.length + 1))
  for (const [origin, state] of [...peers.present]) {
    if (origins.has(origin)) state.listed = true
    else if (state.listed) forget(peers, origin)
  }
}

/** A session watched here: by how many watches (and of them, how many want deltas), and what the others were told. */
interface LocalWatch {
  watches: number
  deltas: number
  /** Told to the processes present: not yet, as watched, or as watched with its deltas. */
  told: "no" | "log" | "deltas"
  /** The sweep count when its last watch ended (it is withdrawn a full sweep later). */
  idleSince: number | undefined
}

/** What the others must be told of a session watched here. */
const needOf = (watch: LocalWatch): "log" | "deltas" => (watch.deltas > 0 ? "deltas" : "log")

/** How `Watches` sends: lines in order (`say`), and a session's head announced again (`again`), through one outbox. */
export interface Outbox {
  readonly say: (lines: Array<string>) => void
  readonly again: (sessionId: SessionId, seq: number) => void
}

/** This process's watches and what it knows of the others' (see `make`). */
export type Watches = ReturnType<typeof make>

/** The watch bookkeeping of the process `origin`, whose lines leave through `outbox`. */
export const make = (origin: string, outbox: Outbox) => {
  const peers = noPeers()
  const local = new Map<SessionId, LocalWatch>()
  // This process's latest announced heads, of this sweep and the one before: a `w` heard for one of them announces it again.
  let recent = new Map<SessionId, number>()
  let older = new Map<SessionId, number>()
  let sweeps = 0

  /** The `w` lines of the sessions watched here now (`all`; else those not told as watched as they are), each marked told. */
  const tell = (all: boolean): Array<string> => {
    const lines: Array<string> = []
    for (const [sessionId, watch] of local) {
      if (watch.watches === 0 || (!all && (watch.told === "deltas" || watch.told === needOf(watch)))) continue
      watch.told = needOf(watch)
      lines.push(watchLine(origin, sessionId, watch.deltas > 0))
    }
    return lines
  }

  return {
    peers,
    /** Whether any other process is known on the channel. */
    othersKnown: (): boolean => peers.present.size > 0,
    /** Whether another process watches `sessionId`. */
    watchedElsewhere: (sessionId: SessionId): boolean => peers.watches.has(sessionId),
    /** Whether another process wants `sessionId`'s deltas. */
    deltasWantedElsewhere: (sessionId: SessionId): boolean => {
      const by = peers.watches.get(sessionId)
      if (by === undefined) return false
      for (const deltas of by.values()) if (deltas) return true
      return false
    },
    /** What this process says once it listens (again): hello, and every watch here (the others may have missed some). */
    listening: (): Array<string> => [`h ${origin}`, ...tell(true)],
    /** Hears one line of a payload, answering through the outbox what it calls for. */
    heard: (line: string): void => {
      const watch = parseWatch(line, origin)
      if (watch === undefined) return
      const known = peers.present.has(watch.origin)
      const again = hear(peers, watch)
      // A process that just listens missed every watch here; one newly heard of may have missed those made while nobody was known.
      if (watch._tag === "hello") outbox.say([`p ${origin}`, ...tell(true)])
      else if (!known && watch._tag !== "bye") {
        const untold = tell(false)
        if (untold.length > 0) outbox.say(untold)
      }
      if (again !== undefined) {
        const seq = recent.get(again) ?? older.get(again)
        if (seq !== undefined) outbox.again(again, seq)
      }
    },
    /** The connection names `pg_stat_activity` lists now (see `listed`). */
    listed: (names: ReadonlyArray<string>): void => listed(peers, names),
    /** Notes `seq` as `sessionId`'s head this process announced (or would have, had anyone watched). */
    announced: (sessionId: SessionId, seq: number): void => void recent.set(sessionId, seq),
    /**
     * Counts a watch of `sessionId`: `end` uncounts it; `line` is the `w` line
     * to tell the others when it is new to them as it is (none while nobody
     * else is known, `connected` false, or told already), marked told.
     */
    watch: (sessionId: SessionId, deltas: boolean, connected: boolean) => {
      let watch = local.get(sessionId)
      if (watch === undefined) local.set(sessionId, watch = { watches: 0, deltas: 0, told: "no", idleSince: undefined })
      const counted = watch
      counted.watches++
      if (deltas) counted.deltas++
      counted.idleSince = undefined
      const end = () => {
        counted.watches--
        if (deltas) counted.deltas--
        if (counted.watches === 0) counted.idleSince = sweeps
      }
      const need = needOf(counted)
      // Nobody else known yet (whoever comes is told every watch), or told already.
      if (!connected || peers.present.size === 0 || counted.told === "deltas" || counted.told === need) {
        return { end, line: undefined }
      }
      counted.told = need
      return { end, line: watchLine(origin, sessionId, need === "deltas") }
    },
    /** A sweep: forgets old heads, and the `u` lines of the sessions no longer watched for a full sweep, withdrawn. */
    sweep: (): Array<string> => {
      sweeps++
      older = recent
      recent = new Map()
      const lines: Array<string> = []
      for (const [sessionId, watch] of local) {
        if (watch.watches > 0 || watch.idleSince === undefined || watch.idleSince >= sweeps - 1) continue
        local.delete(sessionId)
        if (watch.told !== "no") lines.push(`u ${origin} ${sessionId}`)
      }
      return lines
    }
  }
}
