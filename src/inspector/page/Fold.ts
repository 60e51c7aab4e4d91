/**
 * The timeline of one session, folded from its durable events: one row per
 * step a user wants to see (a message, a steer, a model call, a tool call
 * with its approval, a handoff, a compaction, a child spawned or its result,
 * an interrupt, a turn's end with its usage against its budgets). A tool or
 * model call is one row, updated in place when it completes; the callbacks it
 * opened fold into it. Live assistant text (volatile deltas) goes to the model
 * call that is streaming it.
 *
 * Pure: no DOM, so it is tested in Node.
 *
 * @since 0.3.0
 */
import type { DurableEvent, RecordBody } from "./Types.js"

/** What a row stands for. */
export type RowKind =
  | "session"
  | "user"
  | "steer"
  | "model"
  | "tool"
  | "compaction"
  | "handoff"
  | "spawn"
  | "child_result"
  | "interrupt"
  | "stale"
  | "turn_end"
  | "guardrail"
  | "output_rejected"
  | "meta"

/** How a row stands: shown as a badge. */
export type RowStatus = "ok" | "error" | "running" | "waiting" | "unknown" | "denied" | "interrupted"

/** A long text of a row's detail (arguments, a result, assistant text). */
export interface Block {
  readonly label: string
  text: string
}

/** An archived tool result a compaction replaced: readable from its receipt's record. */
export interface Artifact {
  readonly artifactId: string
  readonly toolName: string
  readonly seq: number
  readonly chars: number
}

/** One row of the timeline. */
export interface Row {
  readonly key: string
  readonly kind: RowKind
  readonly cursor: number
  readonly at: number
  readonly turnId: string | undefined
  title: string
  summary: string
  status: RowStatus | undefined
  /** A child session this row links to. */
  link: string | undefined
  fields: Array<readonly [string, string]>
  blocks: Array<Block>
  artifacts: ReadonlyArray<Artifact>
  /** The operation's id, for a model or tool call. */
  readonly operationId: string | undefined
}

/** Per-dimension budget limits (tokens, tool calls, wall time, cost). */
export type Limits = Readonly<Record<string, unknown>>

/** What a session's log adds up to (the list's columns). */
export interface Totals {
  turns: number
  totalTokens: number
  pendingCallbacks: number
  lastAt: number
}

const DIMENSIONS = ["totalTokens", "inputTokens", "toolCalls", "wallTimeMs", "costMicros"] as const

/** Pretty JSON of a value, or the text itself when it is JSON text that does not parse. */
export const pretty = (value: unknown): string => {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2)
    } catch {
      return value
    }
  }
  return JSON.stringify(value, null, 2) ?? String(value)
}

const short = (text: string, max = 120): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

