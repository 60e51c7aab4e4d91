/**
 * What SQLite's store signals carry between processes beside the database
 * file, in side files that are not part of the store (decision 0047): the
 * pool's explicit hint and volatile deltas. Neither touches the database, so
 * neither takes its write lock nor moves its `data_version` (which would cost
 * every watching process a query of its watched sessions' heads).
 *
 * - **The pool's hint** (`FILE-pool`): a draining host that released leases
 *   (or a claimer that left sessions to the others) rewrites the file; every
 *   process's change check stats it and tells its claim loops at once.
 * - **Volatile deltas** (`FILE-live/SESSION/`): a process that follows a
 *   session with deltas keeps its own marker `ORIGIN.followed` there fresh
 *   (its mtime, every second) and removes it when it stops following; a
 *   process running a turn of that session appends its deltas to `deltas`
 *   only while another process's marker is fresh (a listing of `FILE-live/`
 *   at most every 250 ms per process, and of a listed session's directory at
 *   most every 250 ms: a session no one follows, or only this process does,
 *   costs nothing more), and starts a new file (unlink, a new
 *   inode) past 1 MiB. A follower reads the lines appended after it began,
 *   through a descriptor it keeps open (an unlinked file stays readable),
 *   then moves to the new file.
 *
 * A line is `ORIGIN TURN ["text", …]`; a process skips its own (it hands its
 * deltas to its followers in-process). Best effort, as on PostgreSQL: a
 * delta a follower misses is in the record that ends the step.
 *
 * @since 0.1.0
 */
import {
  appendFileSync,
  closeSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  rmdirSync,
  type Stats,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync
} from "node:fs"
import { join } from "node:path"
import { AssistantDelta } from "../schema/Event.js"
import type { SessionId, TurnId } from "../schema/Ids.js"

/** How often a follower refreshes its marker. */
const touchEvery = 1000

/** A marker older than this stands for no follower. */
const followTtl = 3000

/** How long a writer trusts what it last saw of a session's marker. */
const lookEvery = 250

/** A deltas file past this size is replaced by a new one. */
const rotateAtDefault = 1024 * 1024

/** Sessions a writer remembers the markers of before it forgets them all. */
const rememberAtMost = 4096

/** The side files of the database at `filename`. */
export interface Paths {
  readonly hint: string
  readonly live: string
}

/** Where the side files of `filename` are. */
export const pathsOf = (filename: string): Paths => ({ hint: `${filename}-pool`, live: `${filename}-live` })

const statOf = (path: string): Stats | undefined => statSync(path, { throwIfNoEntry: false })

/** The inode of the file at `path`, if there is one (a new file has a new one). */
export const inodeOf = (path: string): number | undefined => statOf(path)?.ino

/** What a file looks like now, as a key that changes with each rewrite ("" when absent). */
const versionOf = (path: string): string => {
  const stat = statSync(path, { bigint: true, throwIfNoEntry: false })
  return stat === undefined ? "" : `${stat.ino}:${stat.size}:${stat.mtimeNs}`
}

/** The pool's hint over `paths.hint`: `announce` rewrites it, `changed` tells whether it changed since the last call. */
export const poolHint = (paths: Paths, origin: string) => {
  let count = 0
  let seen: string | undefined
  return {
    announce: () => writeFileSync(paths.hint, `${origin} ${++count} ${Date.now()}\n`),
    /** Whether the hint was announced since the last call (the first call only records where it stands). */
    changed: (): boolean => {
      const now = versionOf(paths.hint)
      const moved = seen !== undefined && now !== seen
      seen = now
      return moved
    }
  }
}

const dirOf = (paths: Paths, sessionId: SessionId) => join(paths.live, sessionId)
const markerOf = (paths: Paths, sessionId: SessionId, origin: string) => join(dirOf(paths, sessionId), `${origin}.followed`)
const deltasOf = (paths: Paths, sessionId: SessionId) => join(dirOf(paths, sessionId), "deltas")

/** Removes a file that may be gone already. */
const remove = (path: string) => {
  try {
    unlinkSync(path)
  } catch {
    // Gone already.
  }
}

