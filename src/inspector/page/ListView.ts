/// <reference lib="dom" />
/**
 * The root sessions, newest first, a page at a time (`nextCursor`), with
 * status, agent, title, last activity, turns, tokens and pending callbacks;
 * filters by status, agent and archived; a search by id (read directly) or
 * title; rename and archive on each row.
 *
 * The API lists roots without their totals, so turns, tokens and pending
 * callbacks are counted from each shown row's log (two at a time, and only
 * for logs up to `COUNT_LIMIT` events: a longer one says so). Status, agent
 * and title filters apply to the sessions loaded so far.
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { ago, badge, h, idView, replace } from "./Dom.js"
import { type Totals, Timeline } from "./Fold.js"
import { replay } from "./Replay.js"
import type { Page, Session } from "./Types.js"

const PAGE = 50
/** Rename and archive, unless the listener is read-only. */
const editable = Api.writes() === "all"
const COUNT_LIMIT = 5000
const totals = new Map<string, Totals | "too long" | "error">()

/** The list page; `dispose()` stops its counting. */
export class ListView {
  /** The page's content. */
  readonly element: HTMLElement
  private readonly body = h("tbody")
  private readonly more = h("div", { class: "more" })
  private readonly note = h("p", { class: "muted", role: "status" })
  private readonly status = h("select", { id: "f-status" })
  private readonly agent = h("select", { id: "f-agent" })
  private readonly archived = h("input", { type: "checkbox", id: "f-archived" })
  private readonly search = h("input", { type: "search", id: "f-search", placeholder: "ses_… or words of a title" })
  private sessions: Array<Session> = []
  private next: string | undefined
  private found: Session | undefined
  private queue: Array<Session> = []
  private counting = 0
  private disposed = false