const ms = (n: number): string => (n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(n < 10_000 ? 2 : 1)} s`)

/** A tool's output (the receipt's JSON) as text. */
const outputText = (output: unknown): string =>
  typeof output === "object" && output !== null && "error" in output && typeof (output as { error: unknown }).error === "string"
    ? (output as { error: string }).error
    : pretty(output)

/** The timeline of one session, fed events in cursor order. */
export class Timeline {
  /** The rows, in log order. */
  readonly rows: Array<Row> = []
  /** The list's columns, from the same events. */
  readonly totals: Totals = { turns: 0, totalTokens: 0, pendingCallbacks: 0, lastAt: 0 }
  /** The newest cursor folded. */
  cursor = 0
  private readonly byOperation = new Map<string, Row>()
  private readonly callbackOperation = new Map<string, string>()
  private readonly turnBudgets = new Map<string, Limits>()
  private readonly streaming = new Map<string, Row>()
  private readonly openCallbacks = new Set<string>()

  /** `limits`: the session's and agent's budgets, merged (the session's win). */
  constructor(private readonly limits: Limits = {}) {}

  /** Folds one durable event; events at or before the folded cursor are ignored (no duplicates on resume). */
  add(event: DurableEvent): void {
    if (event.cursor <= this.cursor) return
    this.cursor = event.cursor
    this.totals.lastAt = Math.max(this.totals.lastAt, event.at)
    apply(this, event, event.record)
  }

  /** Appends a live fragment of assistant text to the model call streaming it; answers the row it changed. */
  delta(turnId: string, text: string): Row | undefined {
    const row = this.streaming.get(turnId)
    if (row === undefined) return undefined
    const block = row.blocks.find((b) => b.label === "assistant text (live)") ?? pushBlock(row, "assistant text (live)")
    block.text += text
    row.summary = short(block.text)
    return row
  }

  /** @internal */ push(row: Row): Row {
    this.rows.push(row)
    return row
  }
  /** @internal */ operation(id: string): Row | undefined {
    return this.byOperation.get(id)
  }
  /** @internal */ startOperation(row: Row): void {
    this.byOperation.set(row.operationId!, row)
    if (row.kind === "model" && row.turnId !== undefined) this.streaming.set(row.turnId, row)
  }
  /** @internal */ endOperation(row: Row): void {
    if (row.turnId !== undefined && this.streaming.get(row.turnId) === row) this.streaming.delete(row.turnId)
  }
  /** @internal */ openCallback(callbackId: string, operationId: string): void {
    this.callbackOperation.set(callbackId, operationId)
    this.openCallbacks.add(callbackId)
    this.totals.pendingCallbacks = this.openCallbacks.size
  }
  /** @internal */ resolveCallback(callbackId: string): Row | undefined {
    this.openCallbacks.delete(callbackId)
    this.totals.pendingCallbacks = this.openCallbacks.size
    const op = this.callbackOperation.get(callbackId)
    return op === undefined ? undefined : this.byOperation.get(op)
  }
  /** @internal */ budgetsOf(turnId: string): Limits {
    return this.turnBudgets.get(turnId) ?? this.limits
  }
  /** @internal */ setBudgets(turnId: string, run: Limits | undefined): void {
    this.turnBudgets.set(turnId, run === undefined ? this.limits : { ...this.limits, ...run })
  }
  /** @internal */ endTurn(turnId: string): void {
    this.streaming.delete(turnId)
    for (const row of this.byOperation.values()) {
      if (row.turnId === turnId && (row.status === "running" || row.status === "waiting")) row.status = "interrupted"
    }
  }
}

const pushBlock = (row: Row, label: string): Block => {
  const block = { label, text: "" }
  row.blocks.push(block)
  return block
}

const row = (event: DurableEvent, kind: RowKind, title: string, summary: string, extra: Partial<Row> = {}): Row => ({
  key: `r${event.cursor}`,
  kind,
  cursor: event.cursor,
  at: event.at,
  turnId: "turnId" in event.record ? (event.record as { turnId?: string }).turnId : undefined,
  title,
  summary,
  status: undefined,
  link: undefined,
  fields: [],
  blocks: [],
  artifacts: [],
  operationId: undefined,
  ...extra
})

type Of<T extends RecordBody["_tag"]> = Extract<RecordBody, { _tag: T }>

function apply(t: Timeline, e: DurableEvent, r: RecordBody): void {
  switch (r._tag) {
    case "session_created":
      t.push(row(e, "session", "session created", `agent ${r.agentName}${r.title ? ` · ${r.title}` : ""}`))
      return
    case "turn_started": {
      t.totals.turns++
      t.setBudgets(r.turnId, r.run?.budgets as Limits | undefined)
      const user = t.push(row(e, "user", "user message", short(r.text), { blocks: [{ label: "text", text: r.text }] }))
      user.fields.push(["turn", r.turnId], ["input", r.inputId])
      return
    }
    case "input_applied":
      return inputApplied(t, e, r)
    case "operation_started":
      return operationStarted(t, e, r)
    case "operation_completed":
      return operationCompleted(t, e, r)
    case "operation_unknown": {
      const op = t.operation(r.operationId)
      if (op !== undefined) {
        op.status = "unknown"
        op.summary = "outcome unknown (cut off by a crash)"
        t.endOperation(op)
      } else t.push(row(e, "meta", "operation unknown", r.operationId, { status: "unknown" }))
      return
    }
    case "callback_opened":
      return callbackOpened(t, e, r)
    case "callback_resolved":
      return callbackResolved(t, e, r)
    case "turn_ended":
      return turnEnded(t, e, r)
    case "child_spawned":
      t.push(row(e, "spawn", `child spawned · ${r.alias ?? r.agentName}`, `${r.agentName} ${r.childSessionId}`, {
        link: r.childSessionId,
        fields: [["child", r.childSessionId], ["agent", r.agentName], ["alias", r.alias ?? "—"]]
      }))
      return
    case "child_result":
      t.push(row(e, "child_result", `child result · ${r.outcome}`, short(r.output ?? r.reason ?? r.failureCode ?? ""), {
        link: r.childSessionId,
        status: r.outcome === "completed" ? "ok" : r.outcome === "interrupted" ? "interrupted" : "error",
        fields: [["child", r.childSessionId], ["child turn", r.turnId], ...(r.failureCode ? [["failure", r.failureCode] as const] : []),
          ...(r.usage ? [["tokens", String(r.usage.totalTokens)] as const] : [])],
        blocks: r.output !== undefined ? [{ label: "output", text: r.output }] : []
      }))
      return
    case "handoff":
      t.push(row(e, "handoff", `handoff ${r.from} → ${r.to}`, r.reason ?? "", { fields: [["operation", r.operationId]] }))
      return
    case "context_compacted":
      return compacted(t, e, r)
    case "guardrail_checked":
      t.push(row(e, "guardrail", `guardrail ${r.guardrail} (${r.stage})`, r.allowed ? "allowed" : `blocked: ${r.reason ?? ""}`, {
        status: r.allowed ? "ok" : "denied"
      }))
      return
    case "output_rejected":
      t.push(row(e, "output_rejected", `output rejected (attempt ${r.attempt})`, short(r.problems), {
        status: "error",
        blocks: [{ label: "problems", text: r.problems }]
      }))
      return
    case "renamed":
      t.push(row(e, "meta", "renamed", r.title))
      return
    case "archived":
      t.push(row(e, "meta", r.archived ? "archived" : "unarchived", ""))
      return
    case "closed":
      t.push(row(e, "meta", "closed", r.reason ?? ""))
      return
    default:
      // A record kind this page does not know yet: shown, never dropped.
      t.push(row(e, "meta", (r as { _tag: string })._tag, short(JSON.stringify(r))))
  }
}

function inputApplied(t: Timeline, e: DurableEvent, r: Of<"input_applied">): void {
  const detail = (r.detail ?? {}) as Record<string, unknown>
  if (r.kind === "steer") {
    const text = String(detail.text ?? "")
    t.push(row(e, "steer", "steer", short(text), { blocks: [{ label: "text", text }] }))
  } else if (r.kind === "interrupt") {
    t.push(row(e, "interrupt", "interrupt", String(detail.outcome ?? ""), { status: "interrupted" }))
  } else if (typeof detail.stale === "string") {
    t.push(row(e, "stale", "stale answer", `callback ${String(detail.callbackId)}: ${detail.stale}`, { status: "denied" }))
  } else if (typeof detail.rejected === "string") {
    t.push(row(e, "meta", "message rejected", `busy`, { status: "denied" }))
  } else if (typeof detail.ignored === "string") {
    t.push(row(e, "meta", `${r.kind} ignored`, detail.ignored))
  }
}

function operationStarted(t: Timeline, e: DurableEvent, r: Of<"operation_started">): void {
  const input = r.input as Record<string, unknown>
  const isTool = r.kind === "tool"
  const op = row(e, isTool ? "tool" : "model", isTool ? `tool · ${r.name}` : r.kind === "compaction" ? "summary call" : `model call · ${r.name}`,
    isTool ? short(String(input.arguments ?? "")) : `${input.messages ?? 0} messages, ${input.tools ?? 0} tools`, {
    key: `o${r.operationId}`,
    status: "running",
    operationId: r.operationId,
    fields: [["operation", r.operationId]]
  })
  if (isTool) {
    op.fields.push(["call", String(input.callId ?? "")])
    op.blocks.push({ label: "arguments", text: pretty(input.arguments ?? "") })
  } else {
    op.fields.push(["messages", String(input.messages ?? 0)], ["tools offered", String(input.tools ?? 0)])
    if (typeof input.steers === "number" && input.steers > 0) op.fields.push(["steers taken", String(input.steers)])
    if (typeof input.results === "number" && input.results > 0) op.fields.push(["child results taken", String(input.results)])
  }
  t.push(op)
  t.startOperation(op)
}

function operationCompleted(t: Timeline, e: DurableEvent, r: Of<"operation_completed">): void {
  const op = t.operation(r.operationId) ??
    t.push(row(e, "tool", "operation", "", { key: `o${r.operationId}`, operationId: r.operationId, fields: [["operation", r.operationId]] }))
  t.endOperation(op)
  const took = e.at - op.at
  op.fields.push([op.kind === "model" ? "latency" : "duration", ms(took)])
  const isError = r.isError === true
  if (op.kind === "model") {
    const out = (r.output ?? {}) as { text?: string; toolCalls?: ReadonlyArray<{ name: string }>; inputTokens?: number; outputTokens?: number }
    const calls = out.toolCalls ?? []
    op.status = isError ? "error" : "ok"
    op.fields.push(["tokens in", String(out.inputTokens ?? 0)], ["tokens out", String(out.outputTokens ?? 0)])
    op.blocks = op.blocks.filter((b) => b.label !== "assistant text (live)")
    if (out.text) op.blocks.push({ label: "assistant text", text: out.text })
    if (calls.length > 0) op.blocks.push({ label: "tool calls", text: calls.map((c) => c.name).join(", ") })
    op.summary = `${out.inputTokens ?? 0} in · ${out.outputTokens ?? 0} out · ${ms(took)}${
      calls.length > 0 ? ` · ${calls.map((c) => c.name).join(", ")}` : out.text ? ` · ${short(out.text, 60)}` : ""}`
    return
  }
  const text = outputText(r.output)
  const denied = isError && /denied|not allowed|refused/i.test(text)
  op.status = denied ? "denied" : isError ? "error" : "ok"
  op.blocks.push({ label: isError ? "error" : "result", text })
  op.summary = `${denied ? "denied: " : isError ? "error: " : ""}${short(text, 80)} · ${ms(took)}`
}

function callbackOpened(t: Timeline, e: DurableEvent, r: Of<"callback_opened">): void {
  t.openCallback(r.callbackId, r.operationId)
  const op = t.operation(r.operationId)
  const label = r.kind === "approval" ? "approval" : "client tool"
  if (op === undefined) {
    t.push(row(e, "meta", `${label} asked`, r.callbackId, { status: "waiting" }))
    return
  }
  op.status = "waiting"
  op.fields.push([`${label} asked`, r.callbackId])
  if (r.expiresAt !== undefined) op.fields.push([`${label} expires`, new Date(r.expiresAt).toISOString()])
  op.summary = `waiting for ${label === "approval" ? "an approval" : "the client"} · ${op.summary}`
}

function callbackResolved(t: Timeline, e: DurableEvent, r: Of<"callback_resolved">): void {
  const op = t.resolveCallback(r.callbackId)
  const result = (r.result ?? {}) as { decision?: string; reason?: string }
  const how = r.resolution !== "answered"
    ? r.resolution
    : result.decision !== undefined
    ? `${result.decision === "deny" ? "denied" : result.decision === "approve_session" ? "approved for the session" : "approved"}${
      result.reason ? `: ${result.reason}` : ""}`
    : "answered"
  if (op === undefined) {
    t.push(row(e, "meta", "callback resolved", `${r.callbackId}: ${how}`))
    return
  }
  op.fields.push(["callback", `${how} (${ms(e.at - op.at)} after the call)`])
  if (op.status === "waiting") {
    op.status = result.decision === "deny" ? "denied" : r.resolution === "answered" ? "running" : "error"
    op.summary = `${how} · ${op.summary.replace(/^waiting for [^·]+· /, "")}`
  }
}

function turnEnded(t: Timeline, e: DurableEvent, r: Of<"turn_ended">): void {
  t.endTurn(r.turnId)
  t.totals.totalTokens += r.usage.totalTokens
  const limits = t.budgetsOf(r.turnId)
  const usage = r.usage as unknown as Record<string, number>
  const fields: Array<readonly [string, string]> = [["outcome", r.outcome]]
  if (r.failureCode) fields.push(["failure", r.failureCode])
  if (r.reason) fields.push(["reason", r.reason])
  for (const d of DIMENSIONS) {
    const limit = limits[d]
    fields.push([d, typeof limit === "number" ? `${usage[d] ?? 0} of ${limit}` : String(usage[d] ?? 0)])
  }
  fields.push(["modelCalls", String(r.usage.modelCalls)])
  const blocks: Array<Block> = []
  if (r.output !== undefined) blocks.push({ label: "output", text: r.output })
  if (r.failure !== undefined) blocks.push({ label: "failure", text: pretty(r.failure) })
  t.push(row(e, "turn_end", `turn ${r.outcome}`, short(r.publicFinalMessage ?? r.output ?? r.reason ?? r.failureCode ?? ""), {
    status: r.outcome === "completed" ? "ok" : r.outcome === "interrupted" ? "interrupted" : "error",
    fields,
    blocks
  }))
}

function compacted(t: Timeline, e: DurableEvent, r: Of<"context_compacted">): void {
  const artifacts = (r.archived ?? []).map((a) => ({ artifactId: a.artifactId, toolName: a.toolName, seq: a.seq, chars: a.chars }))
  t.push(row(e, "compaction", `compaction · ${r.mode}`, `${r.tokensBefore} → ${r.tokensAfter} tokens (est.)`, {
    fields: [["messages before", String(r.messagesBefore)], ["tokens", `${r.tokensBefore} → ${r.tokensAfter}`],
      ...(r.replaced !== undefined ? [["messages replaced", String(r.replaced)] as const] : [])],
    blocks: r.summary !== undefined ? [{ label: "summary", text: r.summary }] : [],
    artifacts
  }))
}

/** Budget limits of a session: its agent's, then its own over them. */
export const limitsOf = (session: { readonly budgets?: unknown; readonly agent?: unknown }): Limits => ({
  ...((session.agent as { budgets?: Limits } | undefined)?.budgets ?? {}),
  ...((session.budgets as Limits | null | undefined) ?? {})
})
