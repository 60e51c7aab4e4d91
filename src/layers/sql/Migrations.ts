/**
 * The SQL store's schema, for SQLite and PostgreSQL, as `@effect/sql`
 * migrations. Times are epoch milliseconds and flags are 0/1 integers on both
 * dialects, so one set of queries serves both.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** The migrations table troupe keeps its own history in. */
export const table = "troupe_migrations"

const initial = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // PostgreSQL wants BIGINT for millisecond times; SQLite's INTEGER is 64-bit already.
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  yield* sql`CREATE TABLE troupe_sessions (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    agent TEXT NOT NULL,
    parent_id TEXT,
    root_id TEXT NOT NULL,
    path TEXT NOT NULL,
    agent_path TEXT NOT NULL,
    alias TEXT,
    title TEXT,
    archived INTEGER NOT NULL DEFAULT 0,
    closed INTEGER NOT NULL DEFAULT 0,
    active_turn_id TEXT,
    open_callbacks INTEGER NOT NULL DEFAULT 0,
    busy_policy TEXT NOT NULL,
    budgets TEXT,
    subagent_policy TEXT,
    metadata TEXT NOT NULL,
    idempotency_key TEXT,
    fingerprint TEXT NOT NULL,
    head_seq ${big} NOT NULL,
    inbox_head ${big} NOT NULL DEFAULT 0,
    ready_count INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_epoch ${big} NOT NULL DEFAULT 0,
    lease_expires_at ${big} NOT NULL DEFAULT 0,
    created_at ${big} NOT NULL,
    updated_at ${big} NOT NULL
  )`
  yield* sql`CREATE UNIQUE INDEX troupe_sessions_idempotency ON troupe_sessions (workspace_id, idempotency_key)`
  yield* sql`CREATE UNIQUE INDEX troupe_sessions_alias ON troupe_sessions (parent_id, alias)`
  yield* sql`CREATE INDEX troupe_sessions_workspace ON troupe_sessions (workspace_id, parent_id, id)`
  yield* sql`CREATE INDEX troupe_sessions_root ON troupe_sessions (root_id, id)`
  yield* sql`CREATE TABLE troupe_inbox (
    session_id TEXT NOT NULL,
    position ${big} NOT NULL,
    input_id TEXT NOT NULL,
    command TEXT NOT NULL,
    received_at ${big} NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, position)
  )`
  yield* sql`CREATE UNIQUE INDEX troupe_inbox_input ON troupe_inbox (session_id, input_id)`
  yield* sql`CREATE TABLE troupe_log (
    session_id TEXT NOT NULL,
    seq ${big} NOT NULL,
    at ${big} NOT NULL,
    commit_id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
  )`
  yield* sql`CREATE TABLE troupe_commits (
    commit_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    first_seq ${big} NOT NULL,
    head_seq ${big} NOT NULL,
    at ${big} NOT NULL
  )`
  yield* sql`CREATE TABLE troupe_operations (
    operation_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    input TEXT,
    output TEXT,
    is_error INTEGER NOT NULL DEFAULT 0,
    started_seq ${big} NOT NULL,
    ended_seq ${big}
  )`
  yield* sql`CREATE INDEX troupe_operations_session ON troupe_operations (session_id, started_seq)`
  yield* sql`CREATE TABLE troupe_callbacks (
    callback_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    request TEXT NOT NULL,
    opened_seq ${big} NOT NULL,
    opened_at ${big} NOT NULL
  )`
  yield* sql`CREATE INDEX troupe_callbacks_session ON troupe_callbacks (session_id, opened_seq)`
})

/**
 * Consumed inbox rows stay (they hold input ids for idempotency), so reading a
 * session's ready commands must not walk them: a partial index holds only the
 * unconsumed ones, and the read stays flat however long the session lives.
 */
