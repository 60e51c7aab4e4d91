/**
 * A `Telemetry` that writes each product event as one JSON line: the event's
 * fields, `excluded` and `at` (ISO time), appended to a file or to stderr.
 * Excluded events are written too, with `excluded: true`: whoever reads the
 * file decides what counts as analytics.
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as ConfigError from "effect/ConfigError"
import type * as Scope from "effect/Scope"
import * as Path from "node:path"
import { Line } from "../schema/ProductEvent.js"
import { excluded, Telemetry } from "../services/Telemetry.js"

/** Where lines go: a file (appended, created with its directory) or, without `path`, stderr. */
export interface Options {
  readonly path?: string | undefined
}

const encodeLine = Schema.encodeEither(Line)

/** Builds a log telemetry writing through `write`; lines are written one at a time, in order. */
export const makeWith = (write: (line: string) => Effect.Effect<void>): Effect.Effect<Telemetry["Type"]> =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    return Telemetry.of({
      emit: (event) =>
        Effect.gen(function*() {
          const isExcluded = yield* FiberRef.get(excluded)
          const at = new Date(yield* Clock.currentTimeMillis)
          const line = encodeLine({ ...event, excluded: isExcluded, at } as Line)
          // An event that does not fit its schema is dropped whole, never written in part.
          if (Either.isLeft(line)) return yield* Effect.logWarning("troupe telemetry: dropped an invalid product event")
          yield* lock.withPermits(1)(write(JSON.stringify(line.right) + "\n"))
        }).pipe(Effect.uninterruptible)
    })
  })

/** Node's `FileSystem`, its module loaded when the layer is built (docs/decisions/0044-drivers-load-when-used.md). */
const nodeFileSystem: Layer.Layer<FileSystem.FileSystem> = Layer.unwrapEffect(
  Effect.map(
    Effect.promise((): Promise<typeof import("@effect/platform-node/NodeFileSystem")> => import("@effect/platform-node/NodeFileSystem")),
    (NodeFileSystem) => NodeFileSystem.layer
  )
)

/** Builds a log telemetry over `FileSystem`; the file stays open for the scope. */
export const make = (
  options: Options = {}
): Effect.Effect<Telemetry["Type"], never, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    if (options.path === undefined) {
      return yield* makeWith((line) =>
        Effect.sync(() => {
          process.stderr.write(line)
        })
      )
    }
    const path = options.path
    // The tag's module (@effect/platform's) loads with a telemetry file, not when troupe is imported.
    const { FileSystem } = yield* Effect.promise((): Promise<typeof import("@effect/platform/FileSystem")> => import("@effect/platform/FileSystem"))
    const fs = yield* FileSystem
    const file = yield* fs.makeDirectory(Path.dirname(path), { recursive: true }).pipe(
      Effect.zipRight(fs.open(path, { flag: "a" })),
      // A telemetry file that cannot be opened is a configuration error: fail start-up loudly.
      Effect.orDieWith((error) => new Error(`cannot open the telemetry file ${path}: ${error.message}`))
    )
    const encoder = new TextEncoder()
    return yield* makeWith((line) =>
      file.writeAll(encoder.encode(line)).pipe(
        // A write that fails (disk full) loses this event, never the caller's work.
        Effect.catchAll(() => Effect.void)
      )
    )
  })

/** JSON lines to `path` (appended) or to stderr. */
export const layer = (options: Options = {}): Layer.Layer<Telemetry> =>
  Layer.scoped(Telemetry, make(options)).pipe(Layer.provide(nodeFileSystem))

/** `layer` with the file from `TROUPE_TELEMETRY_FILE` (stderr when unset). */
export const layerConfig: Layer.Layer<Telemetry, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(Config.option(Config.string("TROUPE_TELEMETRY_FILE")), (path) => layer({ path: Option.getOrUndefined(path) }))
)
