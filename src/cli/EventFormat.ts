/**
 * How session events read on a terminal and in JSON lines: one line per
 * durable event for `troupe sessions events`, tool-call and outcome lines for
 * `troupe run`, and the JSON form (`{ _tag, sessionId, cursor, at, record }`
 * for durable events, `{ _tag: "assistant_delta", sessionId, turnId, text }`
 * for deltas) that `--json` prints.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type { Usage } from "../schema/Budget.js"
import type { ClientEvent } from "../client/ForwardCompatible.js"
import { type Durable, SessionEvent } from "../schema/Event.js"
import type { OperationStarted, RecordBody, TurnEnded } from "../schema/Record.js"
import * as Output from "./Output.js"

const encodeEvent = Schema.encodeSync(SessionEvent)

/** The JSON form of an event (what `--json` prints, one per line); one this client cannot read, exactly as received. */
export const toJson = (event: SessionEvent | ClientEvent): unknown => event._tag === "unknown" ? event.raw : encodeEvent(event)

/** A string clipped to `max` characters, on one line. */
export const clip = (text: string, max = 120): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

const json = (value: unknown, max = 120) => clip(typeof value === "string" ? value : JSON.stringify(value) ?? "", max)

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** A turn's usage in one line: calls, tokens, time and cost. */
export const usage = (usage: Usage): string => {
  const parts = [
    plural(usage.modelCalls, "model call"),
    plural(usage.toolCalls, "tool call"),
    `${usage.totalTokens} tokens (${usage.inputTokens} in, ${usage.outputTokens} out)`,
    `${(usage.wallTimeMs / 1000).toFixed(1)} s`
  ]
  if (usage.costMicros > 0) parts.push(`cost ${usage.costMicros} µ`)
  return parts.join(" · ")
}

/** Why a failed turn failed, in words: the failure's reason when it has one. */
export const failureReason = (ended: TurnEnded): string => {
  const failure = ended.failure
  switch (failure?._tag) {
    case "ModelError":
      return failure.reason
    case "BudgetExhausted":
      return `the ${failure.dimension} budget (${failure.limit}) is exhausted`
    case "MaxCycles":
      return `more than ${failure.maxCycles} model calls`
    case "MaxHandoffs":
      return `more than ${failure.maxHandoffs} handoffs (the last by ${failure.agentName})`
    case "GuardrailBlocked":
      return `the ${failure.stage} guardrail ${failure.guardrail} blocked it: ${failure.reason}`
    case "InvalidOutput":
      return `the output did not match its schema after ${failure.attempts} attempts: ${failure.problems}`
  }
  return ended.reason ?? ended.failureCode ?? "unknown"
}

/** A turn's outcome in one line (coloured on a terminal). */
export const outcome = (ended: TurnEnded): string => {
  switch (ended.outcome) {
    case "completed":
      return Output.green("✓ completed")
    case "failed":
      return Output.red(`✗ failed (${ended.failureCode ?? "internal"}): ${clip(failureReason(ended), 300)}`)
    case "interrupted":
      return Output.yellow(`■ interrupted${ended.reason === undefined ? "" : `: ${clip(ended.reason, 200)}`}`)
  }
}

/** A tool call as `name(arguments)`. */
export const call = (name: string, argumentsText: string): string => `${name}(${clip(argumentsText, 200)})`

/** A tool call as the turn view shows it: `→ name(arguments)`. */
export const toolCall = (name: string, argumentsText: string): string => `→ ${call(name, argumentsText)}`

/** The arguments text of a tool operation's input (`{ arguments }`, as the runner records it). */
export const argumentsOf = (input: OperationStarted["input"]): string =>
  "arguments" in input ? input.arguments : JSON.stringify(input)

