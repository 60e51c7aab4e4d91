/**
 * A `Telemetry` on OpenTelemetry (`@effect/opentelemetry` and the OTel SDK),
 * exporting over OTLP/HTTP (JSON) to `endpoint` + `/v1/traces`, `/v1/logs`
 * and `/v1/metrics`.
 *
 * - Product events become OTel events: log records with `eventName` set to
 *   the event's name and its bounded fields as attributes. One record per
 *   event keeps what the log layer writes and what a collector receives the
 *   same, needs no active span (`daemon.started` has none) and survives trace
 *   sampling. The record carries the trace context of the span it was
 *   emitted in, so it can be joined to the trace there, not by an id.
 * - Each event also counts into a counter named after it (`troupe.turn.ended`
 *   …) with its dimensions as labels, and a turn's usage adds to
 *   `troupe.turn.usage.*` counters: labels are literals and booleans only.
 * - Effect's tracer is replaced by an OTel tracer, so `Effect.withSpan` /
 *   `Effect.fn` spans (turns and operations with their ids) are exported.
 *
 * Events emitted under `Telemetry.withExcluded(true)` are dropped before
 * anything is recorded: no log record, no count. Effect's own logs are not
 * exported (they may hold user content).
 *
 * @since 0.1.0
 */
import type * as OtelLogger from "@effect/opentelemetry/Logger"
import type * as OtelResource from "@effect/opentelemetry/Resource"
import type * as OtelApi from "@opentelemetry/api"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ConfigError from "effect/ConfigError"
import type * as Scope from "effect/Scope"
import { sanitize } from "../schema/ProductEvent.js"
import { excluded, Telemetry } from "../services/Telemetry.js"

/** The OpenTelemetry modules the layer runs on. */
interface Drivers {
  readonly OtelLogger: typeof import("@effect/opentelemetry/Logger")
  readonly NodeSdk: typeof import("@effect/opentelemetry/NodeSdk")
  readonly OtelResource: typeof import("@effect/opentelemetry/Resource")
  readonly OtelTracer: typeof import("@effect/opentelemetry/Tracer")
  readonly OtelApi: typeof import("@opentelemetry/api")
  readonly ApiLogs: typeof import("@opentelemetry/api-logs")
  readonly LogsExporter: typeof import("@opentelemetry/exporter-logs-otlp-http")
  readonly MetricsExporter: typeof import("@opentelemetry/exporter-metrics-otlp-http")
  readonly TraceExporter: typeof import("@opentelemetry/exporter-trace-otlp-http")
  readonly SdkLogs: typeof import("@opentelemetry/sdk-logs")
  readonly SdkMetrics: typeof import("@opentelemetry/sdk-metrics")
  readonly SdkTrace: typeof import("@opentelemetry/sdk-trace-base")
}

/**
 * The OpenTelemetry SDK, loaded when a layer is built or `make` runs, not
 * when troupe is imported: most programs never export to OTel, and the SDK is
 * a large share of an import's time (docs/decisions/0044-drivers-load-when-used.md).
 */
