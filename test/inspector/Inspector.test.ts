/**
 * The inspector in a real browser: headless Chromium (Debian's `chromium`)
 * driven by playwright-core against a daemon process
 * (test/support/inspectorDaemon.ts: SQLite, the HTTP listener with the page,
 * two workspaces' tokens) whose root session spawned two children, one of
 * them waiting on an approval. The page asks for the token once, lists the
 * root, shows the tree; the waiting child's card is approved; its turn
 * completes and the parent records the child's result, without a reload;
 * a read-only listener beside it shows the same call with no button to
 * answer it; the daemon is killed (the banner shows) and started again on the same
 * port (the banner goes, and the event stream resumes: a rename made
 * meanwhile appears). Another workspace's token sees none of it; every
 * request the page makes is to its own origin. Screenshots of the list, the
 * tree and the timeline go to test/inspector/output/.
 *
 * Without /usr/bin/chromium the test says so and is skipped, and fails when CI=true.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import { tokens } from "../support/inspectorDaemon.js"

const CHROMIUM = "/usr/bin/chromium"
const repo = fileURLToPath(new URL("../..", import.meta.url))
const output = join(repo, "test", "inspector", "output")
const hasBrowser = existsSync(CHROMIUM)
const inCi = process.env.CI === "true" || process.env.CI === "1"
if (!hasBrowser && !inCi) console.warn(`[troupe tests] skipping the inspector's browser test: no browser at ${CHROMIUM} (apt-get install -y chromium)`)

/** Starts the daemon; resolves once it printed its port (and root). */
const startDaemon = (file: string, port: number, seed: boolean) => {
  const proc: ChildProcess = spawn(process.execPath, ["--import", "tsx", join(repo, "test/support/inspectorDaemon.ts"), file, String(port), ...(seed ? ["--seed"] : [])], {
    cwd: repo,
    env: { ...process.env, TROUPE_TELEMETRY_ENABLED: "false" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  proc.stderr!.on("data", (d) => (err += d))
  const ready = new Promise<{ port: number; readOnly: number; root: string | undefined }>((resolve, reject) => {
    proc.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d
      const p = /LISTENING (\d+)/.exec(out)
      const r = /ROOT (\S+)/.exec(out)
      if (p !== null && (!seed || r !== null)) resolve({ port: Number(p[1]), readOnly: Number(/READONLY (\d+)/.exec(out)![1]), root: r?.[1] })
    })
    proc.on("exit", (code) => reject(new Error(`daemon exited ${code}: ${err}`)))
  })
  return { proc, ready }
}

describe.skipIf(!hasBrowser && !inCi)("the inspector in a browser", () => {
  it("shows the tree, approves a child's call live, resumes after a daemon restart, and keeps workspaces apart", async () => {
    assert.isTrue(hasBrowser, `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium); .ci/run does`)
    mkdirSync(output, { recursive: true })
    const dir = mkdtempSync(join(tmpdir(), "troupe-inspector-"))
    const file = join(dir, "store.db")
    let daemon = startDaemon(file, 0, true)
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
    try {
      const { port, readOnly, root } = await daemon.ready
      const origin = `http://127.0.0.1:${port}`
      const context = await browser.newContext({ viewport: { width: 1280, height: 860 } })
      const page = await context.newPage()
      const requests: Array<string> = []
      page.on("request", (request) => requests.push(request.url()))

      await page.goto(`${origin}/`)
      // The token, asked once for the tab.
      await page.getByLabel("Bearer token (kept for this tab only)").fill(tokens.owner)
      await page.getByRole("button", { name: "Use token" }).click()
      const rootRow = page.locator(`tr[data-session="${root}"]`)
      await rootRow.getByRole("link", { name: "Clean up the logs" }).waitFor()
      // The row's turns, tokens and pending callbacks came with the page (summaries=true).
      assert.strictEqual(await rootRow.locator("td.num").first().textContent(), "1")
      await page.screenshot({ path: join(output, "list.png") })

      await rootRow.getByRole("link").click()
      const tree = page.getByRole("navigation", { name: "Subagent tree" })
      const guardedNode = tree.locator("a.node", { hasText: "guarded" })
      await guardedNode.locator(".badge", { hasText: "waiting" }).waitFor({ timeout: 15_000 })
      await tree.locator("a.node", { hasText: "helper" }).waitFor()
      await tree.screenshot({ path: join(output, "tree.png") })

      // A read-only listener (troupe inspect's) shows the same waiting call, with no way to answer or change it.
      const viewer = await browser.newContext()
      await viewer.addInitScript((token) => sessionStorage.setItem("troupe.inspector.token", token), tokens.owner)
      const viewing = await viewer.newPage()
      await viewing.goto(`http://127.0.0.1:${readOnly}/#/sessions/${root}`)
      await viewing.getByRole("navigation", { name: "Subagent tree" }).locator("a.node", { hasText: "guarded" }).click()
      const shown = viewing.getByRole("article", { name: "Approval delete_file" })
      await shown.getByText("Read-only").waitFor()
      assert.strictEqual(await shown.getByRole("button", { name: /^(Approve|Deny|Send result)$/ }).count(), 0)
      assert.strictEqual(await viewing.getByRole("button", { name: "Rename" }).count(), 0)
      assert.strictEqual(await viewing.locator("header.top .mode").textContent(), "read-only")
      await viewer.close()

      await guardedNode.click()
      const card = page.getByRole("article", { name: "Approval for delete_file" })
      await card.waitFor()
      await card.getByRole("button", { name: "Approve" }).click()
      await card.getByRole("status").filter({ hasText: "Accepted." }).waitFor()
      // The child's turn completes, live.
      await page.locator(".row.k-turn_end", { hasText: "turn completed" }).waitFor({ timeout: 15_000 })
      await page.locator(".row.k-tool", { hasText: "delete_file" }).locator(".badge", { hasText: "ok" }).waitFor()

      // The parent received both children's results and finished, without a reload.
      await page.getByRole("link", { name: "↑ parent" }).click()
      await page.locator(".row.k-child_result").nth(1).waitFor({ timeout: 15_000 })
      await page.locator(".row.k-turn_end", { hasText: "turn completed" }).waitFor({ timeout: 15_000 })
      await page.locator(".row.k-child_result").first().click()
      await page.getByRole("link", { name: "Open the child session →" }).waitFor()
      await page.screenshot({ path: join(output, "timeline.png") })
      const navigations = requests.filter((url) => url === `${origin}/`).length

      // The daemon dies: the banner shows; it comes back on the same port: the page resumes.
      daemon.proc.kill("SIGKILL")
      await page.locator("#banner").waitFor({ state: "visible", timeout: 20_000 })
      daemon = startDaemon(file, port, false)
      await daemon.ready
      await page.locator("#banner").waitFor({ state: "hidden", timeout: 20_000 })
      // The page works on without a reload: a rename through its header reaches the new daemon.
      await page.getByLabel("Title").fill("Logs cleaned")
      await page.getByRole("button", { name: "Rename" }).click()
      await page.getByRole("heading", { name: /Logs cleaned/ }).waitFor({ timeout: 15_000 })
      assert.strictEqual(requests.filter((url) => url === `${origin}/`).length, navigations, "no reload")

      // Every request of the page went to its own origin.
      assert.deepStrictEqual(requests.filter((url) => !url.startsWith(`${origin}/`)), [])

      // Another workspace's token sees none of it.
      const other = await browser.newContext()
      await other.addInitScript((token) => sessionStorage.setItem("troupe.inspector.token", token), tokens.stranger)
      const foreign = await other.newPage()
      await foreign.goto(`${origin}/`)
      await foreign.getByText("No sessions.").waitFor()
      await foreign.goto(`${origin}/#/sessions/${root}`)
      await foreign.getByRole("alert").filter({ hasText: `Could not open ${root}` }).waitFor()
      assert.strictEqual(await foreign.locator(".row").count(), 0)
    } finally {
      await browser.close()
      daemon.proc.kill("SIGKILL")
      rmSync(dir, { recursive: true, force: true })
    }
  }, 150_000)
})
