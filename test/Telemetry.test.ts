/**
 * Telemetry: the product event schema refuses free text; the log layer writes
 * exactly the events emitted, with the excluded flag; noop and a disabled
 * configuration emit nothing and set nothing up; the OpenTelemetry layer
 * sends events, counters and spans to a real OTLP/HTTP receiver and drops
 * excluded events. Spans are made under any tracer but Effect's built-in one.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, FastCheck as fc, Fiber, Option, Schema, Tracer } from "effect"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { createServer, type IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { gunzipSync } from "node:zlib"
import * as EnvTelemetry from "../src/layers/EnvTelemetry.js"
import * as LogTelemetry from "../src/layers/LogTelemetry.js"
import * as OtelTelemetry from "../src/layers/OtelTelemetry.js"
import { Usage } from "../src/schema/Budget.js"
import { Conflict, SessionNotFound, StoreUnavailable } from "../src/schema/Errors.js"
import * as ProductEvent from "../src/schema/ProductEvent.js"
import * as Telemetry from "../src/services/Telemetry.js"
import { readEvents } from "./support/telemetryFile.js"

const sessionId = "ses_01J00000000000000000000000"
const turnId = "turn_01J00000000000000000000000"
const operationId = "op_01J00000000000000000000000"

const usage = new Usage({
  inputTokens: 120,
  outputTokens: 30,
  totalTokens: 150,
  modelCalls: 2,
  toolCalls: 1,
  toolCallsByName: { "search my secret files": 1 },
  wallTimeMs: 850,
  costMicros: 42
})

const turnEnded = ProductEvent.turnEnded({ kind: "root", status: "failed", failureCode: "budget_exhausted", usage })

const freshFile = () => join(mkdtempSync(join(tmpdir(), "troupe-telemetry-")), "nested", "events.jsonl")


const withConfig = (entries: ReadonlyArray<readonly [string, string]>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(entries)))

/** One request an OTLP receiver got, its JSON body decoded. */
interface OtlpRequest {
  readonly path: string
  readonly contentType: string | undefined
  readonly body: any
}

const readBody = (request: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => resolve(Buffer.concat(parts)))
    request.on("error", reject)
  })

/** A local OTLP/HTTP receiver recording every export, closed with the scope. */
const otlpReceiver = Effect.acquireRelease(
  Effect.async<{ readonly endpoint: string; readonly requests: Array<OtlpRequest> }>((resume) => {
    const requests: Array<OtlpRequest> = []
    const server = createServer((request, response) => {
      void readBody(request).then((raw) => {
        const bytes = request.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw
        requests.push({
          path: request.url ?? "",
          contentType: request.headers["content-type"],
          body: JSON.parse(bytes.toString("utf8"))
        })
        response.writeHead(200, { "content-type": "application/json" })
        response.end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed(Object.assign({ endpoint: `http://127.0.0.1:${port}`, requests }, { server })))
    })
  }),
  (receiver) => Effect.async<void>((resume) => (receiver as any).server.close(() => resume(Effect.void)))
)

/** An OTLP attribute list as a plain object. */
const attributesOf = (list: ReadonlyArray<{ key: string; value: Record<string, unknown> }> = []) =>
  Object.fromEntries(
    list.map(({ key, value }) => {
      const v = value.stringValue ?? value.boolValue ?? value.intValue ?? value.doubleValue
      return [key, typeof v === "string" && /^\d+$/.test(v) && value.intValue !== undefined ? Number(v) : v]
    })
  )

const logRecordsOf = (requests: ReadonlyArray<OtlpRequest>) =>
  requests.filter((r) => r.path === "/v1/logs").flatMap((r) =>
    r.body.resourceLogs.flatMap((rl: any) => rl.scopeLogs.flatMap((sl: any) => sl.logRecords))
  )

const spansOf = (requests: ReadonlyArray<OtlpRequest>) =>
  requests.filter((r) => r.path === "/v1/traces").flatMap((r) =>
    r.body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans))
  )

