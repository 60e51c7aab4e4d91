/// <reference lib="dom" />
/**
 * A session's subagent tree: the root and every session below it, each with
 * its status, alias, agent path and pending callbacks, as nested lists of
 * links (Tab and Enter reach any node; the one on screen is
 * `aria-current`).
 *
 * @since 0.3.0
 */
import { badge, h, replace } from "./Dom.js"
import type { Session, TreeNode } from "./Types.js"

/** A tree answer: `{ root, nodes }`. */
export interface Tree {
  readonly root: Session
  readonly nodes: ReadonlyArray<TreeNode>
}

/** The ids of `id` and every session below it in `tree`. */
export const subtreeOf = (tree: Tree, id: string): ReadonlySet<string> => {
  const children = new Map<string, Array<string>>()
  for (const node of tree.nodes) {
    const list = children.get(node.parentId) ?? []
    list.push(node.session.id)
    children.set(node.parentId, list)
  }
  const out = new Set<string>()
  const walk = (at: string) => {
    out.add(at)
    for (const child of children.get(at) ?? []) walk(child)
  }
  walk(id)
  return out
}

/** Renders `tree` into `el`; `pending` counts open callbacks by session id. */
export const render = (el: HTMLElement, tree: Tree, current: string, pending: ReadonlyMap<string, number>): void => {
  const byParent = new Map<string, Array<TreeNode>>()
  for (const node of tree.nodes) {
    const list = byParent.get(node.parentId) ?? []
    list.push(node)
    byParent.set(node.parentId, list)
  }
  const item = (session: Session, alias: string | null, path: ReadonlyArray<string>): HTMLElement => {
    const kids = byParent.get(session.id) ?? []
    const waiting = pending.get(session.id) ?? 0
    const label = alias ?? session.title ?? session.agent.name
    return h("li", { "data-session": session.id },
      h("a", {
        href: `#/sessions/${session.id}`,
        class: "node",
        "aria-current": session.id === current ? "page" : undefined,
        "aria-label": `${label}, ${session.status}${waiting > 0 ? `, ${waiting} pending` : ""}`
      },
        badge(session.status),
        h("span", { class: "alias" }, label),
        h("span", { class: "path" }, path.join(" › ")),
        waiting > 0 ? h("span", { class: "pending", title: "pending callbacks" }, `⏳ ${waiting}`) : null),
      kids.length > 0 ? h("ul", {}, ...kids.map((k) => item(k.session, k.alias, k.agentPath))) : null)
  }
  replace(el, h("ul", { class: "tree", "aria-label": "Subagent tree" }, item(tree.root, tree.root.alias, tree.root.agentPath)))
}
