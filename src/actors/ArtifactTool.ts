/**
 * The built-in `read_artifact` tool: reads the full text of a tool result
 * that context compaction archived, page by page, from the store. An artifact
 * is its tool call's receipt (decision 0015): its `operation_completed`
 * record, found by the seq the archive noted, or else among its turn's
 * receipts. Only results the session archived can be read.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Schema from "effect/Schema"
import type { ArchivedResult } from "../schema/Compaction.js"
import type { SessionId } from "../schema/Ids.js"
import type { SessionStore } from "../services/SessionStore.js"
import { errorOutcome, type ToolContext, type ToolOutcome } from "../services/Tool.js"
import type { Runnable } from "../services/Toolkit.js"
import * as Compaction from "./Compaction.js"
import { renderOutput } from "./SessionState.js"

const ReadArguments = Schema.parseJson(Schema.Struct({
  artifactId: Schema.String,
  offset: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.nonNegative()))
}))
const decodeRead = Schema.decodeUnknownEither(ReadArguments)

/** `read_artifact` for the session `sessionId`, whose archived results `artifacts` gives. */
export const make = (
  store: SessionStore["Type"],
  sessionId: SessionId,
  artifacts: () => HashMap.HashMap<string, ArchivedResult>,
  /** Reads the ids that are not archived results (the workspace's `bash` outputs), if the host has such a tool. */
  fallback?: Runnable | undefined
): Runnable => {
  /** The full text of an archived result, as the model saw it before it was archived. */
  const fullText = (entry: ArchivedResult) =>
    Effect.gen(function*() {
      const page = yield* store.readLog(sessionId, { after: entry.seq - 1, limit: 1 })
      const body = page.records[0]?.body
      if (body?._tag === "operation_completed" && body.operationId === entry.artifactId) return renderOutput(body.output)
      const receipts = yield* store.operations(sessionId, entry.turnId)
      const receipt = receipts.find((r) => r.operationId === entry.artifactId)
      return receipt === undefined || receipt.status !== "completed" ? undefined : renderOutput(receipt.output)
    })

  const run = (argumentsText: string, context: ToolContext): Effect.Effect<ToolOutcome> =>
    Effect.gen(function*() {
      const args = decodeRead(argumentsText.trim() === "" ? "{}" : argumentsText)
      if (Either.isLeft(args)) return errorOutcome(`invalid arguments for ${Compaction.READ_ARTIFACT}: expected { artifactId, offset? }`)
      const { artifactId, offset = 0 } = args.right
      const entry = HashMap.get(artifacts(), artifactId)
      if (entry._tag === "None" && fallback !== undefined) return yield* fallback.run(argumentsText, context)
      if (entry._tag === "None") return errorOutcome(`no archived tool result has the artifact id ${JSON.stringify(artifactId.slice(0, 80))}`)
      const text = yield* fullText(entry.value)
      if (text === undefined) return errorOutcome(`the full text of ${artifactId} is no longer in the store`)
      if (offset > text.length) return errorOutcome(`offset ${offset} is past the end of ${artifactId} (${text.length} characters)`)
      const end = Math.min(text.length, offset + Compaction.READ_LIMIT)
      const next = end < text.length ? `; read on with "offset": ${end}` : "; this is the end"
      return {
        output: `[artifact ${artifactId} from ${entry.value.toolName}: characters ${offset}–${end} of ${text.length}${next}]\n${
          text.slice(offset, end)
        }`,
        isError: false
      }
    }).pipe(Effect.catchTag("StoreUnavailable", () => Effect.succeed(errorOutcome("the store is unavailable: try again later"))))

  return { spec: Compaction.readArtifactSpec, run }
}
