/**
 * Structured output: the final output of an agent that declares an output
 * schema is a JSON value that must match it. A reply's text (or the `output`
 * argument of its `finish` call) is parsed and checked against the JSON
 * Schema frozen in the agent; what does not match goes back to the model with
 * the problems found (an `output_rejected` record), at most the schema's
 * `maxRetries` times, then the turn fails with `invalid_output`. The output
 * recorded is the value's JSON text, which `Sessions.awaitOutput` decodes
 * with the caller's Effect Schema.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import type { OutputSpec } from "../schema/Agent.js"
import { validate } from "../schema/JsonSchemaValidator.js"

// Models often wrap JSON in a Markdown fence.
const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n?\s*```\s*$/

/** The problems of a value, in one line for the model (at most a few). */
const problemsOf = (spec: OutputSpec, value: unknown): string | undefined => {
  const problems = validate(spec.schema, value)
  if (problems.length === 0) return undefined
  const shown = problems.slice(0, 5).join("; ")
  return problems.length > 5 ? `${shown}; and ${problems.length - 5} more` : shown
}

/** Checks a value against `spec`: its JSON text, or the problems found. */
export const checkValue = (spec: OutputSpec, value: unknown): Either.Either<string, string> => {
  const problems = problemsOf(spec, value)
  return problems === undefined ? Either.right(JSON.stringify(value)) : Either.left(problems)
}

/** Checks a reply's text (JSON, perhaps in a Markdown fence) against `spec`. */
export const checkText = (spec: OutputSpec, text: string): Either.Either<string, string> => {
  const body = fenced.exec(text)?.[1] ?? text
  let value: unknown
  try {
    value = JSON.parse(body)
  } catch (error) {
    return Either.left(`the reply is not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return checkValue(spec, value)
}

/** What the model is told of a rejected output (the transcript carries it, so a restart tells it the same). */
export const rejectionText = (problems: string): string =>
  `Your final output does not match the output schema: ${problems}. Give the final output again, as JSON that matches the schema.`
