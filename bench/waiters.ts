/**
 * Why the hosts keep their own waiter primitive (src/internal/Waiters.ts)
 * instead of a `Deferred` in `Effect.acquireUseRelease`: the cost of one
 * wait as the send path has it (register interest, the answer comes, await
 * it, withdraw), in Effect steps' wall time, both ways side by side,
 * alternating rounds.
 *
 *   node bench/run.mjs waiters [--ops 200000] [--rounds 5]
 */
import { Deferred, Effect, Exit } from "effect"
import * as Waiters from "../src/internal/Waiters.js"
import { interested } from "../src/services/SessionHost.js"
import { arg, loadAverage, median } from "./support.js"

const ops = Number(arg("ops", "200000"))
const rounds = Number(arg("rounds", "5"))

/** The primitive: a registry cell, withdrawn by `interested`. */
const cells = Effect.gen(function*() {
  const registry = Waiters.registry<number, number, never>()
  for (let i = 0; i < ops; i++) {
    yield* interested(Effect.sync(() => registry.register(i)), (interest) => {
      registry.settle(i, Exit.succeed(i))
      return interest.await
    })
  }
})

/** The same with Effect's parts: a Deferred in a map, acquireUseRelease to withdraw it. */
const deferreds = Effect.gen(function*() {
  const map = new Map<number, Deferred.Deferred<number>>()
  for (let i = 0; i < ops; i++) {
    yield* Effect.acquireUseRelease(
      Effect.map(Deferred.make<number>(), (deferred) => {
        map.set(i, deferred)
        return deferred
      }),
      (deferred) => Effect.zipRight(Deferred.succeed(map.get(i)!, i), Deferred.await(deferred)),
      () => Effect.sync(() => map.delete(i))
    )
  }
})

const time = (effect: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    yield* effect
    return ((performance.now() - t0) * 1e6) / ops
  })

await Effect.runPromise(Effect.gen(function*() {
  console.log(`one wait (register, answer, await, withdraw), ${ops} per round, ${rounds} rounds; load ${loadAverage()}`)
  yield* time(cells)
  yield* time(deferreds)
  const a: Array<number> = []
  const b: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    a.push(yield* time(cells))
    b.push(yield* time(deferreds))
  }
  console.log(`  Waiters cell + interested         median ${median(a).toFixed(0)} ns/wait`)
  console.log(`  Deferred + acquireUseRelease      median ${median(b).toFixed(0)} ns/wait`)
  console.log(`  ratio                             ${(median(b) / median(a)).toFixed(2)}× ; load after ${loadAverage()}`)
}))