/** The metrics of the last export: counters are cumulative, each export repeats the totals. */
const metricsOf = (requests: ReadonlyArray<OtlpRequest>) =>
  requests.filter((r) => r.path === "/v1/metrics").slice(-1).flatMap((r) =>
    r.body.resourceMetrics.flatMap((rm: any) => rm.scopeMetrics.flatMap((sm: any) => sm.metrics))
  )

/** The value of a counter summed over its data points whose labels include `labels`. */
const counted = (metrics: ReadonlyArray<any>, name: string, labels: Record<string, unknown> = {}) =>
  metrics.filter((m) => m.name === name).flatMap((m) => m.sum.dataPoints).filter((point: any) => {
    const attributes = attributesOf(point.attributes)
    return Object.entries(labels).every(([key, value]) => attributes[key] === value)
  }).reduce((total: number, point: any) => total + Number(point.asInt ?? point.asDouble ?? 0), 0)

describe("ProductEvent", () => {
  it("constructors make valid events and keep only bounded fields", () => {
    assert.deepStrictEqual(ProductEvent.sessionStarted("child"), { event: "session.started", kind: "child" })
    // Per-tool counts carry tool names: they never reach an event.
    assert.deepStrictEqual(turnEnded, {
      event: "turn.ended",
      kind: "root",
      status: "failed",
      failureCode: "budget_exhausted",
      usage: {
        inputTokens: 120,
        outputTokens: 30,
        totalTokens: 150,
        modelCalls: 2,
        toolCalls: 1,
        wallTimeMs: 850,
        costMicros: 42
      }
    })
    assert.deepStrictEqual(ProductEvent.failure("daemon.failed", "unavailable"), {
      event: "daemon.failed",
      category: "unavailable",
      status: 503
    })
    // A failure code without a failed status is left out rather than contradicting it.
    assert.notProperty(ProductEvent.turnEnded({ kind: "root", status: "completed", failureCode: "internal", usage }), "failureCode")
    for (const event of [turnEnded, ProductEvent.sessionStarted("root"), ProductEvent.failure("auth.failed", "unauthenticated")]) {
      assert.isTrue(Schema.is(ProductEvent.ProductEvent)(event))
    }
  })

  it("sanitize keeps declared fields only, so smuggled text is never written", () => {
    const smuggled = {
      ...ProductEvent.sessionStarted("root"),
      title: "my secret project",
      agent: "alice's agent",
      sessionId,
      message: "upstream said: quota exceeded for user bob"
    }
    assert.deepStrictEqual(ProductEvent.sanitize(smuggled), { event: "session.started", kind: "root" })
    assert.deepStrictEqual(ProductEvent.sanitize({ ...turnEnded, usage }), turnEnded)
    assert.notInclude(JSON.stringify(ProductEvent.sanitize({ ...turnEnded, usage })), "secret")
  })

  it("refuses any string outside the literals, in every dimension", () => {
    const decode = Schema.decodeUnknownEither(ProductEvent.ProductEvent)
    const literals = new Set<string>([
      ...ProductEvent.eventNames,
      "root",
      "child",
      "completed",
      "failed",
      "interrupted",
      "budget_exhausted",
      "max_cycles",
      "model_error",
      "tool_error",
      "session_closed",
      "internal",
      "invalid_input",
      "unauthenticated",
      "forbidden",
      "not_found",
      "conflict",
      "unavailable",
      "memory",
      "sqlite",
      "postgres",
      "scripted",
      "openai_compatible",
      "effect_ai",
      "custom",
      "micro",
      "summary",
      "compacted",
      "rejected"
    ])
    const freeText = fc.string().filter((s) => !literals.has(s))
    const valid: ReadonlyArray<ProductEvent.ProductEvent> = [
      ProductEvent.sessionStarted("root"),
      turnEnded,
      ProductEvent.daemonStarted({ listeners: { unix: true, tcp: false, stdio: false }, store: "sqlite", model: "scripted" }),
      ProductEvent.failure("session.failed", "conflict"),
      ProductEvent.compactionStarted("micro", 5_000),
      ProductEvent.compactionCompleted("summary", "rejected", { tokensBefore: 5_000, tokensAfter: 5_100, archived: 0 })
    ]
    const stringFields = (event: Record<string, unknown>): Array<ReadonlyArray<string>> =>
      Object.entries(event).flatMap(([key, value]) =>
        typeof value === "string"
          ? [[key]]
          : typeof value === "object" && value !== null
          ? stringFields(value as Record<string, unknown>).map((path) => [key, ...path])
          : []
      )
    const replace = (event: Record<string, unknown>, path: ReadonlyArray<string>, text: string): Record<string, unknown> => {
      const [head, ...rest] = path
      return { ...event, [head!]: rest.length === 0 ? text : replace(event[head!] as Record<string, unknown>, rest, text) }
    }
    fc.assert(
      fc.property(fc.constantFrom(...valid), freeText, (event, text) => {
        for (const path of stringFields(event)) {
          assert.isTrue(Either.isLeft(decode(replace(event, path, text))), `${path.join(".")} accepted ${JSON.stringify(text)}`)
          assert.isUndefined(ProductEvent.sanitize(replace(event, path, text)))
        }
      })
    )
    // Usage is numbers only, and a status must match its category.
    fc.assert(
      fc.property(freeText, (text) => {
        assert.isTrue(Either.isLeft(decode({ ...turnEnded, usage: { ...turnEnded.usage, inputTokens: text } })))
        assert.isTrue(Either.isLeft(decode({ ...turnEnded, failureCode: text })))
      })
    )
    assert.isTrue(Either.isLeft(decode({ event: "session.failed", category: "conflict", status: 500 })))
    assert.isTrue(Either.isLeft(decode({ event: "session.failed", category: "conflict", status: 418 })))
    assert.isTrue(Either.isLeft(decode({ ...turnEnded, failureCode: undefined })))
    assert.isTrue(Either.isLeft(decode({ ...turnEnded, usage: { ...turnEnded.usage, costMicros: -1 } })))
    assert.isTrue(Either.isLeft(decode({ ...turnEnded, usage: { ...turnEnded.usage, wallTimeMs: 1.5 } })))
  })

  it("categoryOf reads tags and wire kinds, never messages", () => {
    assert.strictEqual(ProductEvent.categoryOf(new SessionNotFound({ sessionId })), "not_found")
    assert.strictEqual(ProductEvent.categoryOf(new Conflict({ entity: "session", key: "k", reason: "different bytes" })), "conflict")
    assert.strictEqual(ProductEvent.categoryOf(new StoreUnavailable({ operation: "create", cause: new Error("x") })), "unavailable")
    assert.strictEqual(ProductEvent.categoryOf({ _tag: "WireError", kind: "unauthenticated", message: "bad token" }), "unauthenticated")
    assert.strictEqual(ProductEvent.categoryOf({ _tag: "WireError", kind: "invalid_payload" }), "invalid_input")
    assert.strictEqual(ProductEvent.categoryOf(new Error("not_found")), "internal")
    assert.strictEqual(ProductEvent.categoryOf("not_found"), "internal")
  })
})

