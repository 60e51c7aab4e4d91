/// <reference lib="dom" />
/**
 * Pending callbacks of a session and its subtree, from the root's provider
 * stream (`callbacks/stream`): approvals with Approve / Deny (and a reason),
 * client-tool calls with a JSON answer. The first answer wins: a refused one
 * (`stale_callback`, or `forbidden` on a read-only inspector) stays on the
 * card with why.
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { h, idView, replace } from "./Dom.js"
import { pretty } from "./Fold.js"
import type { PendingCallback } from "./Types.js"

/** The cards, keyed by callback id. */
export class CallbacksView {
  /** The panel. */
  readonly element: HTMLElement
  private readonly list: HTMLElement
  private readonly open = new Map<string, PendingCallback>()
  private readonly said = new Map<string, string>()
  private shown: ReadonlySet<string> = new Set()

  constructor(private readonly changed: () => void) {
    this.list = h("div", { class: "cards" })
    this.element = h("section", { class: "callbacks", "aria-label": "Pending callbacks" }, h("h2", {}, "Pending callbacks"), this.list)
  }

  /** Open callbacks per session id (the tree's badges). */
  counts(): ReadonlyMap<string, number> {
    const out = new Map<string, number>()
    for (const cb of this.open.values()) out.set(cb.sessionId, (out.get(cb.sessionId) ?? 0) + 1)
    return out
  }

  /** The sessions with open callbacks. */
  sessions(): ReadonlySet<string> {
    return new Set([...this.open.values()].map((cb) => cb.sessionId))
  }

  /** The provider stream reopened: it sends every open callback again. */
  reset(): void {
    this.open.clear()
    this.render()
  }

  /** A callback the stream sent. */
  add(callback: PendingCallback): void {
    this.open.set(callback.callbackId, callback)
    this.render()
    this.changed()
  }

  /** Drops callbacks of `sessionId` that are no longer open (`still` lists those that are). */
  settle(sessionId: string, still: ReadonlySet<string>): void {
    let any = false
    for (const [id, cb] of this.open) {
      if (cb.sessionId === sessionId && !still.has(id)) {
        this.open.delete(id)
        any = true
      }
    }
    if (any) {
      this.render()
      this.changed()
    }
  }

  /** Shows only the callbacks of these sessions (the current one and its subtree). */
  filter(sessions: ReadonlySet<string>): void {
    this.shown = sessions
    this.render()
  }

  private render(): void {
    const cards = [...this.open.values()].filter((cb) => this.shown.has(cb.sessionId)).map((cb) => this.card(cb))
    replace(this.list, ...(cards.length > 0 ? cards : [h("p", { class: "muted" }, "None.")]))
  }

  private card(cb: PendingCallback): HTMLElement {
    const status = h("p", { class: "said", role: "status" }, this.said.get(cb.callbackId) ?? "")
    const request = cb.request as { toolName: string; arguments: string }
    const answer = async (result: unknown, buttons: ReadonlyArray<HTMLButtonElement>) => {
      for (const b of buttons) b.disabled = true
      try {
        await Api.request("POST", `/v1/sessions/${cb.sessionId}/callbacks/${cb.callbackId}/answer`, { result, turnId: cb.turnId, operationId: cb.operationId })
        this.said.set(cb.callbackId, "Accepted.")
        status.textContent = "Accepted."
        setTimeout(() => {
          this.open.delete(cb.callbackId)
          this.render()
          this.changed()
        }, 800)
      } catch (error) {
        const problem = error instanceof Api.ProblemError ? error.problem : undefined
        const why = problem === undefined ? String(error) : staleReason(problem)
        this.said.set(cb.callbackId, why)
        status.textContent = why
        status.classList.add("error")
        for (const b of buttons) b.disabled = problem?.kind === "stale_callback"
      }
    }
    const head = h("header", {}, h("strong", {}, cb.kind === "approval" ? `Approve ${request.toolName}?` : `Run ${request.toolName} (client tool)`),
      h("span", { class: "path" }, cb.agentPath.join(" › ")))
    const meta = h("p", { class: "meta" }, h("a", { href: `#/sessions/${cb.sessionId}` }, "session"), " ", idView(cb.sessionId), " callback ", idView(cb.callbackId))
    const args = h("pre", { tabindex: 0 }, pretty(request.arguments))
    if (Api.writes() === "none") {
      // A read-only inspector shows what waits, and how to answer it.
      return h("article", { class: "card", "data-callback": cb.callbackId, "aria-label": `${cb.kind === "approval" ? "Approval" : "Client tool"} ${request.toolName}` },
        head, meta, args, h("p", { class: "muted" }, "Read-only: start troupe inspect with --allow-answers (or use the daemon) to answer it."))
    }
    if (cb.kind === "approval") {
      const reason = h("input", { type: "text", id: `reason-${cb.callbackId}`, placeholder: "shown to the model with a denial" })
      const approve = h("button", { type: "button", class: "primary", onclick: () => answer({ decision: "approve" }, [approve, deny]) }, "Approve")
      const deny = h("button", {
        type: "button",
        class: "danger",
        onclick: () => answer(reason.value.trim() === "" ? { decision: "deny" } : { decision: "deny", reason: reason.value.trim() }, [approve, deny])
      }, "Deny")
      return h("article", { class: "card", "data-callback": cb.callbackId, "aria-label": `Approval for ${request.toolName}` }, head, meta, args,
        h("label", { for: `reason-${cb.callbackId}` }, "Reason (optional)"), reason, h("div", { class: "actions" }, approve, deny), status)
    }
    const area = h("textarea", { id: `answer-${cb.callbackId}`, rows: 4, spellcheck: "false" }, '{ "output": "" }')
    const send = h("button", {
      type: "button",
      class: "primary",
      onclick: () => {
        let parsed: unknown
        try {
          parsed = JSON.parse(area.value)
        } catch (error) {
          status.textContent = `not JSON: ${String((error as Error).message)}`
          return
        }
        void answer(parsed, [send])
      }
    }, "Send result")
    return h("article", { class: "card", "data-callback": cb.callbackId, "aria-label": `Client tool ${request.toolName}` }, head, meta, args,
      h("label", { for: `answer-${cb.callbackId}` }, "Answer (JSON: { output, isError? })"), area, h("div", { class: "actions" }, send), status)
  }
}

/** Why an answer was refused, in words. */
const staleReason = (problem: Api.ProblemError["problem"]): string => {
  if (problem.kind === "stale_callback") {
    const reason = (problem.details as { reason?: string } | undefined)?.reason
    return `Too late: ${problem.message}${reason !== undefined ? ` (${reason})` : ""}`
  }
  if (problem.kind === "forbidden") return `Refused: ${problem.message}`
  return `Failed (${problem.kind}): ${problem.message}`
}