/** Whether a process other than `origin` follows the session now; stale markers (a follower that died) are removed. */
const followedElsewhere = (paths: Paths, sessionId: SessionId, origin: string, now: number): boolean => {
  const dir = dirOf(paths, sessionId)
  let names: Array<string>
  try {
    names = readdirSync(dir)
  } catch {
    return false
  }
  let followed = false
  for (const name of names) {
    if (!name.endsWith(".followed") || name === `${origin}.followed`) continue
    const marker = statOf(join(dir, name))
    if (marker !== undefined && marker.mtimeMs > now - followTtl) followed = true
    else remove(join(dir, name))
  }
  return followed
}

/** One line per turn of `events` (in order). */
export const encode = (origin: string, events: ReadonlyArray<AssistantDelta>): string => {
  let out = ""
  let turnId: TurnId | undefined
  let texts: Array<string> = []
  const flush = () => {
    if (turnId !== undefined && texts.length > 0) out += `${origin} ${turnId} ${JSON.stringify(texts)}\n`
    texts = []
  }
  for (const event of events) {
    if (event.turnId !== turnId) {
      flush()
      turnId = event.turnId
    }
    texts.push(event.text)
  }
  flush()
  return out
}

/** The deltas of one line, unless it is `origin`'s own or not one of ours. */
export const decode = (line: string, sessionId: SessionId, origin: string): ReadonlyArray<AssistantDelta> => {
  const first = line.indexOf(" ")
  const second = line.indexOf(" ", first + 1)
  if (first < 0 || second < 0 || line.slice(0, first) === origin) return []
  const turnId = line.slice(first + 1, second) as TurnId
  try {
    const texts = JSON.parse(line.slice(second + 1)) as ReadonlyArray<string>
    return texts.map((text) => new AssistantDelta({ sessionId, turnId, text }, true))
  } catch {
    return []
  }
}

/** The writing side: appends a turn's deltas for the sessions someone follows (a new file past `rotateAt` bytes). */
export const writer = (paths: Paths, origin: string, options: { readonly rotateAt?: number } = {}) => {
  const rotateAt = options.rotateAt ?? rotateAtDefault
  const looked = new Map<SessionId, { readonly until: number; readonly followed: boolean }>()
  const written = new Map<SessionId, number>()
  // The sessions with a directory (someone follows them, here or elsewhere), listed at most every `lookEvery`:
  // a session without one costs a set lookup, however many sessions stream.
  let listed: { readonly until: number; readonly sessions: ReadonlySet<string> } = { until: 0, sessions: new Set() }
  const hasDirectory = (sessionId: SessionId, now: number) => {
    if (listed.until <= now) {
      let names: ReadonlyArray<string> = []
      try {
        names = readdirSync(paths.live)
      } catch {
        // No follower ever: no directory.
      }
      listed = { until: now + lookEvery, sessions: new Set(names) }
    }
    return listed.sessions.has(sessionId)
  }
  const followed = (sessionId: SessionId, now: number): boolean => {
    const last = looked.get(sessionId)
    if (last !== undefined && last.until > now) return last.followed
    // No directory and nothing written here: nobody follows it, and there is nothing to remember.
    const directory = hasDirectory(sessionId, now)
    if (!directory && !written.has(sessionId)) return false
    if (looked.size >= rememberAtMost) looked.clear()
    const fresh = directory && followedElsewhere(paths, sessionId, origin, now)
    looked.set(sessionId, { until: now + lookEvery, followed: fresh })
    if (!fresh && written.has(sessionId)) {
      // Nobody follows any more: what this process wrote is nobody's to read.
      written.delete(sessionId)
      remove(deltasOf(paths, sessionId))
    }
    return fresh
  }
  return {
    /** Appends `events` when the session is followed; throws on a file error (the caller drops them). */
    forward: (sessionId: SessionId, events: ReadonlyArray<AssistantDelta>): void => {
      if (events.length === 0 || !followed(sessionId, Date.now())) return
      const text = encode(origin, events)
      const file = deltasOf(paths, sessionId)
      const size = (written.get(sessionId) ?? 0) + Buffer.byteLength(text)
      // A new inode: followers finish the old one through their open descriptors, then move on.
      if (size > rotateAt) remove(file)
      appendFileSync(file, text)
      written.set(sessionId, size > rotateAt ? Buffer.byteLength(text) : size)
    }
  }
}

