/**
 * `troupe protocol schema --out DIR` and `troupe protocol types --out DIR`:
 * the wire protocol for clients in other languages (`ProtocolSchema`), written
 * as files. Each prints the paths it wrote on stdout, one per line.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import * as Effect from "effect/Effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import * as ExitCode from "./ExitCode.js"
import * as Help from "./Help.js"
import * as Output from "./Output.js"

const out = Options.text("out").pipe(
  Options.withPseudoName("DIR"),
  Options.withDescription("The directory to write into (created when missing; files already there are replaced)."),
  Options.map((dir) => resolve(dir))
)

/** Writes `files` (paths relative to `dir`) and prints each path. */
const write = (dir: string, files: ReadonlyArray<readonly [string, string]>) =>
  Effect.gen(function*() {
    const output = yield* Output.make({ json: false })
    for (const [path, text] of files) {
      const target = join(dir, path)
      yield* Effect.try({
        try: () => {
          mkdirSync(dirname(target), { recursive: true })
          writeFileSync(target, text)
        },
        catch: (error) =>
          ExitCode.usage(`--out: cannot write ${target} (${(error as NodeJS.ErrnoException).code ?? String(error)})`, "give a directory you can write to")
      })
      yield* output.line(target)
    }
  }).pipe(Effect.scoped)

const load = Effect.promise(() => import("./ProtocolSchema.js"))

const schema = Command.make("schema", { out }, (o) =>
  Effect.flatMap(load, (ProtocolSchema) =>
    write(o.out, [...ProtocolSchema.schemaFiles()].map(([path, json]) => [path, `${JSON.stringify(json, null, 2)}\n`] as const)))).pipe(
  Command.withDescription(Help.describe(
    "Write a JSON Schema (draft-07) for every wire message payload, log record and session event, derived from troupe's own schemas; index.json lists them by message type.",
    [
      ["troupe protocol schema --out schema", "schema/messages/<type>.<request|answer>.json, schema/records/…, schema/events/…, schema/index.json"]
    ]
  ))
)

const types = Command.make("types", { out }, (o) =>
  Effect.flatMap(load, (ProtocolSchema) => write(o.out, [["troupe-protocol.d.ts", ProtocolSchema.declarations()]]))).pipe(
  Command.withDescription(Help.describe(
    "Write self-contained TypeScript declarations (troupe-protocol.d.ts) of every wire message payload, log record and session event.",
    [
      ["troupe protocol types --out src/generated", "src/generated/troupe-protocol.d.ts, with a Payloads map by \"<type>.<request|answer>\""]
    ]
  ))
)

/** The `protocol` command and its subcommands. */
export const command = Command.make("protocol").pipe(
  Command.withDescription(Help.describe("The wire protocol for clients in other languages: JSON Schemas and TypeScript declarations.", [
    ["troupe protocol schema --out schema", "the JSON Schemas"],
    ["troupe protocol types --out types", "the TypeScript declarations"]
  ])),
  Command.withSubcommands([schema, types])
)

/** `protocol`'s subcommands, for the check before parsing. */
export const subcommands = { schema, types }
