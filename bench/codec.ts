/**
 * Wire codec figures: frames per second through encode (payload CBOR,
 * envelope, frame) and decode (incremental framing, envelope, payload CBOR)
 * for a `session.event`-sized message, plus the framing layer alone. Each
 * figure is the median of several rounds.
 *
 *   node bench/run.mjs codec [--rounds 5] [--frames 200000] [--chunk 65536]
 *
 * Decoding is fed the encoded stream in `--chunk`-byte slices (a socket's
 * typical read size), so frames straddle chunk boundaries as they do live.
 */
import { Either } from "effect"
import { availableParallelism } from "node:os"
import * as Cbor from "../src/protocol/Cbor.js"
import * as Envelope from "../src/protocol/Envelope.js"
import * as Frame from "../src/protocol/Frame.js"
import { arg, loadAverage, median } from "./support.js"

const rounds = Number(arg("rounds", "5"))
const framesPerRound = Number(arg("frames", "200000"))
const chunkSize = Number(arg("chunk", "65536"))

/** A streamed text delta as `session.events` sends it: the commonest frame on a busy connection. */
const payload = (i: number) => ({
  cursor: `c_${String(1_000_000 + i)}`,
  event: {
    _tag: "text_delta",
    sessionId: "ses_01J9ZQ4M7X8K2V5T3R6N1B0C9D",
    turnId: "trn_01J9ZQ4N2W7H5G3F1E9D8C7B6A",
    seq: 1000 + i,
    delta: "The quick brown fox jumps over the lazy dog. ",
    at: 1_727_000_000_000 + i
  }
})

const sample = Either.getOrThrow(Envelope.encodeBody("session.event", payload(0)))
const payloads = Array.from({ length: 1024 }, (_, i) => payload(i))

const encodeRound = () => {
  const started = performance.now()
  let bytes = 0
  for (let i = 0; i < framesPerRound; i++) {
    const body = Envelope.encodeBodyUnsafe("session.event", payloads[i & 1023])
    bytes += Frame.encodeUnsafe({ id: 1 + (i & 0xffff), flags: Frame.FLAG_SESSION_START, body }).length
  }
  return { perSecond: framesPerRound / ((performance.now() - started) / 1000), bytes }
}

const stream = (() => {
  const frames: Array<Uint8Array> = []
  for (let i = 0; i < framesPerRound; i++) {
    const body = Envelope.encodeBodyUnsafe("session.event", payloads[i & 1023])
    frames.push(Frame.encodeUnsafe({ id: 1 + (i & 0xffff), flags: 0, body }))
  }
  const all = Buffer.concat(frames)
  const chunks: Array<Uint8Array> = []
  // Copies, so the decoder sees independent buffers as it would from a socket.
  for (let i = 0; i < all.length; i += chunkSize) chunks.push(Buffer.from(all.subarray(i, i + chunkSize)))
  return { chunks, bytes: all.length }
})()

const decodeRound = (withBody: boolean) => {
  const decoder = Frame.makeDecoder()
  const started = performance.now()
  let count = 0
  let checksum = 0
  for (const chunk of stream.chunks) {
    for (const frame of decoder.push(chunk).frames) {
      count++
      if (withBody) {
        const body = Envelope.decodeBody(frame.body)
        if (Either.isLeft(body)) throw new Error(body.left.message)
        checksum += (body.right.payload as { event: { seq: number } }).event.seq
      } else {
        checksum += frame.body.length
      }
    }
  }
  if (count !== framesPerRound || checksum === 0) throw new Error(`decoded ${count} of ${framesPerRound} frames`)
  return framesPerRound / ((performance.now() - started) / 1000)
}

const frameOnlyEncodeRound = () => {
  const started = performance.now()
  for (let i = 0; i < framesPerRound; i++) Frame.encodeUnsafe({ id: i & 0xffff, flags: 0, body: sample })
  return framesPerRound / ((performance.now() - started) / 1000)
}

const cborOnlyRound = () => {
  const started = performance.now()
  for (let i = 0; i < framesPerRound; i++) Cbor.decode(Either.getOrThrow(Cbor.encode(payloads[i & 1023])))
  return framesPerRound / ((performance.now() - started) / 1000)
}

// One unmeasured round of each so the JIT has settled before timing.
encodeRound()
decodeRound(true)
decodeRound(false)
frameOnlyEncodeRound()
cborOnlyRound()

const results: Record<string, number> = {}
const measure = (name: string, run: () => number) => {
  const runs: Array<number> = []
  for (let r = 0; r < rounds; r++) runs.push(run())
  results[name] = median(runs)
}
measure("encode frames/s (payload+envelope+frame)", () => encodeRound().perSecond)
measure("decode frames/s (frame+envelope+payload)", () => decodeRound(true))
measure("encode frames/s (frame only)", frameOnlyEncodeRound)
measure("decode frames/s (frame only)", () => decodeRound(false))
measure("payload CBOR encode+decode/s", cborOnlyRound)

console.log(
  `node ${process.version}, ${availableParallelism()} CPUs, load average ${loadAverage()}`
)
console.log(
  `rounds ${rounds}, frames/round ${framesPerRound}, chunk ${chunkSize} B, body ${sample.length} B, frame ${
    sample.length + Frame.HEADER_SIZE
  } B`
)
for (const [k, v] of Object.entries(results)) {
  console.log(`  ${k.padEnd(44)} ${Math.round(v).toLocaleString("en-US").padStart(12)}`)
}
const decodeRate = results["decode frames/s (frame+envelope+payload)"]!
console.log(`  ${"decode MB/s (full)".padEnd(44)} ${((decodeRate * (sample.length + Frame.HEADER_SIZE)) / 1e6).toFixed(1).padStart(12)}`)
