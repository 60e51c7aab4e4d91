/// <reference lib="dom" />
/**
 * A few DOM helpers: elements from a tag, attributes and children; a copy
 * button; relative times. No framework: the page is small enough.
 *
 * @since 0.3.0
 */

/** Attributes of `h`: strings, booleans (present or not), or event handlers (`on…`). */
export type Attrs = Readonly<Record<string, string | number | boolean | undefined | ((event: Event) => void)>>

/** A child of `h`: a node, text, or nothing. */
export type Child = Node | string | number | undefined | null | false

/** An element with attributes and children. */
export const h = <K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: ReadonlyArray<Child>): HTMLElementTagNameMap[K] => {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue
    if (typeof value === "function") el.addEventListener(name.slice(2).toLowerCase(), value)
    else if (value === true) el.setAttribute(name, "")
    else el.setAttribute(name, String(value))
  }
  append(el, children)
  return el
}

/** Appends children (text becomes text nodes). */
export const append = (el: Node, children: ReadonlyArray<Child>): void => {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)))
  }
}

/** Replaces an element's children. */
export const replace = (el: Element, ...children: ReadonlyArray<Child>): void => {
  el.textContent = ""
  append(el, children)
}

/**
 * A button that copies `text` (an id or a cursor) and says so. Its icon is
 * drawn by the stylesheet (`.copy::before`): a glyph such as ⧉ is in few
 * fonts, and looking for one that has it made laying out a page of ids slow.
 */
export const copyButton = (text: string, label = "Copy"): HTMLButtonElement => {
  const button = h("button", {
    type: "button",
    class: "copy",
    "aria-label": `${label} ${text}`,
    title: `Copy ${text}`,
    onclick: (event) => {
      event.stopPropagation()
      void navigator.clipboard?.writeText(text).then(
        () => flash(button, "Copied"),
        () => flash(button, "Select and copy")
      )
    }
  })
  return button
}

const flash = (el: HTMLElement, text: string) => {
  el.dataset.said = text
  setTimeout(() => delete el.dataset.said, 1200)
}

/** An id shown in monospace with its copy button. */
export const idView = (id: string): HTMLElement => h("span", { class: "id" }, h("code", {}, id), copyButton(id))

/** "3 s ago", "5 min ago", or the date, for a time in epoch milliseconds. */
export const ago = (at: number, now = Date.now()): string => {
  const s = Math.max(0, Math.round((now - at) / 1000))
  if (s < 60) return `${s} s ago`
  if (s < 3600) return `${Math.round(s / 60)} min ago`
  if (s < 86400) return `${Math.round(s / 3600)} h ago`
  return new Date(at).toISOString().slice(0, 16).replace("T", " ")
}

/** A status badge. */
export const badge = (status: string): HTMLElement => h("span", { class: `badge s-${status}` }, status)

/**
 * Says the page shows `what` (`list`, `timeline`): `data-ready` on the body
 * (tests wait for it), and a `troupe:<what>` performance mark once the browser
 * has painted it and is free again (bench/inspector.ts reads it).
 */
export const ready = (what: string): void => {
  if (document.body.dataset.ready === what) return
  document.body.dataset.ready = what
  requestAnimationFrame(() => setTimeout(() => performance.mark(`troupe:${what}`), 0))
}
