/**
 * The `CostMeter` prices model calls for the `costMicros` budget and the
 * usage every turn reports. `layerNoop` prices nothing (every call is free).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"

/** A model's price per token, in millionths of the host's currency unit. */
export interface Price {
  readonly inputMicrosPerToken: number
  readonly outputMicrosPerToken: number
}

/** The port. */
export class CostMeter extends Context.Tag("troupe/CostMeter")<
  CostMeter,
  {
    /** The cost of one model call, in micros. */
    readonly cost: (model: string, inputTokens: number, outputTokens: number) => number
  }
>() {}

/** Prices nothing: every call is free. */
export const layerNoop: Layer.Layer<CostMeter> = Layer.succeed(CostMeter, CostMeter.of({ cost: () => 0 }))

/** Prices by model name; models not listed cost `fallback` (default free). */
export const layer = (prices: Readonly<Record<string, Price>>, fallback?: Price): Layer.Layer<CostMeter> =>
  Layer.succeed(
    CostMeter,
    CostMeter.of({
      cost: (model, inputTokens, outputTokens) => {
        const price = Object.hasOwn(prices, model) ? prices[model] : fallback
        if (price === undefined) return 0
        return Math.ceil(inputTokens * price.inputMicrosPerToken + outputTokens * price.outputMicrosPerToken)
      }
    })
  )
