/**
 * What a live actor's conversation costs in memory, and what a more compact
 * form would cost per model request (decision 0014). A transcript of
 * `--messages` messages as the soak's turns write them (a user message
 * `message N` and the scripted model's `You said: message N`), in three forms:
 *
 * - objects: one `{ role, content }` per message, as `Transcript` keeps them;
 *   a request's messages are a copy of the array;
 * - strings: one string per message (a role character, then the content),
 *   decoded into messages when a request is built;
 * - chunks: 256 messages per JSON string, parsed when a request is built.
 *
 * Prints the heap after GC per message and the median time to build one
 * request's messages.
 *
 *   node --expose-gc bench/run.mjs transcript [--messages 100000] [--runs 11]
 */
import type * as Model from "../src/services/Model.js"
import { arg, loadAverage, median } from "./support.js"

const count = Number(arg("messages", "100000"))
const runs = Number(arg("runs", "11"))
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")

// Fresh strings, as if decoded from a record (not constants of this file).
const fresh = (text: string): string => JSON.parse(JSON.stringify(text)) as string
const messageAt = (i: number): Model.Message =>
  i % 2 === 0
    ? { role: "user", content: fresh(`message ${i >> 1}`) }
    : { role: "assistant", content: fresh(`You said: message ${i >> 1}`), toolCalls: undefined }

interface Form {
  readonly name: string
  /** Builds the form; returns what a request is given. */
  readonly build: () => () => ReadonlyArray<Model.Message>
}

const forms: ReadonlyArray<Form> = [
  {
    name: "objects (as Transcript keeps them)",
    build: () => {
      const items: Array<Model.Message> = []
      for (let i = 0; i < count; i++) items.push(messageAt(i))
      return () => items.slice(0, items.length)
    }
  },
  {
    name: "one string per message",
    build: () => {
      const items: Array<string> = []
      for (let i = 0; i < count; i++) {
        const message = messageAt(i)
        items.push(fresh((message.role === "user" ? "u" : "a") + message.content))
      }
      return () => {
        const out = new Array<Model.Message>(items.length)
        for (let i = 0; i < items.length; i++) {
          const item = items[i]!
          out[i] = item.charCodeAt(0) === 117 ? { role: "user", content: item.slice(1) } : { role: "assistant", content: item.slice(1) }
        }
        return out
      }
    }
  },
  {
    name: "256 messages per JSON string",
    build: () => {
      const chunks: Array<string> = []
      let chunk: Array<Model.Message> = []
      for (let i = 0; i < count; i++) {
        chunk.push(messageAt(i))
        if (chunk.length === 256) {
          chunks.push(JSON.stringify(chunk))
          chunk = []
        }
      }
      const tail = chunk
      return () => {
        const out: Array<Model.Message> = []
        for (const text of chunks) for (const message of JSON.parse(text) as Array<Model.Message>) out.push(message)
        for (const message of tail) out.push(message)
        return out
      }
    }
  }
]

console.log(`load average: ${loadAverage()}; ${count} messages, ${runs} requests each`)
let request: (() => ReadonlyArray<Model.Message>) | undefined
for (const form of forms) {
  // The previous form goes before this one is measured.
  request = undefined
  gc()
  gc()
  const before = process.memoryUsage().heapUsed
  request = form.build()
  gc()
  gc()
  const perMessage = (process.memoryUsage().heapUsed - before) / count
  const times: Array<number> = []
  for (let r = 0; r < runs; r++) {
    const started = performance.now()
    if (request().length !== count) throw new Error("lost messages")
    times.push(performance.now() - started)
  }
  console.log(`${form.name}: ${perMessage.toFixed(1)} bytes a message after GC; a request's messages in ${median(times).toFixed(2)} ms (median)`)
}
