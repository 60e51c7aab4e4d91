/// <reference lib="dom" />
/**
 * One session on screen: its header (title, ids, status, agent path, rename,
 * archive), its root's subagent tree, its timeline and the pending callbacks
 * of it and its subtree, all live: the session's event stream (with
 * assistant deltas) feeds the timeline; the root's callback stream feeds the
 * cards and the tree's badges; the tree and header are re-read when an event
 * says something changed (and every few seconds, for sessions deeper in the
 * tree whose streams the page does not hold).
 *
 * A long session starts from its last `WINDOW` events; "Load earlier" pages
 * back by the same amount.
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { CallbacksView } from "./CallbacksView.js"
import { ago, badge, h, idView, ready, replace } from "./Dom.js"
import { limitsOf, Timeline } from "./Fold.js"
import { LiveStream } from "./Live.js"
import { durableOf, replay } from "./Replay.js"
import { TimelineView } from "./TimelineView.js"
import * as TreeView from "./TreeView.js"
import type { DurableEvent, PendingCallback, Session } from "./Types.js"

/** How many events a timeline starts with, and pages back by. */
export const WINDOW = 1000
const TREE_POLL_MS = 3000

/** The session page; `dispose()` closes its streams. */
export class SessionView {
  /** The page's content. */
  readonly element: HTMLElement
  private readonly header = h("header", { class: "session-head" })
  private readonly treeEl = h("nav", { class: "tree-pane", "aria-label": "Subagent tree" })
  private readonly earlier = h("div", { class: "earlier" })
  private readonly timelineView: TimelineView
  private readonly callbacks: CallbacksView
  private events: Array<DurableEvent> = []
  private timeline = new Timeline()
  private session: Session | undefined
  private tree: TreeView.Tree | undefined
  private from = 0
  private readonly streams: Array<LiveStream> = []
  private timer: ReturnType<typeof setInterval> | undefined
  private refreshing: ReturnType<typeof setTimeout> | undefined
  private disposed = false

  constructor(private readonly id: string, private readonly say: (text: string) => void) {
    this.callbacks = new CallbacksView(() => this.renderTree())
    this.timelineView = new TimelineView({ readArtifact: (seq) => this.readArtifact(seq) }, this.earlier)
    this.element = h("div", { class: "session-page" }, this.header,
      h("div", { class: "session-grid" }, this.treeEl, this.timelineView.element, this.callbacks.element))
    void this.start()
  }

  /** Closes the streams and timers. */
  dispose(): void {
    this.disposed = true
    for (const s of this.streams) s.close()
    if (this.timer !== undefined) clearInterval(this.timer)
    if (this.refreshing !== undefined) clearTimeout(this.refreshing)
  }

  private async start(): Promise<void> {
    try {
      const [{ session }, snap] = await Promise.all([
        Api.request<{ session: Session }>("GET", `/v1/sessions/${this.id}`),
        Api.request<{ cursor: number }>("GET", `/v1/sessions/${this.id}/snapshot`)
      ])
      if (this.disposed) return
      this.session = session
      this.timeline = new Timeline(limitsOf(session))
      this.renderHeader()
      this.from = Math.max(0, snap.cursor - WINDOW)
      this.renderEarlier()
      const head = snap.cursor
      if (head === this.from) ready("timeline")
      this.streams.push(new LiveStream(`/v1/sessions/${this.id}/events?volatile=true`, {
        onEvent: (event) => {
          if (event.event === "assistant_delta") {
            const delta = JSON.parse(event.data) as { event: { turnId: string; text: string } }
            const row = this.timeline.delta(delta.event.turnId, delta.event.text)
            if (row !== undefined) this.timelineView.update(this.timeline.rows, row)
            return
          }
          const durable = durableOf(event.data)
          if (durable === undefined) return
          if (durable.cursor <= this.timeline.cursor) return
          this.events.push(durable)
          this.timeline.add(durable)
          // The replay up to the head is shown once it is all in; what follows, as it comes.
          if (durable.cursor < head) return
          this.timelineView.update(this.timeline.rows)
          // The header and tree were read at the head: only what comes after it changes them.
          if (durable.cursor > head) this.noteChange(durable)
          else ready("timeline")
        },
        onEnd: (end) => this.say(`The session's event stream ended (${end.reason}).`)
      }, this.from))
      await this.refreshTree()
      if (this.disposed) return
      this.streams.push(new LiveStream(`/v1/sessions/${session.rootId}/callbacks/stream?kinds=approval,client_tool`, {
        onOpen: () => this.callbacks.reset(),
        onEvent: (event) => {
          if (event.event !== "callback") return
          const data = JSON.parse(event.data) as { callback?: PendingCallback } & PendingCallback
          this.callbacks.add(data.callback ?? data)
        }
      }))
      this.timer = setInterval(() => void this.refreshTree(), TREE_POLL_MS)
    } catch (error) {
      replace(this.header, h("p", { class: "error", role: "alert" }, `Could not open ${this.id}: ${String((error as Error).message)}`),
        h("p", {}, h("a", { href: "#/" }, "← All sessions")))
    }
  }

  /** Re-reads the header and tree soon after an event that changes them. */
  private noteChange(event: DurableEvent): void {
    const tag = event.record._tag
    if (tag === "operation_started" || tag === "operation_completed" || tag === "context_compacted") return
    if (this.refreshing !== undefined) return
    this.refreshing = setTimeout(() => {
      this.refreshing = undefined
      void this.refreshSession()
      void this.refreshTree()
    }, 150)
  }

