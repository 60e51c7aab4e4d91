/// <reference lib="dom" />
/**
 * The root sessions, newest first, a page at a time (`nextCursor`), with
 * status, agent, title, last activity, turns, tokens and pending callbacks;
 * filters by status, agent and archived; a search by id (read directly) or
 * title; rename and archive on each row (unless the listener is read-only).
 *
 * Turns, tokens and pending callbacks come with the page
 * (`summaries=true`: the server counts them from each session's log, and
 * keeps the counts). Status, agent and title filters apply to the sessions
 * loaded: while fewer than a page of them match, further pages are read, up
 * to `SCAN` sessions at a time ("Look further" reads on).
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { ago, badge, h, idView, ready, replace } from "./Dom.js"
import type { Session, SessionPage, Summary } from "./Types.js"

const PAGE = 50
/** The most sessions read at a time to fill a filtered page. */
const SCAN = 1000
/** Rename and archive, unless the listener is read-only. */
const editable = Api.writes() === "all"

/** The list page; `dispose()` ends its loading. */
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
  private readonly summaries = new Map<string, Summary>()
  private next: string | undefined
  private found: Session | undefined
  private loading: Promise<void> | undefined
  private generation = 0
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
    for (const el of [this.status, this.agent]) el.addEventListener("change", () => void this.fill())
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

  /** Ends loading. */
  dispose(): void {
    this.disposed = true
  }

  private async loadAgents(): Promise<void> {
    const agents = await Api.request<{ items: ReadonlyArray<{ name: string }> }>("GET", "/v1/agents").catch(() => ({ items: [] }))
    for (const a of agents.items) this.addAgent(a.name)
  }

  private addAgent(name: string): void {
    if (Array.from(this.agent.options).some((o) => o.value === name)) return
    this.agent.append(h("option", { value: name }, name))
  }

  private async reload(): Promise<void> {
    this.generation++
    this.sessions = []
    this.next = undefined
    this.loading = undefined
    await this.loadPage(true)
    ready("list")
    await this.fill()
  }

  /** Reads the next page (the first with `first`); one read at a time. */
  private async loadPage(first = false): Promise<boolean> {
    if (this.loading !== undefined) {
      await this.loading
      return true
    }
    if (!first && this.next === undefined) return false
    const generation = this.generation
    const read = async () => {
      try {
        const page = await Api.request<SessionPage>("GET", `/v1/sessions${Api.query({
          limit: PAGE,
          includeArchived: this.archived.checked || undefined,
          cursor: this.next,
          summaries: true
        })}`)
        if (this.disposed || generation !== this.generation) return
        this.sessions.push(...page.items)
        for (const [id, summary] of Object.entries(page.summaries ?? {})) this.summaries.set(id, summary)
        this.next = page.nextCursor
        for (const s of page.items) this.addAgent(s.agent.name)
        this.render()
      } catch (error) {
        this.next = undefined
        this.say(`Could not list sessions: ${String((error as Error).message)}`)
      }
    }
    this.loading = read().finally(() => (this.loading = undefined))
    await this.loading
    return true
  }

  /** Reads on while a filter leaves fewer than `target` sessions shown, up to `SCAN` sessions. */
  private async fill(target = PAGE): Promise<void> {
    this.render()
    const generation = this.generation
    for (let read = 0; read < SCAN && this.next !== undefined && this.filtering() && this.visible().length < target; read += PAGE) {
      if (!(await this.loadPage()) || this.disposed || generation !== this.generation) return
    }
  }

  private async searchNow(): Promise<void> {
    const q = this.search.value.trim()
    this.found = undefined
    if (/^ses_[0-9A-Z]{26}$/i.test(q)) {
      const got = await Api.request<{ session: Session }>("GET", `/v1/sessions/${q}`).catch(() => undefined)
      this.found = got?.session
      if (got === undefined) this.say(`No session ${q} in this workspace.`)
      this.render()
      return
    }
    await this.fill()
  }

  /** Whether a filter or a search narrows what is shown. */
  private filtering(): boolean {
    return this.status.value !== "any" || this.agent.value !== "any" || this.search.value.trim() !== ""
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
      ? h("button", { type: "button", onclick: () => void (this.filtering() ? this.fill(rows.length + PAGE) : this.loadPage()) },
        this.filtering() ? "Look further" : `Load ${PAGE} more`)
      : null)
  }

  private row(s: Session): HTMLElement {
    const summary = this.summaries.get(s.id)
    const cell = (f: (t: Summary) => number) => (summary === undefined ? "—" : String(f(summary)))
    const title = s.title ?? "(untitled)"
    return h("tr", { "data-session": s.id },
      h("td", {}, h("a", { href: `#/sessions/${s.id}` }, title)),
      h("td", {}, badge(s.status), s.archived ? badge("archived") : null),
      h("td", {}, s.agent.name),
      h("td", { title: new Date(s.updatedAt).toISOString() }, ago(s.updatedAt)),
      h("td", { class: "num" }, cell((x) => x.turns)),
      h("td", { class: "num" }, cell((x) => x.totalTokens)),
      h("td", { class: "num" }, cell((x) => x.pendingCallbacks)),
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
}