describe("LogTelemetry", () => {
  it.effect("writes exactly the events emitted, one JSON line each, with the excluded flag", () =>
    Effect.gen(function*() {
      const path = freshFile()
      yield* Effect.gen(function*() {
        const telemetry = yield* Telemetry.Telemetry
        yield* telemetry.emit(ProductEvent.sessionStarted("root"))
        yield* telemetry.emit(turnEnded).pipe(Telemetry.withExcluded(true))
        // Forked fibers inherit the flag of the fiber that forked them.
        const child = yield* Effect.fork(telemetry.emit(ProductEvent.failure("provider.failed", "forbidden")))
        yield* Fiber.join(child).pipe(Telemetry.withExcluded(false))
        yield* Effect.gen(function*() {
          const fiber = yield* Effect.fork(Telemetry.emit(ProductEvent.sessionStarted("child")))
          yield* Fiber.join(fiber)
          assert.isTrue(yield* Telemetry.isExcluded)
        }).pipe(Telemetry.withExcluded(true))
        assert.isFalse(yield* Telemetry.isExcluded)
        // An event that does not fit the schema is dropped whole.
        yield* telemetry.emit({ event: "session.started", kind: "my agent" } as unknown as ProductEvent.ProductEvent)
      }).pipe(Effect.provide(LogTelemetry.layer({ path })))
      const lines = readEvents(path)
      const at = "1970-01-01T00:00:00.000Z"
      assert.deepStrictEqual(lines, [
        { event: "session.started", kind: "root", excluded: false, at },
        { ...turnEnded, excluded: true, at },
        { event: "provider.failed", category: "forbidden", status: 403, excluded: false, at },
        { event: "session.started", kind: "child", excluded: true, at }
      ])
      assert.notInclude(readFileSync(path, "utf8"), "secret")
    }))

  it.effect("appends to an existing file", () =>
    Effect.gen(function*() {
      const path = freshFile()
      const once = Telemetry.emit(ProductEvent.sessionStarted("root")).pipe(Effect.provide(LogTelemetry.layer({ path })))
      yield* once
      yield* once
      assert.lengthOf(readEvents(path), 2)
    }))

  it.effect("writes to stderr without a path", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      const original = process.stderr.write
      process.stderr.write = ((chunk: string) => {
        written.push(chunk)
        return true
      }) as typeof process.stderr.write
      yield* Telemetry.emit(ProductEvent.sessionStarted("root")).pipe(
        Effect.provide(LogTelemetry.layer()),
        Effect.ensuring(Effect.sync(() => (process.stderr.write = original)))
      )
      assert.deepStrictEqual(written.map((line) => JSON.parse(line)), [
        { event: "session.started", kind: "root", excluded: false, at: "1970-01-01T00:00:00.000Z" }
      ])
    }))
})

