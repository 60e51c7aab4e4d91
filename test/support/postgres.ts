/**
 * PostgreSQL for tests: the URL comes from `TROUPE_TEST_PG_URL` (default the
 * local trust-auth server). Each test file gets a fresh schema, dropped after.
 * Outside CI an unreachable server skips the suites with a printed reason; in
 * CI (`CI=true`) it is a failure.
 */
import pg from "pg"

/** The server tests use. */
export const baseUrl = process.env.TROUPE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const inCi = process.env.CI === "true" || process.env.CI === "1"

/** Probes the server once; `undefined` when it answers, else the reason. */
export const unreachable = async (): Promise<string | undefined> => {
  const client = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000 })
  try {
    await client.connect()
    await client.query("select 1")
    return undefined
  } catch (error) {
    return `${baseUrl} did not answer (${(error as Error).message})`
  } finally {
    await client.end().catch(() => undefined)
  }
}

/** Whether PostgreSQL suites run: always in CI, else only when the server answers. */
export const availability = async (): Promise<{ readonly run: boolean; readonly reason?: string }> => {
  const reason = await unreachable()
  if (reason === undefined || inCi) return { run: true }
  console.warn(`[troupe tests] skipping PostgreSQL suites: ${reason}; set TROUPE_TEST_PG_URL to run them`)
  return { run: false, reason }
}

/** Creates a fresh schema and returns a URL whose connections use it. */
export const freshSchema = async (): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const schema = `troupe_t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  const admin = new pg.Client({ connectionString: baseUrl })
  await admin.connect()
  await admin.query(`CREATE SCHEMA ${schema}`)
  await admin.end()
  const url = new URL(baseUrl)
  url.searchParams.set("options", `-c search_path=${schema}`)
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: baseUrl })
      await client.connect()
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await client.end()
    }
  }
}
