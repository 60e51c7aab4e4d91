/**
 * The wire forms `--json` prints: the schemas' encoders for a session, a tree
 * node, a child and a snapshot. Loaded by `Table.wireForms` when a command
 * prints JSON, so that `--help` and the table output do not build them.
 *
 * @since 0.3.0
 */
import * as Schema from "effect/Schema"
import { ChildItem, TreeItem } from "../../protocol/Messages.js"
import { Snapshot } from "../../schema/Event.js"
import { Session } from "../../schema/Session.js"

/** A session in its wire form. */
export const session = Schema.encodeSync(Session)

/** A node of `sessions tree`. */
export const treeItem = Schema.encodeSync(TreeItem)

/** A child of `sessions children`. */
export const childItem = Schema.encodeSync(ChildItem)

/** A snapshot of `sessions show`. */
export const snapshot = Schema.encodeSync(Snapshot)