describe("noop and configuration", () => {
  it.effect("noop emits nothing and leaves Effect's tracer alone", () =>
    Effect.gen(function*() {
      const before = yield* Effect.tracer
      yield* Effect.gen(function*() {
        yield* Telemetry.emit(turnEnded)
        assert.strictEqual(yield* Effect.tracer, before)
      }).pipe(Effect.provide(Telemetry.layerNoop))
    }))

  it.effect("emitIfProvided is a no-op without a Telemetry", () => Telemetry.emitIfProvided(turnEnded))

  it.effect("selects the mode from configuration", () =>
    Effect.gen(function*() {
      const modeOf = (entries: ReadonlyArray<readonly [string, string]>) => EnvTelemetry.mode.pipe(withConfig(entries))
      assert.strictEqual(yield* modeOf([]), "noop")
      assert.strictEqual(yield* modeOf([["OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"]]), "otel")
      assert.strictEqual(yield* modeOf([["TROUPE_TELEMETRY", "log"]]), "log")
      assert.strictEqual(
        yield* modeOf([["TROUPE_TELEMETRY", "noop"], ["OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"]]),
        "noop"
      )
      assert.strictEqual(
        yield* modeOf([["OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"], ["OTEL_SDK_DISABLED", "true"]]),
        "noop"
      )
      for (const chosen of ["log", "otel"]) {
        assert.strictEqual(
          yield* modeOf([
            ["TROUPE_TELEMETRY_ENABLED", "false"],
            ["TROUPE_TELEMETRY", chosen],
            ["OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"]
          ]),
          "noop"
        )
      }
      assert.isTrue(Either.isLeft(yield* Effect.either(modeOf([["TROUPE_TELEMETRY", "console"]]))))
    }))

  it.scoped("TROUPE_TELEMETRY_ENABLED=false emits nothing at all: no file, no request, no tracer", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      const path = freshFile()
      const before = yield* Effect.tracer
      for (const chosen of ["log", "otel"]) {
        yield* Effect.gen(function*() {
          yield* Telemetry.emit(ProductEvent.sessionStarted("root"))
          yield* Telemetry.emit(turnEnded).pipe(Telemetry.withTurnSpan({ sessionId, turnId, epoch: 1 }))
          assert.strictEqual(yield* Effect.tracer, before)
        }).pipe(
          Effect.provide(EnvTelemetry.layerConfig),
          withConfig([
            ["TROUPE_TELEMETRY_ENABLED", "false"],
            ["TROUPE_TELEMETRY", chosen],
            ["TROUPE_TELEMETRY_FILE", path],
            ["OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint]
          ])
        )
      }
      assert.isFalse(existsSync(path))
      assert.lengthOf(receiver.requests, 0)
    }))

  it.effect("TROUPE_TELEMETRY=log writes to TROUPE_TELEMETRY_FILE", () =>
    Effect.gen(function*() {
      const path = freshFile()
      yield* Telemetry.emit(ProductEvent.sessionStarted("root")).pipe(
        Effect.provide(EnvTelemetry.layerConfig),
        withConfig([["TROUPE_TELEMETRY", "log"], ["TROUPE_TELEMETRY_FILE", path]])
      )
      assert.deepStrictEqual(readEvents(path), [
        { event: "session.started", kind: "root", excluded: false, at: "1970-01-01T00:00:00.000Z" }
      ])
    }))
})

