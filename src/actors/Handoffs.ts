/**
 * Handoffs: an agent with `handoffs` offers its model a `transfer_to_<name>`
 * tool per target. A reply that calls one moves the turn to that agent (its
 * instructions, model, settings and tools; the transcript goes on) once the
 * reply's other tool calls ran. The call is recorded as a tool operation whose
 * result tells the model who took over, with a `handoff` record, in one
 * commit. Only the first transfer of a reply is taken (the others are
 * answered "ignored"); more than the turn's `maxHandoffs` fails it with
 * `max_handoffs`.
 *
 * Targets are embedded in the session's frozen agent, so a turn resumed after
 * a crash replays its receipts and hands off again to the same definitions:
 * a transfer call with a receipt is taken without being recorded again.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { type Agent, ToolSpec } from "../schema/Agent.js"
import { makeOperationId, type OperationId, type TurnId } from "../schema/Ids.js"
import { isToolCallInput, type OperationReceipt } from "../schema/Operation.js"
import { HandoffRecorded, OperationCompleted, OperationStarted, type RecordBody } from "../schema/Record.js"
import type * as Model from "../services/Model.js"
import { errorOutcome } from "../services/Tool.js"

/** The prefix of a handoff tool's name. */
export const PREFIX = "transfer_to_"

/** The longest tool name model providers take (OpenAI's limit; Anthropic's is the same). */
export const MAX_TOOL_NAME = 64

/** FNV-1a (32 bits) of a string's UTF-16 code units, as 8 hex digits: stable across processes and versions. */
const shortHash = (text: string): string => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash.toString(16).padStart(8, "0")
}

/**
 * The name of the tool that hands off to `target`: `transfer_to_<name>`, or,
 * for a name too long for that to fit `MAX_TOOL_NAME`, its first characters
 * and a hash of the whole name (`transfer_to_<first 43>_<8 hex>`), so that
 * two long names sharing their start still get two tools. A function of the
 * name alone: a resumed turn finds its transfer calls under the same names.
 */
export const toolName = (target: Agent): string => {
  const plain = `${PREFIX}${target.name}`
  if (plain.length <= MAX_TOOL_NAME) return plain
  const hash = shortHash(target.name)
  return `${PREFIX}${target.name.slice(0, MAX_TOOL_NAME - PREFIX.length - hash.length - 1)}_${hash}`
}

/** The handoff tools `agent` offers its model, one per target. */
export const specsFor = (agent: Agent): ReadonlyArray<ToolSpec> =>
  agent.handoffs.map((target) =>
    // Built from a validated agent name; the prefix keeps it a valid tool name short of the length limit.
    new ToolSpec({
      name: toolName(target),
      description: `Hand the conversation over to the ${target.name} agent, which then answers the user.${
        target.description.length > 0 ? ` ${target.description}` : ""
      }`,
      parameters: {
        type: "object",
        properties: { reason: { type: "string", description: "Why you hand over (recorded)." } },
        additionalProperties: false
      },
      sideEffect: "none",
      idempotency: "supported",
      client: false
    }, true)
  )

/** The target of a call of `agent`'s model, when it is a transfer. */
export const targetOf = (agent: Agent, call: Model.ToolCall): Agent | undefined =>
  call.name.startsWith(PREFIX) ? agent.handoffs.find((target) => toolName(target) === call.name) : undefined

const reasonOf = (argumentsText: string): string | undefined => {
  try {
    const args = JSON.parse(argumentsText)
    return typeof args?.reason === "string" ? args.reason : undefined
  } catch {
    return undefined
  }
}

/** What taking the transfers of one reply did. */
export type Taken =
  | { readonly _tag: "HandedOff"; readonly agent: Agent; readonly records: ReadonlyArray<RecordBody> }
  | { readonly _tag: "Exceeded"; readonly maxHandoffs: number }

/** The handoffs of one turn; `receipts` are those a resumed turn found. */
export const make = (options: {
  readonly turnId: TurnId
  readonly maxHandoffs: number
  readonly receipts: ReadonlyArray<OperationReceipt>
}) => {
  const { turnId } = options
  const replayed = new Set<string>()
  for (const receipt of options.receipts) {
    if (receipt.kind === "tool" && receipt.name.startsWith(PREFIX) && isToolCallInput(receipt.input)) {
      replayed.add(`${receipt.input.requestedBy}/${receipt.input.callId}`)
    }
  }
  let count = 0

  const operation = (
    operationId: OperationId,
    call: Model.ToolCall,
    requestedBy: OperationId,
    output: unknown,
    isError: boolean
  ): ReadonlyArray<RecordBody> => [
    new OperationStarted({
      operationId,
      turnId,
      kind: "tool",
      name: call.name,
      input: { callId: call.id, arguments: call.arguments, requestedBy }
    }, true),
    new OperationCompleted({ operationId, turnId, output, isError }, true)
  ]

  /**
   * Takes the transfer calls `calls` of `from`'s reply `requestedBy`: the
   * first hands off (unless the turn has no handoff left), the others are
   * answered "ignored". The records are empty when the reply was taken before
   * a crash (its receipts are in the log).
   */
  const take = (
    from: Agent,
    calls: ReadonlyArray<Model.ToolCall>,
    requestedBy: OperationId
  ): Effect.Effect<Taken> =>
    Effect.gen(function*() {
      const [first, ...rest] = calls
      const target = targetOf(from, first!)!
      if (count >= options.maxHandoffs) return { _tag: "Exceeded", maxHandoffs: options.maxHandoffs } as const
      count++
      if (replayed.has(`${requestedBy}/${first!.id}`)) return { _tag: "HandedOff", agent: target, records: [] } as const
      const operationId = yield* makeOperationId
      const reason = reasonOf(first!.arguments)
      const records: Array<RecordBody> = [
        ...operation(operationId, first!, requestedBy, { assistant: target.name }, false),
        new HandoffRecorded({ turnId, operationId, from: from.name, to: target.name, ...(reason === undefined ? {} : { reason }) }, true)
      ]
      for (const call of rest) {
        const ignored = errorOutcome("ignored: only the first handoff of a reply is taken").output
        records.push(...operation(yield* makeOperationId, call, requestedBy, ignored, true))
      }
      return { _tag: "HandedOff", agent: target, records } as const
    })

  return { take }
}
