/**
 * The functions of `effect/Stream` the socket client makes its streams with,
 * loaded by `LazyStream` when a connection opens. Named one by one rather
 * than imported whole, so that a bundle that inlines effect (the program,
 * `dist/cli/`) keeps only what they use, as it did when the client imported
 * them directly, instead of all of `effect/Stream` (its STM and the rest)
 * beside the code that loads at start.
 *
 * @since 0.3.0
 */
export { catchAll, fail, mapChunks, repeatEffectChunkOption, suspend, toPull, unwrap, unwrapScoped } from "effect/Stream"
