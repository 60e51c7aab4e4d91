/**
 * The Node transport's writes: an effect that does nothing until it is run
 * and writes again each time it is run (so `zipRight`, `retry` and reuse
 * behave as they read), with `onWritten` at the moment the bytes leave; and
 * the backpressure it keeps: past the high-water mark writes wait, first in
 * first out, and an interrupted waiting write is dropped whole.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Schedule } from "effect"
import { PassThrough, Writable } from "node:stream"
import * as NodeTransport from "../../src/internal/NodeTransport.js"
import * as Transport from "../../src/protocol/Transport.js"

/** A writable that keeps what it is given; `release` lets a held-back stream take its bytes. */
const sink = (highWaterMark: number, hold = false) => {
  const chunks: Array<string> = []
  const held: Array<() => void> = []
  const output = new Writable({
    highWaterMark,
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString())
      if (hold) held.push(() => callback())
      else callback()
    }
  })
  const release = () => {
    for (const done of held.splice(0)) done()
  }
  return { chunks, output, release, written: () => chunks.join("") }
}

/** Lets the corked writes of this tick reach the stream. */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const bytes = (text: string) => new Uint8Array(Buffer.from(text))

describe("NodeTransport: write", () => {
  it.live("does nothing until it is run, and writes again each time it is run", () =>
    Effect.gen(function*() {
      const out = sink(1024)
      const transport = NodeTransport.fromStreams(new PassThrough(), out.output)
      let written = 0
      const write = transport.write(bytes("a"), () => written++)
      yield* settle
      assert.strictEqual(out.written(), "")
      assert.strictEqual(written, 0)
      yield* write
      assert.strictEqual(written, 1)
      yield* write
      yield* settle
      assert.strictEqual(out.written(), "aa")
      assert.strictEqual(written, 2)
      yield* transport.destroy
    }))

  it.live("zipRight writes in the order the effects run, not the order they were built", () =>
    Effect.gen(function*() {
      const out = sink(1024)
      const transport = NodeTransport.fromStreams(new PassThrough(), out.output)
      const second = transport.write(bytes("second;"))
      yield* Effect.zipRight(Effect.andThen(Effect.yieldNow(), transport.write(bytes("first;"))), second)
      yield* settle
      assert.strictEqual(out.written(), "first;second;")
      yield* transport.destroy
    }))

  it.live("a failed write fails each time it is run; retry runs it again", () =>
    Effect.gen(function*() {
      const out = sink(1024)
      const transport = NodeTransport.fromStreams(new PassThrough(), out.output)
      let runs = 0
      const write = Effect.andThen(Effect.sync(() => runs++), transport.write(bytes("x")))
      yield* transport.destroy
      const exit = yield* Effect.exit(Effect.retry(write, Schedule.recurs(2)))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(runs, 3)
      assert.deepStrictEqual(exit, Exit.fail(new Transport.TransportError({ reason: "closed" })))
      assert.strictEqual(out.written(), "")
    }))

  it.live("past the high-water mark writes wait, in order, and an interrupted one is dropped whole", () =>
    Effect.gen(function*() {
      const out = sink(4, true)
      const transport = NodeTransport.fromStreams(new PassThrough(), out.output)
      const order: Array<string> = []
      // Crosses the mark: handed over at once, and whatever comes next waits for drain.
      yield* transport.write(bytes("aaaaaaaa"), () => order.push("a"))
      const b = yield* Effect.fork(transport.write(bytes("b"), () => order.push("b")))
      const c = yield* Effect.fork(transport.write(bytes("c"), () => order.push("c")))
      const d = yield* Effect.fork(transport.write(bytes("d"), () => order.push("d")))
      yield* settle
      assert.deepStrictEqual(order, ["a"])
      yield* Fiber.interrupt(c)
      while (order.length < 3) {
        out.release()
        yield* settle
      }
      yield* Fiber.join(b)
      yield* Fiber.join(d)
      out.release()
      yield* settle
      assert.deepStrictEqual(order, ["a", "b", "d"])
      assert.strictEqual(out.written(), "aaaaaaaabd")
      yield* transport.destroy
    }))
})
