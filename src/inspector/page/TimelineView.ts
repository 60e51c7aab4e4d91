/// <reference lib="dom" />
/**
 * The timeline of one session on screen: a list of one-line rows of fixed
 * height, of which only those in view (and a margin) are in the DOM, so a
 * session of thousands of steps scrolls as one of ten; the selected row's
 * detail (fields, long texts, the child it links to, archived artifacts)
 * shows beside it. Arrow keys move the selection, Home/End jump.
 *
 * @since 0.3.0
 */
import { badge, copyButton, h, idView, replace } from "./Dom.js"
import type { Row } from "./Fold.js"

const ROW_HEIGHT = 36
const MARGIN = 12

/** What the view asks of its owner. */
export interface TimelineHost {
  /** Reads an archived artifact's full text. */
  readonly readArtifact: (seq: number) => Promise<string>
}

/** The rendered timeline; `update` after the rows changed. */
export class TimelineView {
  /** The list (scrolls) and the detail pane. */
  readonly element: HTMLElement
  private readonly scroller: HTMLElement
  private readonly spacer: HTMLElement
  private readonly detail: HTMLElement
  private rows: ReadonlyArray<Row> = []
  private selected = -1
  private follow = true
  private frame = 0

  constructor(private readonly host: TimelineHost, header: HTMLElement) {
    this.spacer = h("div", { class: "spacer", role: "list", "aria-label": "Turns and steps" })
    this.scroller = h("div", { class: "timeline", tabindex: 0, "aria-label": "Timeline (arrow keys move, Enter opens)" }, this.spacer)
    this.detail = h("section", { class: "detail", "aria-label": "Selected step", "aria-live": "polite" },
      h("p", { class: "muted" }, "Select a step to see its detail."))
    this.element = h("div", { class: "timeline-pane" }, h("div", { class: "timeline-col" }, header, this.scroller), this.detail)
    this.scroller.addEventListener("scroll", () => {
      this.follow = this.scroller.scrollTop + this.scroller.clientHeight >= this.scroller.scrollHeight - ROW_HEIGHT
      this.schedule()
    })
    this.scroller.addEventListener("keydown", (event) => this.key(event))
    new ResizeObserver(() => this.schedule()).observe(this.scroller)
  }

  /**
   * Shows `rows` (the same array, grown or changed in place, or a new one) at
   * the next frame: a replay of thousands of events lays the list out once a
   * frame, not once an event.
   */
  update(rows: ReadonlyArray<Row>, changed?: Row): void {
    this.rows = rows
    // A style write only; reading the new layout (to follow the end) waits for the frame.
    this.spacer.style.height = `${rows.length * ROW_HEIGHT}px`
    this.schedule()
    if (changed !== undefined && this.rows[this.selected] === changed) this.showDetail(changed)
    else if (changed === undefined && this.selected >= 0 && this.rows[this.selected] !== undefined) this.showDetail(this.rows[this.selected]!)
  }

  /** Selects the row with `key` (after a reload, keeps the user's place). */
  selectKey(key: string | undefined): void {
    const at = key === undefined ? -1 : this.rows.findIndex((r) => r.key === key)
    if (at >= 0) this.select(at, true)
  }

  /** The selected row's key. */
  selectedKey(): string | undefined {
    return this.rows[this.selected]?.key
  }

  private schedule(): void {
    if (this.frame !== 0) return
    this.frame = requestAnimationFrame(() => {
      this.frame = 0
      this.render()
    })
  }

  private render(): void {
    if (this.follow) this.scroller.scrollTop = this.scroller.scrollHeight
    const top = this.scroller.scrollTop
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - MARGIN)
    const last = Math.min(this.rows.length, Math.ceil((top + this.scroller.clientHeight) / ROW_HEIGHT) + MARGIN)
    const items: Array<HTMLElement> = []
    for (let i = first; i < last; i++) items.push(this.rowElement(this.rows[i]!, i))
    replace(this.spacer, ...items)
  }

  private rowElement(row: Row, index: number): HTMLElement {
    const selected = index === this.selected
    const el = h("div", {
      class: `row k-${row.kind}${selected ? " selected" : ""}${row.turnId !== undefined ? "" : " no-turn"}`,
      role: "listitem",
      "aria-selected": selected ? "true" : "false",
      "data-key": row.key,
      "data-kind": row.kind,
      onclick: () => this.select(index, false)
    },
      h("span", { class: "seq", title: `cursor ${row.cursor}` }, `#${row.cursor}`),
      h("span", { class: "title" }, row.title),
      row.status !== undefined ? badge(row.status) : null,
      h("span", { class: "summary" }, row.summary))
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    el.style.top = `${index * ROW_HEIGHT}px`
    return el
  }

  private key(event: KeyboardEvent): void {
    const moves: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 }
    if (event.key in moves) this.select(Math.max(0, Math.min(this.rows.length - 1, (this.selected < 0 ? this.rows.length : this.selected) + moves[event.key]!)), true)
    else if (event.key === "Home") this.select(0, true)
    else if (event.key === "End") this.select(this.rows.length - 1, true)
    else if (event.key === "Enter" && this.selected >= 0) (this.detail.querySelector("a,button") as HTMLElement | null)?.focus()
    else return
    event.preventDefault()
  }

  private select(index: number, reveal: boolean): void {
    const row = this.rows[index]
    if (row === undefined) return
    this.selected = index
    if (reveal) {
      const top = index * ROW_HEIGHT
      if (top < this.scroller.scrollTop) this.scroller.scrollTop = top
      else if (top + ROW_HEIGHT > this.scroller.scrollTop + this.scroller.clientHeight) this.scroller.scrollTop = top + ROW_HEIGHT - this.scroller.clientHeight
    }
    this.follow = index === this.rows.length - 1
    this.render()
    this.showDetail(row)
  }

  private showDetail(row: Row): void {
    const fields = h("dl", {}, h("dt", {}, "cursor"), h("dd", {}, h("span", { class: "id" }, h("code", {}, String(row.cursor)), copyButton(String(row.cursor), "Copy cursor"))),
      h("dt", {}, "at"), h("dd", {}, new Date(row.at).toISOString()),
      ...(row.turnId !== undefined ? [h("dt", {}, "turn"), h("dd", {}, idView(row.turnId))] : []),
      ...row.fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, /^(ses|op|cb|turn|in)_/.test(v) ? idView(v) : v)]))
    const blocks = row.blocks.map((b) => h("div", { class: "block" }, h("h4", {}, b.label), h("pre", { tabindex: 0 }, b.text)))
    const link = row.link !== undefined ? h("p", {}, h("a", { href: `#/sessions/${row.link}`, class: "child-link" }, "Open the child session →")) : null
    const artifacts = row.artifacts.length === 0 ? null : h("div", { class: "block" }, h("h4", {}, "archived tool results"),
      h("ul", {}, ...row.artifacts.map((a) => {
        const out = h("pre", { hidden: true, tabindex: 0 })
        const button = h("button", {
          type: "button",
          onclick: () => {
            button.disabled = true
            this.host.readArtifact(a.seq).then((text) => {
              out.textContent = text
              out.hidden = false
            }, (error) => {
              out.textContent = `could not read it: ${String(error?.message ?? error)}`
              out.hidden = false
            })
          }
        }, `Read ${a.toolName} (${a.chars} chars)`)
        return h("li", {}, button, " ", idView(a.artifactId), out)
      })))
    replace(this.detail, h("h3", {}, row.title, row.status !== undefined ? badge(row.status) : null), link, fields, ...blocks, artifacts)
  }
}
