/**
 * Run as a separate process by the persistence tests: opens a store from its
 * arguments (`sqlite:PATH` or `postgres:URL`), reads one session back, and
 * prints it as JSON on stdout.
 */
import { Effect, Layer, Schema } from "effect"
import * as PgSessionStore from "../../src/layers/PgSessionStore.js"
import * as SqliteSessionStore from "../../src/layers/SqliteSessionStore.js"
import { SessionId } from "../../src/schema/Ids.js"
import { LogRecord } from "../../src/schema/Record.js"
import { Session } from "../../src/schema/Session.js"
import { SessionStore } from "../../src/services/SessionStore.js"

const [target, rawId] = process.argv.slice(2)
if (!target || !rawId) {
  console.error("usage: read-store sqlite:PATH|postgres:URL SESSION_ID")
  process.exit(2)
}

const store: Layer.Layer<SessionStore, unknown> = target.startsWith("sqlite:")
  ? SqliteSessionStore.layer({ filename: target.slice("sqlite:".length) })
  : PgSessionStore.layer({ url: target.slice("postgres:".length), maxConnections: 1 })

const program = Effect.gen(function*() {
  const sessions = yield* SessionStore
  const sessionId = SessionId.make(rawId)
  const session = yield* sessions.get(sessionId)
  const log = yield* sessions.readLog(sessionId, { limit: 10_000 })
  const inbox = yield* sessions.readInbox(sessionId)
  return {
    session: Schema.encodeSync(Session)(session),
    records: log.records.map((record) => Schema.encodeSync(LogRecord)(record)),
    inbox: inbox.map((item) => item.command.inputId)
  }
})

Effect.runPromise(program.pipe(Effect.provide(store))).then(
  (out) => console.log(JSON.stringify(out)),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