describe("Telemetry spans", () => {
  const operation = Effect.map(Effect.option(Effect.currentSpan), Option.map((span) => span.name)).pipe(
    Telemetry.withOperationSpan("tool", { sessionId, turnId, operationId, epoch: 2 }, { "troupe.tool": "echo" }),
    Telemetry.withTurnSpan({ sessionId, turnId, epoch: 2 })
  )

  it.effect("under Effect's built-in tracer none is made: the caller's span is the current one", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* operation, Option.none())
      assert.deepStrictEqual(yield* Effect.withSpan(operation, "caller"), Option.some("caller"))
    }))

  it.effect("under a tracer of one's own, turn and operation spans are made, nested, with their ids, and ended", () =>
    Effect.gen(function*() {
      const made: Array<Tracer.Span> = []
      const native = yield* Effect.tracer
      const recording = Tracer.make({
        span: (...args) => {
          const span = native.span(...args)
          made.push(span)
          return span
        },
        context: (f) => f()
      })
      assert.deepStrictEqual(yield* Effect.withTracer(operation, recording), Option.some("troupe.tool_call"))
      assert.deepStrictEqual(made.map((span) => span.name), ["troupe.turn", "troupe.tool_call"])
      const [turn, tool] = made
      assert.strictEqual(Option.getOrUndefined(tool!.parent)?.spanId, turn!.spanId)
      assert.strictEqual(tool!.attributes.get("troupe.operation_id"), operationId)
      assert.strictEqual(tool!.attributes.get("troupe.tool"), "echo")
      assert.strictEqual(turn!.attributes.get("troupe.lease_epoch"), 2)
      assert.isTrue(made.every((span) => span.status._tag === "Ended"))
    }))
})