  constructor(private readonly say: (text: string) => void) {
    for (const s of ["any", "idle", "running", "waiting", "closed"]) this.status.append(h("option", { value: s }, s))
    this.agent.append(h("option", { value: "any" }, "any"))
    const filters = h("form", { class: "filters", role: "search", onsubmit: (e) => (e.preventDefault(), void this.searchNow()) },
      h("label", { for: "f-search" }, "Search"), this.search,
      h("label", { for: "f-status" }, "Status"), this.status,
      h("label", { for: "f-agent" }, "Agent"), this.agent,
      h("span", {}, this.archived, h("label", { for: "f-archived" }, " Archived too")),
      h("button", { type: "button", onclick: () => void this.reload() }, "Refresh"))
    for (const el of [this.status, this.agent]) el.addEventListener("change", () => this.render())
    this.archived.addEventListener("change", () => void this.reload())
    this.search.addEventListener("input", () => void this.searchNow())
    const columns = ["Title", "Status", "Agent", "Last activity", "Turns", "Tokens", "Pending", "Id", ...(editable ? ["Actions"] : [])]
    const table = h("table", { class: "sessions" },
      h("caption", { class: "sr-only" }, "Root sessions, newest first"),
      h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c)))),
      this.body)
    this.element = h("div", { class: "list-page" }, h("h1", {}, "Sessions"), filters, this.note, h("div", { class: "table-wrap" }, table), this.more)
    void this.loadAgents()
    void this.reload()
  }

  /** Stops counting. */
  dispose(): void {
    this.disposed = true
  }

  private async loadAgents(): Promise<void> {
    const agents = await Api.request<Page<{ name: string }>>("GET", "/v1/agents").catch(() => ({ items: [] }))
    for (const a of agents.items) this.addAgent(a.name)
  }

  private addAgent(name: string): void {
    if (Array.from(this.agent.options).some((o) => o.value === name)) return
    this.agent.append(h("option", { value: name }, name))
  }

  private async reload(): Promise<void> {
    this.sessions = []
    this.next = undefined
    await this.loadMore()
  }

  private async loadMore(): Promise<void> {
    try {
      const page = await Api.request<Page<Session>>("GET", `/v1/sessions${Api.query({ limit: PAGE, includeArchived: this.archived.checked || undefined, cursor: this.next })}`)
      if (this.disposed) return
      this.sessions.push(...page.items)
      this.next = page.nextCursor
      for (const s of page.items) this.addAgent(s.agent.name)
      this.render()
      document.body.dataset.ready = "list"
    } catch (error) {
      this.say(`Could not list sessions: ${String((error as Error).message)}`)
    }
  }

  private async searchNow(): Promise<void> {
    const q = this.search.value.trim()
    this.found = undefined
    if (/^ses_[0-9A-Z]{26}$/i.test(q)) {
      const got = await Api.request<{ session: Session }>("GET", `/v1/sessions/${q}`).catch(() => undefined)
      this.found = got?.session
      if (got === undefined) this.say(`No session ${q} in this workspace.`)
    }
    this.render()
  }

  private visible(): ReadonlyArray<Session> {
    if (this.found !== undefined) return [this.found]
    const q = this.search.value.trim().toLowerCase()
    return this.sessions.filter((s) =>
      (this.status.value === "any" || s.status === this.status.value) &&
      (this.agent.value === "any" || s.agent.name === this.agent.value) &&
      (q === "" || s.id.toLowerCase().includes(q) || (s.title ?? "").toLowerCase().includes(q)))
  }

  private render(): void {
    const rows = this.visible()
    replace(this.body, ...(rows.length > 0 ? rows.map((s) => this.row(s)) : [h("tr", {}, h("td", { colspan: editable ? 9 : 8, class: "muted" }, "No sessions."))]))
    replace(this.note, `${rows.length} shown of ${this.sessions.length} loaded${this.next !== undefined ? " (more below)" : ""}`)
    replace(this.more, this.next !== undefined
      ? h("button", { type: "button", onclick: () => void this.loadMore() }, `Load ${PAGE} more`)
      : null)
    this.queue = rows.filter((s) => !totals.has(key(s)))
    for (let i = this.counting; i < 2; i++) void this.countNext()
  }

  private row(s: Session): HTMLElement {
    const t = totals.get(key(s))
    const cell = (f: (t: Totals) => string) => (t === undefined ? "…" : typeof t === "string" ? "—" : f(t))
    const title = s.title ?? "(untitled)"
    return h("tr", { "data-session": s.id },
      h("td", {}, h("a", { href: `#/sessions/${s.id}` }, title)),
      h("td", {}, badge(s.status), s.archived ? badge("archived") : null),
      h("td", {}, s.agent.name),
      h("td", { title: new Date(s.updatedAt).toISOString() }, ago(s.updatedAt)),
      h("td", { class: "num", title: t === "too long" ? `over ${COUNT_LIMIT} events: open it` : undefined }, cell((x) => String(x.turns))),
      h("td", { class: "num" }, cell((x) => String(x.totalTokens))),
      h("td", { class: "num" }, cell((x) => String(x.pendingCallbacks))),
      h("td", {}, idView(s.id)),
      !editable ? null : h("td", { class: "actions" },
        h("button", { type: "button", "aria-label": `Rename ${title}`, onclick: () => void this.rename(s) }, "Rename"),
        h("button", { type: "button", "aria-label": `${s.archived ? "Unarchive" : "Archive"} ${title}`, onclick: () => void this.patch(s, { archived: !s.archived }) },
          s.archived ? "Unarchive" : "Archive")))
  }

  private async rename(s: Session): Promise<void> {
    const title = window.prompt("New title", s.title ?? "")
    if (title === null) return
    await this.patch(s, { title })
  }

  private async patch(s: Session, body: { title?: string; archived?: boolean }): Promise<void> {
    try {
      const { session } = await Api.request<{ session: Session }>("PATCH", `/v1/sessions/${s.id}`, body)
      this.sessions = this.sessions.map((x) => (x.id === s.id ? session : x)).filter((x) => this.archived.checked || !x.archived)
      if (this.found?.id === s.id) this.found = session
      this.render()
      this.say(body.title !== undefined ? "Renamed." : session.archived ? "Archived." : "Unarchived.")
    } catch (error) {
      this.say(`Refused: ${String((error as Error).message)}`)
    }
  }

  private async countNext(): Promise<void> {
    const s = this.queue.shift()
    if (s === undefined || this.disposed) return
    this.counting++
    try {
      if (totals.has(key(s))) return
      if (s.headSeq > COUNT_LIMIT) {
        totals.set(key(s), "too long")
        return
      }
      const timeline = new Timeline()
      await replay(s.id, 0, (e) => timeline.add(e), (e) => e.cursor >= s.headSeq).catch(() => totals.set(key(s), "error"))
      if (!totals.has(key(s))) totals.set(key(s), timeline.totals)
    } finally {
      this.counting--
      if (!this.disposed) {
        const tr = this.body.querySelector(`tr[data-session="${s.id}"]`)
        if (tr !== null) tr.replaceWith(this.row(this.sessions.find((x) => x.id === s.id) ?? s))
        void this.countNext()
      }
    }
  }
}

const key = (s: Session) => `${s.id}@${s.headSeq}`
