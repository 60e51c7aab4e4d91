/**
 * `troupe sessions tree`: the session and everything below it, indented by depth.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import type * as Messages from "../../protocol/Messages.js"
import type { Session } from "../../schema/Session.js"
import * as Connect from "../Connect.js"
import * as Output from "../Output.js"
import { json, sessionId } from "./Arguments.js"
import { withClient } from "./Client.js"
import { summaryRow, table, wireForms } from "./Table.js"

/** `sessions tree`: a session and every session below it, indented by depth. */
export const treeCommand = Command.make(
  "tree",
  {
    ...Connect.options,
    json,
    session: sessionId,
    all: Options.boolean("all").pipe(Options.withDescription("Include archived sessions."))
  },
  (o) =>
    withClient(o, ({ client }) =>
      Effect.gen(function*() {
        const out = yield* Output.make({ json: o.json })
        const answer = yield* client.tree(o.session, { includeArchived: o.all })
        const root = answer.root
        if (o.json) {
          const encodeNode = (yield* wireForms).treeItem
          yield* out.jsonLine(encodeNode({ session: root, parentId: root.parentId ?? root.id, alias: root.alias, agentPath: root.agentPath }))
          for (const node of answer.nodes) yield* out.jsonLine(encodeNode(node))
          return
        }
        // Nodes come parents first; each is printed under its parent, children oldest first, indented by depth.
        const below = new Map<string, Array<typeof Messages.TreeItem.Type>>()
        for (const node of answer.nodes) {
          const siblings = below.get(node.parentId) ?? []
          siblings.push(node)
          below.set(node.parentId, siblings)
        }
        const rows: Array<ReadonlyArray<string>> = []
        const walk = (session: Session, alias: string | null, depth: number) => {
          const [id, ...rest] = summaryRow(session)
          rows.push([`${"  ".repeat(depth)}${alias ?? "-"}`, id!, ...rest])
          for (const child of below.get(session.id) ?? []) walk(child.session, child.alias, depth + 1)
        }
        walk(root, root.alias, 0)
        for (const row of table([["ALIAS", "ID", "STATUS", "UPDATED", "AGENT", "TITLE"], ...rows])) yield* out.line(row)
      }).pipe(Effect.scoped))
).pipe(Command.withDescription("Show a session and every session below it (archived ones with --all)."))