const inboxReady = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX troupe_inbox_ready ON troupe_inbox (session_id, position) WHERE consumed = 0`
})

/**
 * SQLite: the log, operation receipts and commit receipts become `WITHOUT
 * ROWID` tables, so a row lives in its primary-key B-tree instead of in a rowid
 * table plus a key index, and every commit writes fewer pages. SQLite cannot
 * alter a table into that form, so each is rebuilt: a new table, its rows
 * copied, the old one dropped and the new one renamed (inside the migration's
 * transaction, so a failure leaves the old tables). PostgreSQL has no rowid:
 * nothing to do there.
 */
const withoutRowid = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    sqlite: () => rebuildWithoutRowid,
    orElse: () => Effect.void
  })
})

const rebuildWithoutRowid = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables: ReadonlyArray<readonly [name: string, columns: string, key: string]> = [
    [
      "troupe_log",
      `session_id TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, commit_id TEXT NOT NULL, body TEXT NOT NULL`,
      "session_id, seq"
    ],
    [
      "troupe_commits",
      `commit_id TEXT NOT NULL, session_id TEXT NOT NULL, first_seq INTEGER NOT NULL, head_seq INTEGER NOT NULL,
      at INTEGER NOT NULL`,
      "commit_id"
    ],
    [
      "troupe_operations",
      `operation_id TEXT NOT NULL, session_id TEXT NOT NULL, turn_id TEXT NOT NULL, kind TEXT NOT NULL,
      name TEXT NOT NULL, status TEXT NOT NULL, input TEXT, output TEXT, is_error INTEGER NOT NULL DEFAULT 0,
      started_seq INTEGER NOT NULL, ended_seq INTEGER`,
      "operation_id"
    ]
  ]
  for (const [name, columns, key] of tables) {
    const fresh = `${name}_without_rowid`
    yield* sql.unsafe(`CREATE TABLE ${fresh} (${columns}, PRIMARY KEY (${key})) WITHOUT ROWID`)
    yield* sql.unsafe(`INSERT INTO ${fresh} SELECT * FROM ${name}`)
    yield* sql.unsafe(`DROP TABLE ${name}`)
    yield* sql.unsafe(`ALTER TABLE ${fresh} RENAME TO ${name}`)
  }
  yield* sql`CREATE INDEX troupe_operations_session ON troupe_operations (session_id, started_seq)`
})

/**
 * Tenancy by the whole principal, and session trees. `tenant` is the
 * principal's (customer, organization, workspace) triple, lower-cased and
 * joined by `/`: every check compares it, so a principal whose workspace
 * matches but whose customer or organization differs sees nothing. It is
 * filled from the stored principal of existing rows. Idempotency keys are
 * unique per tenant (not per workspace), and listings run on it.
 * `child_turns` counts, on a root, the child turns admitted across its tree;
 * `spawn_commit` is the parent commit that spawned a child (replays find it).
 */
const tenancyAndTrees = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE troupe_sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT ''`
  yield* sql`ALTER TABLE troupe_sessions ADD COLUMN child_turns INTEGER NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE troupe_sessions ADD COLUMN spawn_commit TEXT`
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`UPDATE troupe_sessions SET tenant = lower((principal::json)->>'customerId') || '/' ||
        lower((principal::json)->>'organizationId') || '/' || lower((principal::json)->>'workspaceId')`,
    orElse: () =>
      sql`UPDATE troupe_sessions SET tenant = lower(json_extract(principal, '$.customerId')) || '/' ||
        lower(json_extract(principal, '$.organizationId')) || '/' || lower(json_extract(principal, '$.workspaceId'))`
  })
  yield* sql`DROP INDEX troupe_sessions_idempotency`
  yield* sql`DROP INDEX troupe_sessions_workspace`
  yield* sql`CREATE UNIQUE INDEX troupe_sessions_idempotency ON troupe_sessions (tenant, idempotency_key)`
  yield* sql`CREATE INDEX troupe_sessions_tenant ON troupe_sessions (tenant, parent_id, id)`
  yield* sql`CREATE INDEX troupe_sessions_spawn ON troupe_sessions (spawn_commit)`
})

/**
 * At most one answer per callback (`SessionStore.admitAnswer`): an open
 * callback's row holds the input id of the answer admitted to it. Answers
 * already waiting in an inbox are carried over: the first one (by position)
 * of each open callback marks it, as the actor would have applied it first.
 */
const callbackAnswers = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE troupe_callbacks ADD COLUMN answer_input_id TEXT`
  const field = (name: string) =>
    sql.onDialectOrElse({
      pg: () => sql.literal(`((i.command::json)->>'${name}')`),
      orElse: () => sql.literal(`json_extract(i.command, '$.${name}')`)
    })
  yield* sql`UPDATE troupe_callbacks SET answer_input_id = (
    SELECT i.input_id FROM troupe_inbox i
    WHERE i.session_id = troupe_callbacks.session_id AND i.consumed = 0
      AND ${field("_tag")} = 'callback_answer' AND ${field("callbackId")} = troupe_callbacks.callback_id
    ORDER BY i.position LIMIT 1
  )`
})

/**
 * PostgreSQL: every insert into the inbox signals its session from the
 * committing transaction (`pg_notify`, delivered at commit), on the schema's
 * channel, for `PgStoreSignals`: a push wakes the lease holder wherever it
 * runs. A statement-level trigger: one notification per session and
 * statement, and the store's statements are untouched. Log appends are
 * announced by the committing actor's process just after its commit instead
 * (a NOTIFY takes a database-wide lock until its transaction commits, which
 * would serialise every commit; see decision 0012). SQLite has no
 * notifications: its processes check `PRAGMA data_version` (`SqliteStoreSignals`).
 */
const changeSignals = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.gen(function*() {
        for (const [table, kind, column] of [["troupe_inbox", "i", "position"]] as const) {
          yield* sql.unsafe(`CREATE OR REPLACE FUNCTION ${table}_signal() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM pg_notify('troupe_' || left(md5(current_schema()), 16), '${kind} ' || session_id || ' ' || max(${column}))
                FROM written GROUP BY session_id;
              RETURN NULL;
            END $$`)
          // Safe to run again (a test re-runs the migrations after 4).
          yield* sql.unsafe(`DROP TRIGGER IF EXISTS ${table}_signal ON ${table}`)
          yield* sql.unsafe(`CREATE TRIGGER ${table}_signal AFTER INSERT ON ${table}
            REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION ${table}_signal()`)
        }
      }),
    orElse: () => Effect.void
  })
})

/**
 * PostgreSQL: only a ready item signals. A commit that admits a message it
 * consumes at once (`Commit.admits`, decision 0027) inserts an inbox row that
 * nobody has to look for: signalling it would make the committing actor read
 * its own inbox again, and a NOTIFY holds a database-wide lock until its
 * transaction commits.
 */
const readySignals = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      sql.unsafe(`CREATE OR REPLACE FUNCTION troupe_inbox_signal() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('troupe_' || left(md5(current_schema()), 16), 'i ' || session_id || ' ' || max(position))
            FROM written WHERE consumed = 0 GROUP BY session_id;
          RETURN NULL;
        END $$`),
    orElse: () => Effect.void
  })
})

/** Every migration, by `<id>_<name>`, in order. */
export const migrations = {
  "1_initial": initial,
  "2_inbox_ready": inboxReady,
  "3_without_rowid": withoutRowid,
  "4_tenancy_and_trees": tenancyAndTrees,
  "5_callback_answers": callbackAnswers,
  "6_change_signals": changeSignals,
  "7_ready_signals": readySignals
}

/** Brings the store's tables up to date; safe to run from several processes. */
export const run = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table
})