describe("OtelTelemetry", () => {
  it.scoped("exports events, counters and spans over OTLP/HTTP, and drops excluded events", () =>
    Effect.gen(function*() {
      const receiver = yield* otlpReceiver
      yield* Effect.gen(function*() {
        yield* Telemetry.emit(ProductEvent.daemonStarted({
          listeners: { unix: true, tcp: false, stdio: false },
          store: "sqlite",
          model: "scripted"
        }))
        yield* Telemetry.emit(ProductEvent.sessionStarted("root"))
        yield* Effect.gen(function*() {
          yield* Effect.void.pipe(
            Telemetry.withOperationSpan("tool", { sessionId, turnId, operationId, epoch: 3 })
          )
          yield* Telemetry.emit(turnEnded)
        }).pipe(Telemetry.withTurnSpan({ sessionId, turnId, epoch: 3 }))
        // A connection that asked to be excluded: none of this leaves the process.
        yield* Effect.gen(function*() {
          yield* Telemetry.emit(ProductEvent.sessionStarted("root"))
          yield* Telemetry.emit(ProductEvent.failure("session.failed", "conflict"))
          const fiber = yield* Effect.fork(Telemetry.emit(ProductEvent.sessionStarted("child")))
          yield* Fiber.join(fiber)
        }).pipe(Telemetry.withExcluded(true))
      }).pipe(Effect.provide(OtelTelemetry.layer({ endpoint: receiver.endpoint, serviceName: "troupe-test" })))

      const { requests } = receiver
      assert.isTrue(requests.every((r) => r.contentType?.startsWith("application/json")))

      // Events: one log record per event that was not excluded, named, with its dimensions.
      const records = logRecordsOf(requests)
      assert.deepStrictEqual(records.map((r: any) => r.eventName), ["daemon.started", "session.started", "turn.ended"])
      assert.deepStrictEqual(attributesOf(records[0].attributes), {
        "listeners.unix": true,
        "listeners.tcp": false,
        "listeners.stdio": false,
        store: "sqlite",
        model: "scripted"
      })
      assert.deepStrictEqual(attributesOf(records[2].attributes), {
        kind: "root",
        status: "failed",
        failureCode: "budget_exhausted",
        "usage.inputTokens": 120,
        "usage.outputTokens": 30,
        "usage.totalTokens": 150,
        "usage.modelCalls": 2,
        "usage.toolCalls": 1,
        "usage.wallTimeMs": 850,
        "usage.costMicros": 42
      })

      // Spans carry the ids; the event emitted inside the turn joins its trace by context.
      const spans = spansOf(requests)
      const turn = spans.find((s: any) => s.name === "troupe.turn")
      const tool = spans.find((s: any) => s.name === "troupe.tool_call")
      assert.deepStrictEqual(attributesOf(turn.attributes), {
        "troupe.session_id": sessionId,
        "troupe.turn_id": turnId,
        "troupe.lease_epoch": 3
      })
      assert.deepInclude(attributesOf(tool.attributes), {
        "troupe.session_id": sessionId,
        "troupe.turn_id": turnId,
        "troupe.operation_id": operationId,
        "troupe.lease_epoch": 3
      })
      assert.strictEqual(tool.parentSpanId, turn.spanId)
      assert.strictEqual(records[2].traceId, turn.traceId)
      assert.strictEqual(records[2].spanId, turn.spanId)
      const resource = attributesOf(requests.find((r) => r.path === "/v1/traces")!.body.resourceSpans[0].resource.attributes)
      assert.strictEqual(resource["service.name"], "troupe-test")

      // Counters: excluded events are not counted; labels are bounded dimensions, never ids.
      const metrics = metricsOf(requests)
      assert.strictEqual(counted(metrics, "troupe.session.started"), 1)
      assert.strictEqual(counted(metrics, "troupe.session.failed"), 0)
      assert.strictEqual(counted(metrics, "troupe.turn.ended", { status: "failed", failureCode: "budget_exhausted" }), 1)
      assert.strictEqual(counted(metrics, "troupe.turn.usage.input_tokens", { kind: "root" }), 120)
      assert.strictEqual(counted(metrics, "troupe.turn.usage.wall_time"), 850)
      const labels = metrics.flatMap((m: any) => m.sum.dataPoints.flatMap((p: any) => p.attributes ?? []))
      for (const { value } of labels) {
        const v = value.stringValue ?? value.boolValue ?? value.intValue
        assert.notMatch(String(v), /^(ses|turn|op)_/)
      }

      // Nothing that was excluded, and no free text, reached the receiver.
      const everything = JSON.stringify(requests.map((r) => r.path === "/v1/traces" ? null : r.body))
      assert.notInclude(everything, "session.failed")
      assert.notInclude(everything, "secret")
      assert.notInclude(everything, sessionId)
    }))
})
