/**
 * Context compaction as pure decisions: the settings a turn runs under, which
 * tool results to archive and the marker that replaces each, where a summary
 * cuts the conversation, the text the summary call is given, and how a
 * `context_compacted` record changes a transcript. Nothing here runs an
 * effect; `Compactor` runs these before a model call.
 *
 * Two rules hold throughout: a tool call and its result are never separated
 * (an archived result keeps its message, with the marker as its content; a
 * cut never falls between a reply with tool calls and its results), and a
 * record applies only to the conversation it was planned on (`messagesBefore`).
 *
 * @since 0.1.0
 */
import { ToolSpec } from "../schema/Agent.js"
import type { ArchivedResult, CompactionSettings, ContextCompacted } from "../schema/Compaction.js"
import type { OperationId, TurnId } from "../schema/Ids.js"
import type * as Model from "../services/Model.js"
import type * as AppendOnlyList from "./AppendOnlyList.js"

/** The settings a turn compacts under, every field resolved. */
export interface Settings {
  readonly enabled: boolean
  readonly contextWindow: number
  readonly reservedOutputTokens: number
  readonly bufferTokens: number
  readonly archiveMinChars: number
  readonly keepRecentCycles: number
  readonly keepRecentMessages: number
  readonly excerptChars: number
  /** The estimate of a request above which it is compacted: window − reserved output − buffer. */
  readonly threshold: number
}

/** The defaults of `CompactionSettings`. */
export const defaults = {
  enabled: true,
  contextWindow: 128_000,
  reservedOutputTokens: 8_192,
  bufferTokens: 4_096,
  archiveMinChars: 2_000,
  keepRecentCycles: 3,
  keepRecentMessages: 10,
  excerptChars: 200
} as const

/** Resolves the settings of a turn: the run's, else the agent's, else `maxOutputTokens` (for the reserve), else the defaults. */
export const resolve = (
  agent: CompactionSettings | undefined,
  run: CompactionSettings | undefined,
  maxOutputTokens: number | undefined
): Settings => {
  const pick = <K extends keyof typeof defaults>(key: K): (typeof defaults)[K] | number | boolean =>
    run?.[key] ?? agent?.[key] ?? defaults[key]
  const contextWindow = pick("contextWindow") as number
  const reservedOutputTokens = (run?.reservedOutputTokens ?? agent?.reservedOutputTokens ?? maxOutputTokens ??
    defaults.reservedOutputTokens)
  const bufferTokens = pick("bufferTokens") as number
  return {
    enabled: pick("enabled") as boolean,
    contextWindow,
    reservedOutputTokens,
    bufferTokens,
    archiveMinChars: pick("archiveMinChars") as number,
    keepRecentCycles: Math.max(1, pick("keepRecentCycles") as number),
    keepRecentMessages: pick("keepRecentMessages") as number,
    excerptChars: pick("excerptChars") as number,
    threshold: Math.max(0, contextWindow - reservedOutputTokens - bufferTokens)
  }
}

/** The name of the built-in tool that reads an archived tool result back. */
export const READ_ARTIFACT = "read_artifact"

/** How many characters one `read_artifact` call returns at most. */
export const READ_LIMIT = 8_000

/** The built-in `read_artifact` tool, offered once the session has archived a result. */
export const readArtifactSpec = new ToolSpec({
  name: READ_ARTIFACT,
  description: "Reads back the full text of an archived tool result, by the artifact id its marker names. " +
    `Returns at most ${READ_LIMIT} characters from \`offset\` (default 0), and the \`nextOffset\` to read on from.`,
  parameters: {
    type: "object",
    properties: {
      artifactId: { type: "string", description: "The artifact id from the marker." },
      offset: { type: "integer", minimum: 0, description: "Where to start reading, in characters." }
    },
    required: ["artifactId"],
    additionalProperties: false
  },
  sideEffect: "read",
  idempotency: "supported",
  client: false
})

/** The tools a request offers: the turn's, and `read_artifact` once anything was archived. */
export const offered = (
  tools: ReadonlyArray<ToolSpec>,
  settings: Settings,
  archived: number
): ReadonlyArray<ToolSpec> =>
  settings.enabled && archived > 0 && !tools.some((t) => t.name === READ_ARTIFACT) ? [...tools, readArtifactSpec] : tools

const OPEN = "<archived_tool_result"
const CLOSE = "</archived_tool_result>"

/** Whether a tool message's content is already an archive marker. */
export const isMarker = (content: string): boolean => content.startsWith(OPEN)

/**
 * The marker that stands for an archived result: closed, naming the tool, the
 * artifact and the full length, with a bounded head and tail of the text and
 * how to read the rest back.
 */
export const marker = (toolName: string, artifactId: string, content: string, excerptChars: number): string => {
  // The excerpt may not close the marker early.
  const safe = (text: string) => text.split(CLOSE).join("</archived_tool_result >")
  const shown = content.length <= 2 * excerptChars
    ? safe(content)
    : `${safe(content.slice(0, excerptChars))}\n[… ${content.length - 2 * excerptChars} characters not shown …]\n${
      safe(content.slice(-excerptChars))
    }`
  return `${OPEN} tool="${toolName}" artifact="${artifactId}" chars="${content.length}">\n${shown}\n` +
    `To read it whole, call ${READ_ARTIFACT} with {"artifactId": "${artifactId}"} (and "offset" to read on).\n${CLOSE}`
}

/** Where a tool message's full text is kept: the tool call's operation and its receipt's record. */
export interface Origin {
  readonly operationId: OperationId
  readonly turnId: TurnId
  readonly seq: number
  readonly toolName: string
}

