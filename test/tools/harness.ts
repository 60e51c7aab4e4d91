/**
 * Running built-in tools as a turn does, through the `Toolkit`: a call's
 * `ToolContext` for a session, a call by name with JSON arguments, whether the
 * tool itself asks for an approval.
 */
import { Effect } from "effect"
import type { OperationId, SessionId, TurnId } from "../../src/schema/Ids.js"
import type * as Tool from "../../src/services/Tool.js"
import * as Toolkit from "../../src/services/Toolkit.js"
import { principal } from "../support/fixtures.js"

/** The context of a call in `session` (its own root). */
export const context = (operation = "op_1", session = "ses_1"): Tool.ToolContext => ({
  sessionId: session as SessionId,
  turnId: "turn_1" as TurnId,
  operationId: operation as OperationId,
  callId: "c1",
  principal: principal(),
  agentPath: ["root"]
})

/** Runs a built-in through the toolkit. */
export const call = (name: string, args: unknown, operation?: string, session?: string) =>
  Effect.flatMap(Toolkit.Toolkit, (toolkit) => toolkit.get(name)!.run(JSON.stringify(args), context(operation, session)))

/** Whether the tool asks for an approval of this call on its own. */
export const asks = (name: string, args: unknown) =>
  Effect.flatMap(Toolkit.Toolkit, (toolkit) => toolkit.get(name)!.needsApproval?.(JSON.stringify(args), context()) ?? Effect.succeed(false))

/** The error text of an error outcome. */
export const errorOf = (outcome: Tool.ToolOutcome) => (outcome.output as { error: string }).error
