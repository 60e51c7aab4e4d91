/**
 * `troupe agents schema`: prints the JSON Schema (draft 2019-09) of an agents file
 * on stdout, derived from the schema `--agents FILE` is decoded with
 * (`AgentsFileSchema`), so editors can check and complete a file as it is
 * written (`"$schema": "./agents.schema.json"`).
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Help from "./Help.js"
import * as Output from "./Output.js"

/** The `agents schema` subcommand. */
export const command = Command.make("schema", {}, () =>
  Effect.gen(function*() {
    // Loaded when the command runs: the other client commands never need the agent schemas.
    const AgentsFileSchema = yield* Effect.promise(() => import("./AgentsFileSchema.js"))
    const out = yield* Output.make({ json: false })
    yield* out.line(JSON.stringify(AgentsFileSchema.jsonSchema(), null, 2))
  }).pipe(Effect.scoped)).pipe(
    Command.withDescription(Help.describe(
      "Print the JSON Schema of an agents file (`troupe serve --agents FILE`, `troupe run --agents FILE`).",
      [["troupe agents schema > agents.schema.json", "the schema, for an editor: put \"$schema\": \"./agents.schema.json\" in the file"]]
    ))
  )