const drivers: Effect.Effect<Drivers> = Effect.promise(async () => {
  const [OtelLogger, NodeSdk, OtelResource, OtelTracer, OtelApi, ApiLogs, LogsExporter, MetricsExporter, TraceExporter, SdkLogs, SdkMetrics, SdkTrace] =
    await Promise.all([
      import("@effect/opentelemetry/Logger"),
      import("@effect/opentelemetry/NodeSdk"),
      import("@effect/opentelemetry/Resource"),
      import("@effect/opentelemetry/Tracer"),
      import("@opentelemetry/api"),
      import("@opentelemetry/api-logs"),
      import("@opentelemetry/exporter-logs-otlp-http"),
      import("@opentelemetry/exporter-metrics-otlp-http"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/sdk-logs"),
      import("@opentelemetry/sdk-metrics"),
      import("@opentelemetry/sdk-trace-base")
    ])
  return { OtelLogger, NodeSdk, OtelResource, OtelTracer, OtelApi, ApiLogs, LogsExporter, MetricsExporter, TraceExporter, SdkLogs, SdkMetrics, SdkTrace }
})

/** How to reach the OTLP receiver and name this service. */
export interface Options {
  /**
   * Base URL of an OTLP/HTTP receiver (`http://collector:4318`). Without it
   * the OTel exporters resolve `OTEL_EXPORTER_OTLP_*` themselves (default
   * `http://localhost:4318`).
   */
  readonly endpoint?: string | undefined
  /** Extra request headers (e.g. an API key); `OTEL_EXPORTER_OTLP_HEADERS` is honoured by the exporters as well. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** `service.name` of the resource; default `troupe`. */
  readonly serviceName?: string | undefined
  /** `service.version` of the resource. */
  readonly serviceVersion?: string | undefined
  /** How often metrics are exported; default 60 s. They are also exported when the layer closes. */
  readonly metricsInterval?: Duration.DurationInput | undefined
  /** How long closing the layer may wait for the last exports; default 3 s. */
  readonly shutdownTimeout?: Duration.DurationInput | undefined
}

/** The counters a turn's usage adds to, with their units. */
const usageCounters = {
  inputTokens: ["troupe.turn.usage.input_tokens", "{token}"],
  outputTokens: ["troupe.turn.usage.output_tokens", "{token}"],
  totalTokens: ["troupe.turn.usage.total_tokens", "{token}"],
  modelCalls: ["troupe.turn.usage.model_calls", "{call}"],
  toolCalls: ["troupe.turn.usage.tool_calls", "{call}"],
  wallTimeMs: ["troupe.turn.usage.wall_time", "ms"],
  costMicros: ["troupe.turn.usage.cost", "{micro}"]
} as const

type Dimension = string | number | boolean

/** Splits an encoded event into its dimensions (dotted keys) and its usage, if any. */
const split = (encoded: object) => {
  const dimensions: Record<string, Dimension> = {}
  let usage: Record<string, number> | undefined
  for (const [key, value] of Object.entries(encoded)) {
    if (key === "event" || value === undefined) continue
    if (key === "usage") usage = value as Record<string, number>
    else if (typeof value === "object" && value !== null) {
      for (const [inner, v] of Object.entries(value)) dimensions[`${key}.${inner}`] = v as Dimension
    } else dimensions[key] = value as Dimension
  }
  return { dimensions, usage }
}

const shutdownOf = (options: Options) => Duration.decode(options.shutdownTimeout ?? Duration.seconds(3))

const url = (options: Options, signal: "traces" | "logs" | "metrics") =>
  options.endpoint === undefined ? {} : { url: `${options.endpoint.replace(/\/+$/, "")}/v1/${signal}` }

const exporterConfig = (options: Options, signal: "traces" | "logs" | "metrics") => ({
  ...url(options, signal),
  ...(options.headers === undefined ? {} : { headers: { ...options.headers } })
})

const resourceLayer = (loaded: Drivers, options: Options): Layer.Layer<OtelResource.Resource> =>
  Layer.unwrapEffect(
    Effect.map(Config.option(Config.string("OTEL_SERVICE_NAME")).pipe(Effect.orDie), (fromEnv) =>
      // OTEL_RESOURCE_ATTRIBUTES is read by layerFromEnv; service.name: the option, then OTEL_SERVICE_NAME, then troupe.
      loaded.OtelResource.layerFromEnv({
        "service.name": options.serviceName ?? Option.getOrElse(fromEnv, () => "troupe"),
        ...(options.serviceVersion === undefined ? {} : { "service.version": options.serviceVersion })
      }))
  )

const meterProvider = ({ MetricsExporter, SdkMetrics, ...loaded }: Drivers, options: Options) =>
  Effect.flatMap(loaded.OtelResource.Resource, (resource) =>
    Effect.acquireRelease(
      Effect.sync(() =>
        new SdkMetrics.MeterProvider({
          resource,
          readers: [
            new SdkMetrics.PeriodicExportingMetricReader({
              exporter: new MetricsExporter.OTLPMetricExporter(exporterConfig(options, "metrics")),
              exportIntervalMillis: Duration.toMillis(options.metricsInterval ?? Duration.minutes(1))
            })
          ]
        })
      ),
      (provider) =>
        Effect.promise(() => provider.forceFlush().then(() => provider.shutdown())).pipe(
          Effect.ignoreLogged,
          Effect.interruptible,
          Effect.timeoutOption(shutdownOf(options))
        )
    ))

/** Builds the telemetry on an OTel logger provider and a meter provider of its own. */
export const make = (
  options: Options = {}
): Effect.Effect<
  Telemetry["Type"],
  never,
  OtelLogger.OtelLoggerProvider | OtelResource.Resource | Scope.Scope
> =>
  Effect.gen(function*() {
    const loaded = yield* drivers
    const { ApiLogs, OtelTracer } = loaded
    const loggerProvider = yield* loaded.OtelLogger.OtelLoggerProvider
    const logger = loggerProvider.getLogger("troupe")
    const meter = (yield* meterProvider(loaded, options)).getMeter("troupe")
    const counters = new Map<string, OtelApi.Counter>()
    const counter = (name: string, unit: string) => {
      let found = counters.get(name)
      if (found === undefined) {
        found = meter.createCounter(name, { unit })
        counters.set(name, found)
      }
      return found
    }
    return Telemetry.of({
      emit: (event) =>
        Effect.gen(function*() {
          // Excluded events never leave the process: not exported, not counted.
          if (yield* FiberRef.get(excluded)) return
          const encoded = sanitize(event)
          if (encoded === undefined) return yield* Effect.logWarning("troupe telemetry: dropped an invalid product event")
          const { dimensions, usage } = split(encoded)
          const attributes: Record<string, Dimension> = { ...dimensions }
          if (usage !== undefined) for (const [key, value] of Object.entries(usage)) attributes[`usage.${key}`] = value
          const span = yield* Effect.option(OtelTracer.currentOtelSpan)
          const now = yield* Clock.currentTimeMillis
          logger.emit({
            eventName: encoded.event,
            severityNumber: ApiLogs.SeverityNumber.INFO,
            severityText: "INFO",
            timestamp: now,
            attributes,
            ...(Option.isSome(span) ? { context: loaded.OtelApi.trace.setSpan(loaded.OtelApi.context.active(), span.value) } : {})
          })
          counter(`troupe.${encoded.event}`, "{event}").add(1, dimensions)
          if (usage !== undefined) {
            for (const [key, [name, unit]] of Object.entries(usageCounters)) {
              const value = usage[key]
              if (value !== undefined && value > 0) counter(name, unit).add(value, dimensions)
            }
          }
        }).pipe(Effect.catchAllDefect(() => Effect.void))
    })
  })

/**
 * Product events as OTel events and counters, and Effect spans as OTel
 * traces, all over OTLP/HTTP. Closing the layer flushes what is pending.
 */
export const layer = (options: Options = {}): Layer.Layer<Telemetry> =>
  Layer.unwrapEffect(
    Effect.map(drivers, (loaded) => {
      const { LogsExporter, NodeSdk, OtelTracer, SdkLogs, SdkTrace, TraceExporter } = loaded
      // Processors and exporters are made per build: a closed layer shuts its own down.
      const spans = new SdkTrace.BatchSpanProcessor(new TraceExporter.OTLPTraceExporter(exporterConfig(options, "traces")))
      const logs = new SdkLogs.BatchLogRecordProcessor({ exporter: new LogsExporter.OTLPLogExporter(exporterConfig(options, "logs")) })
      const tracing = OtelTracer.layer.pipe(
        Layer.provide(NodeSdk.layerTracerProvider(spans, { shutdownTimeout: options.shutdownTimeout })),
        Layer.discard
      )
      const events = Layer.scoped(Telemetry, make(options)).pipe(
        Layer.provide(loaded.OtelLogger.layerLoggerProvider(logs, { shutdownTimeout: options.shutdownTimeout }))
      )
      return Layer.merge(events, tracing).pipe(Layer.provide(resourceLayer(loaded, options)))
    })
  )

/**
 * `layer` configured from the standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT`
 * (else the exporters' default, `http://localhost:4318`), `OTEL_SERVICE_NAME`
 * and `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_EXPORTER_OTLP_HEADERS` is read by the
 * exporters.
 */
export const layerConfig: Layer.Layer<Telemetry, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")), (endpoint) =>
    layer({ endpoint: Option.getOrUndefined(endpoint) }))
)
