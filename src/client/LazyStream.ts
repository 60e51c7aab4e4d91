/**
 * effect's `Stream` module for the socket client, loaded when the first
 * connection opens rather than on `import "troupe/client"`: `effect/Stream`
 * brings 69 of effect's modules (channels, sinks, STM) that nothing else the
 * client's import loads, about a tenth of the import's CPU (issue 33,
 * decision 0050). Only a connected client makes streams (a stream exchange's
 * `frames`, a session's `events`), so `AgentClient`'s connect loads it first
 * (`load`) and the code that makes them reads it synchronously (`get`).
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import type * as StreamModule from "./StreamFunctions.js"

let loaded: typeof StreamModule | undefined

/** The client's `effect/Stream` functions (`StreamFunctions`), imported the first time. */
export const load: Effect.Effect<typeof StreamModule> = Effect.suspend(() =>
  loaded !== undefined
    ? Effect.succeed(loaded)
    : Effect.map(Effect.promise(() => import("./StreamFunctions.js")), (module) => (loaded = module))
)

/**
 * The client's `effect/Stream` functions, once `load` has run: a connection (`AgentClient.make`)
 * loads it before it exists, so whatever makes a stream of one finds it.
 */
export const get = (): typeof StreamModule => {
  if (loaded === undefined) {
    throw new Error("effect/Stream is not loaded: a client's streams come from a connection (AgentClient.make)")
  }
  return loaded
}