/**
 * The tool results of `messages` to archive: longer than `archiveMinChars`,
 * older than the last `keepRecentCycles` replies with tool calls, of tools
 * that do not preserve their results, not markers already, and only where the
 * marker is shorter than the text it replaces.
 */
export const planMicro = (
  messages: ReadonlyArray<Model.Message>,
  settings: Settings,
  preserved: (toolName: string) => boolean,
  originOf: (message: Model.Message) => Origin | undefined
): ReadonlyArray<ArchivedResult> => {
  let protectedFrom = messages.length
  let cycles = 0
  for (let i = messages.length - 1; i >= 0 && cycles < settings.keepRecentCycles; i--) {
    const message = messages[i]!
    if (message.role === "assistant" && message.toolCalls !== undefined && message.toolCalls.length > 0) {
      cycles++
      protectedFrom = i
    }
  }
  const archived: Array<ArchivedResult> = []
  for (let i = 0; i < protectedFrom; i++) {
    const message = messages[i]!
    if (message.role !== "tool" || message.content.length <= settings.archiveMinChars || isMarker(message.content)) continue
    const origin = originOf(message)
    if (origin === undefined || preserved(origin.toolName)) continue
    const text = marker(origin.toolName, origin.operationId, message.content, settings.excerptChars)
    if (text.length >= message.content.length) continue
    archived.push({
      index: i,
      callId: message.toolCallId,
      toolName: origin.toolName,
      artifactId: origin.operationId,
      turnId: origin.turnId,
      seq: origin.seq,
      chars: message.content.length,
      marker: text
    })
  }
  return archived
}

/** `messages` with each of `archived` replaced by its marker (a copy). */
export const withArchived = (
  messages: ReadonlyArray<Model.Message>,
  archived: ReadonlyArray<ArchivedResult>
): Array<Model.Message> => {
  const next = messages.slice()
  for (const entry of archived) {
    const message = next[entry.index]
    if (message?.role === "tool" && message.toolCallId === entry.callId) {
      next[entry.index] = { role: "tool", toolCallId: entry.callId, content: entry.marker }
    }
  }
  return next
}

/**
 * Where a summary cuts `messages`: the first `cut` messages are summarized,
 * the rest kept raw. At least `keepRecentMessages` are kept; a cut that would
 * fall on a tool result moves left to the reply that asked for it. Undefined
 * when nothing new would be summarized (only a previous summary, or nothing).
 */
export const planCut = (messages: ReadonlyArray<Model.Message>, keepRecentMessages: number): number | undefined => {
  let cut = messages.length - keepRecentMessages
  while (cut > 0 && messages[cut]!.role === "tool") cut--
  if (cut <= 0) return undefined
  if (cut === 1 && isSummary(messages[0]!)) return undefined
  return cut
}

const SUMMARY_OPEN = "<conversation_summary>"

/** Whether a message is the summary a previous compaction put first. */
export const isSummary = (message: Model.Message): boolean =>
  message.role === "user" && message.content.startsWith(SUMMARY_OPEN)

/** The message that replaces a summarized prefix. */
export const summaryMessage = (summary: string): string =>
  `${SUMMARY_OPEN}\nThe earlier part of this conversation, summarized:\n${summary.trim()}\n</conversation_summary>`

/** What the summary call is told to do. */
export const SUMMARY_INSTRUCTIONS = [
  "You compact the history of an agent's conversation so that the agent can carry on without it.",
  "Summarize the conversation you are given (a previous summary, if any, comes first): the user's requests",
  "and constraints in their own words, decisions taken, facts and results learnt (with the artifact ids of",
  "archived tool results worth reading again), what is done, and what remains. Be concise; write only the summary."
].join(" ")

const clip = (text: string, limit: number) =>
  text.length <= limit ? text : `${text.slice(0, limit / 2)} […] ${text.slice(-limit / 2)}`

/**
 * The text the summary call summarizes: each message of the prefix on its
 * own lines (role, tool calls, tool results), each bounded, the whole at most
 * `maxChars` (its head and tail).
 */
export const summaryInput = (prefix: ReadonlyArray<Model.Message>, maxChars: number): string => {
  const lines: Array<string> = []
  for (const message of prefix) {
    switch (message.role) {
      case "user":
        lines.push(isSummary(message) ? message.content : `[user] ${clip(message.content, 4_000)}`)
        break
      case "assistant": {
        const calls = (message.toolCalls ?? []).map((c) => `${c.name}(${clip(c.arguments, 400)})`).join(", ")
        lines.push(`[assistant] ${clip(message.content, 4_000)}${calls.length > 0 ? ` [calls: ${calls}]` : ""}`)
        break
      }
      case "tool":
        lines.push(`[tool result ${message.toolCallId}] ${clip(message.content, 2_000)}`)
        break
    }
  }
  return clip(lines.join("\n"), Math.max(1_000, maxChars))
}

/**
 * The transcript a `context_compacted` record leaves: markers in place of the
 * archived results, or the summary in place of the prefix. A record planned on
 * a conversation of another length is ignored (the transcript is unchanged).
 */
export const applyRecord = (
  transcript: AppendOnlyList.AppendOnlyList<Model.Message>,
  record: ContextCompacted
): AppendOnlyList.AppendOnlyList<Model.Message> => {
  if (transcript.length !== record.messagesBefore) return transcript
  const messages = transcript.items.slice(0, transcript.length)
  if (record.mode === "micro") {
    const items = withArchived(messages, record.archived ?? [])
    return { length: items.length, items }
  }
  if (record.replaced === undefined || record.summary === undefined || record.replaced > messages.length) return transcript
  const items: Array<Model.Message> = [{ role: "user", content: record.summary }, ...messages.slice(record.replaced)]
  return { length: items.length, items }
}