/** What a follower holds of one session's deltas file. */
interface Reading {
  fd: number | undefined
  ino: number
  offset: number
  partial: string
  touchedAt: number
}

/** The following side: for each followed session, its marker kept fresh and the deltas appended since. */
export const reader = (paths: Paths, origin: string) => {
  const readings = new Map<SessionId, Reading>()

  const touch = (sessionId: SessionId, now: number) => {
    const marker = markerOf(paths, sessionId, origin)
    const at = new Date(now)
    try {
      utimesSync(marker, at, at)
    } catch {
      mkdirSync(dirOf(paths, sessionId), { recursive: true })
      writeFileSync(marker, "")
    }
  }

  /** Stops following: this process's marker goes, and the directory if nothing else is in it. */
  const untouch = (sessionId: SessionId) => {
    remove(markerOf(paths, sessionId, origin))
    try {
      rmdirSync(dirOf(paths, sessionId))
      // The last one leaves nothing beside the database file.
      rmdirSync(paths.live)
    } catch {
      // Another follower's marker, or deltas still there (a writer removes those it wrote once nobody follows), or another session's.
    }
  }

  const close = (reading: Reading) => {
    if (reading.fd !== undefined) closeSync(reading.fd)
    reading.fd = undefined
    reading.partial = ""
  }

  const open = (reading: Reading, file: string, from: "start" | "end") => {
    try {
      const fd = openSync(file, "r")
      const stat = fstatSync(fd)
      reading.fd = fd
      reading.ino = stat.ino
      reading.offset = from === "end" ? stat.size : 0
    } catch {
      // Not there (yet): looked for again at the next check.
    }
  }

  /** The complete lines appended to the open file since the last read. */
  const drain = (reading: Reading): Array<string> => {
    if (reading.fd === undefined) return []
    const size = fstatSync(reading.fd).size
    if (size <= reading.offset) return []
    const buffer = Buffer.alloc(size - reading.offset)
    const got = readSync(reading.fd, buffer, 0, buffer.length, reading.offset)
    reading.offset += got
    const text = reading.partial + buffer.subarray(0, got).toString("utf8")
    const lines = text.split("\n")
    reading.partial = lines.pop() ?? ""
    return lines
  }

  return {
    /** The deltas of `sessions` (those followed with deltas now) appended since the last call; forgets the others. */
    poll: (sessions: ReadonlyArray<SessionId>): ReadonlyArray<readonly [SessionId, ReadonlyArray<AssistantDelta>]> => {
      const now = Date.now()
      const wanted = new Set(sessions)
      for (const [sessionId, reading] of readings) {
        if (wanted.has(sessionId)) continue
        close(reading)
        readings.delete(sessionId)
        untouch(sessionId)
      }
      const out: Array<readonly [SessionId, ReadonlyArray<AssistantDelta>]> = []
      for (const sessionId of sessions) {
        const file = deltasOf(paths, sessionId)
        let reading = readings.get(sessionId)
        if (reading === undefined) {
          touch(sessionId, now)
          reading = { fd: undefined, ino: -1, offset: 0, partial: "", touchedAt: now }
          readings.set(sessionId, reading)
          // Only what is appended from now on: a follower that joins late sees no earlier delta.
          open(reading, file, "end")
        } else if (now - reading.touchedAt >= touchEvery) {
          touch(sessionId, now)
          reading.touchedAt = now
        }
        const lines = drain(reading)
        const current = statOf(file)
        if (reading.fd === undefined || current?.ino !== reading.ino) {
          // Replaced or removed: the old file was read to its end above; a new one is read from its start.
          if (reading.fd !== undefined) close(reading)
          if (current !== undefined) {
            open(reading, file, "start")
            lines.push(...drain(reading))
          }
        }
        const events = lines.flatMap((line) => decode(line, sessionId, origin))
        if (events.length > 0) out.push([sessionId, events])
      }
      return out
    },
    /** Closes every open file and removes this process's markers. */
    close: () => {
      for (const [sessionId, reading] of readings) {
        close(reading)
        untouch(sessionId)
      }
      readings.clear()
    }
  }
}