  private async refreshSession(): Promise<void> {
    const { session } = await Api.request<{ session: Session }>("GET", `/v1/sessions/${this.id}`).catch(() => ({ session: this.session }))
    if (session === undefined || this.disposed) return
    this.session = session
    this.renderHeader()
  }

  private async refreshTree(): Promise<void> {
    if (this.session === undefined) return
    try {
      this.tree = await Api.request<TreeView.Tree>("GET", `/v1/sessions/${this.session.rootId}/tree${Api.query({ includeArchived: true })}`)
    } catch {
      return
    }
    if (this.disposed) return
    this.callbacks.filter(TreeView.subtreeOf(this.tree, this.id))
    this.renderTree()
    // Callbacks answered elsewhere: the sessions that had cards say which are still open.
    for (const sessionId of this.callbacks.sessions()) {
      const node = sessionId === this.tree.root.id ? this.tree.root : this.tree.nodes.find((n) => n.session.id === sessionId)?.session
      if (node !== undefined && node.status === "waiting") continue
      const open = await Api.request<{ items: ReadonlyArray<PendingCallback> }>("GET", `/v1/sessions/${sessionId}/callbacks`).catch(() => undefined)
      if (open !== undefined) this.callbacks.settle(sessionId, new Set(open.items.map((cb) => cb.callbackId)))
    }
  }

  private renderTree(): void {
    if (this.tree === undefined) return
    TreeView.render(this.treeEl, this.tree, this.id, this.callbacks.counts())
  }

  private renderHeader(): void {
    const s = this.session
    if (s === undefined) return
    const title = h("input", { type: "text", id: "session-title", value: s.title ?? "", placeholder: "untitled" })
    const rename = h("form", {
      class: "rename",
      onsubmit: (event) => {
        event.preventDefault()
        void this.patch({ title: title.value }, "Renamed.")
      }
    }, h("label", { for: "session-title" }, "Title"), title, h("button", { type: "submit" }, "Rename"))
    const archive = h("button", { type: "button", onclick: () => void this.patch({ archived: !s.archived }, s.archived ? "Unarchived." : "Archived.") },
      s.archived ? "Unarchive" : "Archive")
    replace(this.header,
      h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← All sessions"),
        s.parentId !== null ? h("span", {}, " · ", h("a", { href: `#/sessions/${s.parentId}` }, "↑ parent")) : null,
        s.rootId !== s.id ? h("span", {}, " · ", h("a", { href: `#/sessions/${s.rootId}` }, "⌂ root")) : null),
      h("h1", {}, s.title ?? s.alias ?? s.agent.name, " ", badge(s.status), s.archived ? badge("archived") : null),
      h("p", { class: "meta" }, idView(s.id), ` · ${s.agentPath.join(" › ")}`, s.alias !== null ? ` · alias ${s.alias}` : "",
        ` · updated ${ago(s.updatedAt)} · head cursor ${s.headSeq}`, s.activeTurnId !== null ? h("span", {}, " · turn ", idView(s.activeTurnId)) : null),
      Api.writes() === "all" ? h("div", { class: "actions" }, rename, archive) : null)
  }

  private async patch(body: { title?: string; archived?: boolean }, done: string): Promise<void> {
    try {
      const { session } = await Api.request<{ session: Session }>("PATCH", `/v1/sessions/${this.id}`, body)
      this.session = session
      this.renderHeader()
      this.say(done)
    } catch (error) {
      this.say(`Refused: ${String((error as Error).message)}`)
    }
  }

  private renderEarlier(): void {
    if (this.from === 0) {
      replace(this.earlier)
      return
    }
    const button = h("button", { type: "button", onclick: () => void this.loadEarlier(button) }, `Load earlier events (${this.from} before)`)
    replace(this.earlier, button)
  }

  private async loadEarlier(button: HTMLButtonElement): Promise<void> {
    button.disabled = true
    const upTo = this.from
    const start = Math.max(0, upTo - WINDOW)
    const older: Array<DurableEvent> = []
    try {
      await replay(this.id, start, (e) => {
        if (e.cursor <= upTo) older.push(e)
      }, (e) => e.cursor >= upTo)
    } catch (error) {
      button.disabled = false
      this.say(`Could not load earlier events: ${String((error as Error).message)}`)
      return
    }
    this.from = start
    this.events = [...older, ...this.events]
    const key = this.timelineView.selectedKey()
    const timeline = new Timeline(limitsOf(this.session ?? {}))
    for (const e of this.events) timeline.add(e)
    this.timeline = timeline
    this.renderEarlier()
    this.timelineView.update(timeline.rows)
    this.timelineView.selectKey(key)
  }

  private async readArtifact(seq: number): Promise<string> {
    let text: string | undefined
    await replay(this.id, seq - 1, (e) => {
      if (e.cursor === seq && e.record._tag === "operation_completed") {
        const out = e.record.output as { error?: unknown } | string
        text = typeof out === "string" ? out : JSON.stringify(out, null, 2)
      }
    }, (e) => e.cursor >= seq)
    if (text === undefined) throw new Error(`no receipt at cursor ${seq}`)
    return text
  }
}
