/**
 * Chooses the `Telemetry` layer from configuration (the environment by
 * default, or any `ConfigProvider`):
 *
 * - `TROUPE_TELEMETRY_ENABLED=false`: `Telemetry.layerNoop`, and nothing else
 *   is set up (no tracer, no exporter, no file). Tests and CI set it.
 * - `TROUPE_TELEMETRY=noop | log | otel` picks the layer. Unset: `otel` when
 *   `OTEL_EXPORTER_OTLP_ENDPOINT` is set, otherwise `noop`: an embedded
 *   runtime writes no file and sends nothing unless asked to.
 * - `log` writes JSON lines to `TROUPE_TELEMETRY_FILE`, or stderr when unset.
 * - `otel` exports over OTLP/HTTP (`OtelTelemetry.layerConfig`); with
 *   `OTEL_SDK_DISABLED=true` it is `noop`.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ConfigError from "effect/ConfigError"
import * as Telemetry from "../services/Telemetry.js"
import * as LogTelemetry from "./LogTelemetry.js"
import * as OtelTelemetry from "./OtelTelemetry.js"

/** Which telemetry layer runs. */
export type Mode = "noop" | "log" | "otel"

/** The mode the configuration selects (see the module comment). */
export const mode: Config.Config<Mode> = Config.all({
  enabled: Telemetry.enabled,
  chosen: Config.option(Config.literal("noop", "log", "otel")("TROUPE_TELEMETRY")),
  endpoint: Config.option(Config.nonEmptyString("OTEL_EXPORTER_OTLP_ENDPOINT")),
  sdkDisabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false))
}).pipe(
  Config.map(({ chosen, enabled, endpoint, sdkDisabled }): Mode => {
    if (!enabled) return "noop"
    const picked = Option.getOrElse(chosen, (): Mode => (Option.isSome(endpoint) ? "otel" : "noop"))
    return picked === "otel" && sdkDisabled ? "noop" : picked
  })
)

/** The telemetry layer the configuration selects. */
export const layerConfig: Layer.Layer<Telemetry.Telemetry, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(mode, (selected) => {
    switch (selected) {
      case "noop":
        return Telemetry.layerNoop
      case "log":
        return LogTelemetry.layerConfig
      case "otel":
        return OtelTelemetry.layerConfig
    }
  })
)
