/**
 * The arguments and options every `troupe sessions` subcommand shares:
 * `--json`, and ids checked against their schemas before anything is sent.
 *
 * @since 0.1.0
 */
import { Args, HelpDoc, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { SessionId } from "../../schema/Ids.js"

/** `--json`: JSON lines on stdout, nothing else there. */
export const json = Options.boolean("json").pipe(Options.withDescription("Print JSON lines on stdout."))

/** An id argument checked against its schema: a malformed id is a usage error, not a trip to the daemon. */
export const idArg = <A>(name: string, schema: Schema.Schema<A, string>, description: string) => {
  const decode = Schema.decodeUnknownEither(schema)
  return Args.text({ name }).pipe(
    Args.withDescription(description),
    Args.mapEffect((text) =>
      Either.match(decode(text), {
        onLeft: () => Effect.fail(HelpDoc.p(`${name}: ${JSON.stringify(text.slice(0, 40))} is not a valid id`)),
        onRight: Effect.succeed
      })
    )
  )
}

/** The `SESSION` argument: a session id. */
export const sessionId = idArg("SESSION", SessionId, "The session's id (ses_…).")
