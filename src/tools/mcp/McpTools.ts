/**
 * How an MCP server's tools become troupe tools, and their results tool
 * outcomes: pure, over the protocol's own shapes (written out here, so that
 * the SDK stays a driver of `src/layers`).
 *
 * - Names: `<server>.<tool>`, characters outside `[A-Za-z0-9_.-]` as `_`; a
 *   name longer than 64 characters is not offered (a model provider refuses
 *   it). OpenAI-compatible models get them in their alphabet
 *   (`wireToolName`), as `agents.*` are.
 * - Annotations: `readOnlyHint` → side effect `none`, else `external`;
 *   `idempotentHint` → idempotency `supported`, else `unsupported`; a tool that
 *   may be destructive (the protocol's default unless it says
 *   `destructiveHint: false` or is read-only) carries the capability
 *   `destructive`. Every MCP tool carries `mcp` and `mcp.<server>` too, so a
 *   policy can ask about or deny one server, or all of them.
 * - Results: text only → that text; otherwise `{ text, structuredContent,
 *   content }` with images and audio as references (type, MIME type, size and
 *   digest, not the bytes); `isError` → a tool error with the server's text.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import { createHash } from "node:crypto"
import { ToolSpec } from "../../schema/Agent.js"
import * as JsonSchemaValidator from "../../schema/JsonSchemaValidator.js"
import { errorOutcome, type ToolOutcome } from "../../services/Tool.js"

/** A tool as `tools/list` describes it (the fields used). */
export interface ListedTool {
  readonly name: string
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly inputSchema: { readonly [key: string]: unknown }
  readonly annotations?: {
    readonly readOnlyHint?: boolean | undefined
    readonly destructiveHint?: boolean | undefined
    readonly idempotentHint?: boolean | undefined
    readonly openWorldHint?: boolean | undefined
  } | undefined
}

/** One content block of a `tools/call` result (the fields used). */
export interface ContentBlock {
  readonly type: string
  readonly text?: string | undefined
  readonly data?: string | undefined
  readonly mimeType?: string | undefined
  readonly uri?: string | undefined
  readonly name?: string | undefined
  readonly resource?: { readonly uri: string; readonly mimeType?: string | undefined; readonly text?: string | undefined; readonly blob?: string | undefined } | undefined
}

/** A `tools/call` result (the fields used). */
export interface CallResult {
  readonly content?: ReadonlyArray<ContentBlock> | undefined
  readonly structuredContent?: { readonly [key: string]: unknown } | undefined
  readonly isError?: boolean | undefined
}

/** The capability every tool from an MCP server carries. */
export const MCP = "mcp"
/** The capability of a tool that may be destructive. */
export const DESTRUCTIVE = "destructive"

const NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/

/** The model-facing name of `tool` of `server`, or `undefined` when it cannot be one. */
export const toolName = (server: string, tool: string): string | undefined => {
  const name = `${server}.${tool.replace(/[^A-Za-z0-9_.-]/g, "_")}`
  return NAME.test(name) ? name : undefined
}

/** The spec of a listed tool, or `undefined` when its name cannot be offered. */
export const specOf = (server: string, tool: ListedTool): ToolSpec | undefined => {
  const name = toolName(server, tool.name)
  if (name === undefined) return undefined
  const hints = tool.annotations ?? {}
  const readOnly = hints.readOnlyHint === true
  const destructive = !readOnly && hints.destructiveHint !== false
  const { $schema: _, ...parameters } = tool.inputSchema
  return new ToolSpec({
    name,
    description: tool.description ?? tool.title ?? "",
    parameters: { type: "object", ...parameters },
    sideEffect: readOnly ? "none" : "external",
    idempotency: hints.idempotentHint === true ? "supported" : "unsupported",
    client: false,
    capabilities: destructive ? [MCP, `${MCP}.${server}`, DESTRUCTIVE] : [MCP, `${MCP}.${server}`]
  })
}

/**
 * The model's argument text as the object a call sends, checked against the
 * tool's input schema; or the error outcome the model sees. Keywords the
 * validator does not know are left to the server, which checks them too.
 */
export const argumentsOf = (spec: ToolSpec, argumentsText: string): Either.Either<Record<string, unknown>, ToolOutcome> => {
  let json: unknown
  try {
    json = argumentsText.trim() === "" ? {} : JSON.parse(argumentsText)
  } catch {
    return Either.left(errorOutcome(`the arguments of ${spec.name} are not valid JSON`))
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return Either.left(errorOutcome(`the arguments of ${spec.name} must be a JSON object`))
  }
  const problems = JsonSchemaValidator.validate(spec.parameters, json).filter((problem) => !problem.includes("unsupported keyword"))
  if (problems.length > 0) return Either.left(errorOutcome(`invalid arguments for ${spec.name}: ${problems.slice(0, 5).join("; ")}`))
  return Either.right(json as Record<string, unknown>)
}

const digest = (base64: string) => createHash("sha256").update(base64, "base64").digest("hex")

// Stored outputs are JSON: a field the server left out stays out rather than becoming `undefined`.
const compact = (fields: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined))

/** A content block as the model sees it: text as text, binary data as a reference. */
const blockOf = (block: ContentBlock): unknown => compact(blockFields(block) as Record<string, unknown>)

const blockFields = (block: ContentBlock): unknown => {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text ?? "" }
    case "image":
    case "audio": {
      const data = block.data ?? ""
      return { type: block.type, mimeType: block.mimeType, bytes: Buffer.byteLength(data, "base64"), sha256: digest(data) }
    }
    case "resource_link":
      return { type: "resource_link", uri: block.uri, name: block.name, mimeType: block.mimeType }
    case "resource": {
      const resource = block.resource
      if (resource?.text !== undefined) return { type: "resource", uri: resource.uri, mimeType: resource.mimeType, text: resource.text }
      const blob = resource?.blob ?? ""
      return { type: "resource", uri: resource?.uri, mimeType: resource?.mimeType, bytes: Buffer.byteLength(blob, "base64"), sha256: digest(blob) }
    }
    default:
      return { type: block.type }
  }
}

/** A `tools/call` result as the outcome the model sees. */
export const outcomeOf = (result: CallResult): ToolOutcome => {
  const content = result.content ?? []
  const text = content.filter((block) => block.type === "text").map((block) => block.text ?? "").join("\n")
  const onlyText = content.every((block) => block.type === "text")
  if (result.isError === true) {
    return {
      output: {
        error: text === "" ? "the tool reported an error" : text,
        ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent })
      },
      isError: true
    }
  }
  if (result.structuredContent === undefined && onlyText) return { output: text, isError: false }
  return {
    output: {
      ...(text === "" ? {} : { text }),
      ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
      ...(onlyText ? {} : { content: content.map(blockOf) })
    },
    isError: false
  }
}