/** What one record says, after its tag. */
const describe = (record: RecordBody): string => {
  switch (record._tag) {
    case "session_created":
      return `agent=${record.agentName}${record.title === null ? "" : ` title=${JSON.stringify(clip(record.title, 60))}`}`
    case "turn_started":
      return `${record.turnId} ${JSON.stringify(clip(record.text, 100))}`
    case "turn_ended":
      return `${record.turnId} ${record.outcome}${record.failureCode === undefined ? "" : ` (${record.failureCode})`}${
        record.outcome === "failed" ? `: ${clip(failureReason(record), 200)}` : record.outcome === "interrupted" && record.reason !== undefined ? `: ${clip(record.reason, 200)}` : ""
      }${record.output === undefined ? "" : ` ${JSON.stringify(clip(record.output, 100))}`} · ${usage(record.usage)}`
    case "input_applied":
      return `${record.kind}${record.turnId === undefined ? "" : ` ${record.turnId}`}${
        record.detail === undefined ? "" : ` ${json(record.detail, 80)}`
      }`
    case "operation_started":
      return record.kind === "tool"
        ? `${record.operationId} tool ${record.name}(${clip(argumentsOf(record.input), 100)})`
        : `${record.operationId} ${record.kind} ${record.name}`
    case "operation_completed":
      return `${record.operationId}${record.isError ? " error" : ""} ${json(record.output, 100)}`
    case "operation_unknown":
      return `${record.operationId} outcome unknown`
    case "callback_opened":
      return `${record.callbackId} ${record.kind} ${json(record.request, 100)}`
    case "callback_resolved":
      return `${record.callbackId} ${record.resolution}${record.result === undefined ? "" : ` ${json(record.result, 80)}`}`
    case "child_spawned":
      return `${record.childSessionId} agent=${record.agentName}${record.alias === null ? "" : ` alias=${record.alias}`}`
    case "child_result":
      return `${record.childSessionId} ${record.turnId} ${record.outcome}`
    case "children_awaited":
      return record.parked ? "waiting for subagents" : "done waiting"
    case "renamed":
      return JSON.stringify(clip(record.title, 100))
    case "archived":
      return record.archived ? "archived" : "unarchived"
    case "closed":
      return record.reason ?? ""
    case "context_compacted":
      return `${record.mode} ~${record.tokensBefore} → ~${record.tokensAfter} tokens${
        record.mode === "micro" ? `, ${record.archived?.length ?? 0} archived` : `, ${record.replaced ?? 0} messages summarized`
      }`
    case "handoff":
      return `${record.from} → ${record.to}`
    case "guardrail_checked":
      return `${record.stage} ${record.guardrail} ${record.allowed ? "allowed" : `blocked${record.reason === undefined ? "" : `: ${clip(record.reason, 100)}`}`}`
    case "output_rejected":
      return `attempt ${record.attempt}: ${clip(record.problems, 100)}`
  }
}

/** When an event this client cannot read happened, if it says so. */
const unknownAt = (raw: unknown): number | undefined => {
  const at = typeof raw === "object" && raw !== null ? (raw as { readonly at?: unknown }).at : undefined
  return typeof at === "number" && Number.isFinite(at) ? at : undefined
}

/** What an event this client cannot read says: a durable one's record, another's whole payload. */
const unknownBody = (event: ClientEvent & { readonly _tag: "unknown" }): unknown =>
  event.cursor !== undefined && typeof event.raw === "object" && event.raw !== null && "record" in event.raw
    ? (event.raw as { readonly record: unknown }).record
    : event.raw

/**
 * One line for an event: `#<cursor> <time> <tag> <details>`, or the delta's
 * text; one this client cannot read (a newer daemon's) shows its kind and
 * its payload as received.
 */
export const line = (event: SessionEvent | ClientEvent): string => {
  if (event._tag === "assistant_delta") return `  … ${JSON.stringify(event.text)}`
  if (event._tag === "unknown") {
    const at = unknownAt(event.raw)
    return `${event.cursor === undefined ? " " : `#${event.cursor}`} ${
      at === undefined ? "" : `${Output.dim(new Date(at).toISOString(), process.stdout)} `
    }${event.kind} (not known to this client) ${json(unknownBody(event), 160)}`
  }
  return `#${event.cursor} ${Output.dim(new Date(event.at).toISOString(), process.stdout)} ${event.record._tag} ${
    describe(event.record)
  }`.trimEnd()
}

/** Whether an event is the end of a turn. */
export const isTurnEnd = (event: SessionEvent | ClientEvent): event is Durable & { readonly record: TurnEnded } =>
  event._tag === "durable" && event.record._tag === "turn_ended"
