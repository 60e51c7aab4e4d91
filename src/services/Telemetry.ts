/**
 * The `Telemetry` port: product events (`ProductEvent`) with bounded
 * dimensions, and the span attributes turns and operations carry.
 *
 * Layers: `layerNoop` here; `LogTelemetry.layer` (JSON lines to a file or
 * stderr), `OtelTelemetry.layer` (OpenTelemetry over OTLP/HTTP) and
 * `EnvTelemetry.layerConfig` (picks one from `TROUPE_TELEMETRY_*`) in
 * `src/layers/`, so that importing the port never loads an exporter.
 *
 * A connection whose client asked to be excluded from analytics runs its
 * fibers under `withExcluded(true)`; every event emitted in them (and in the
 * fibers they fork) is marked excluded. The log layer writes the flag; the
 * OpenTelemetry layer drops the event.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Tracer from "effect/Tracer"
import { dual } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import type { ProductEvent } from "../schema/ProductEvent.js"

/** The port. */
export class Telemetry extends Context.Tag("troupe/Telemetry")<
  Telemetry,
  {
    /**
     * Reports one product event. Never fails and never waits for a network
     * exporter; an event that does not fit its schema is dropped.
     */
    readonly emit: (event: ProductEvent) => Effect.Effect<void>
  }
>() {}

/**
 * Whether the events emitted by the current fiber are excluded from
 * analytics. Forked fibers inherit it; set it with `withExcluded`.
 */
export const excluded: FiberRef.FiberRef<boolean> = globalValue(
  Symbol.for("troupe/Telemetry/excluded"),
  () => FiberRef.unsafeMake(false)
)

/** Runs an effect (and the fibers it forks) with events marked excluded, or not. */
export const withExcluded: {
  (isExcluded: boolean): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, isExcluded: boolean): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, isExcluded: boolean): Effect.Effect<A, E, R> =>
    // Already so (an actor's turn announcing its end, mostly): no `locally`, ~20 Effect steps less;
    // the fiber ref read in place (one step, not a get, its exit and a flatMap).
    Effect.withFiberRuntime((fiber) =>
      fiber.getFiberRef(excluded) === isExcluded ? self : Effect.locally(self, excluded, isExcluded)
    )
)

/** Whether events emitted here now would be excluded. */
export const isExcluded: Effect.Effect<boolean> = FiberRef.get(excluded)

/** Emits through the `Telemetry` in context. */
export const emit = (event: ProductEvent): Effect.Effect<void, never, Telemetry> =>
  Effect.flatMap(Telemetry, (telemetry) => telemetry.emit(event))

/** Emits only if a `Telemetry` is in context: for code that must also run without one. */
export const emitIfProvided = (event: ProductEvent): Effect.Effect<void> =>
  Effect.flatMap(Effect.serviceOption(Telemetry), (telemetry) =>
    telemetry._tag === "Some" ? telemetry.value.emit(event) : Effect.void)

/** A telemetry that reports nothing. */
export const noop: Telemetry["Type"] = Telemetry.of({ emit: () => Effect.void })

/** Reports nothing, sets up nothing. */
export const layerNoop: Layer.Layer<Telemetry> = Layer.succeed(Telemetry, noop)

/**
 * `TROUPE_TELEMETRY_ENABLED` (default `true`). A client reads it too: when
 * false it sends `excludeFromAnalytics: true` in `auth.hello`.
 */
export const enabled: Config.Config<boolean> = Config.boolean("TROUPE_TELEMETRY_ENABLED").pipe(
  Config.withDefault(true)
)

/** What identifies a span of a session: ids are for traces only, never for product events or metric labels. */
export interface SpanIds {
  readonly sessionId: string
  readonly turnId?: string | undefined
  readonly operationId?: string | undefined
  /** The lease epoch the actor holds. */
  readonly epoch?: number | undefined
}

/** The ids of an operation's span: all four are known inside a turn. */
export interface OperationSpanIds {
  readonly sessionId: string
  readonly turnId: string
  readonly operationId: string
  readonly epoch: number
}

/** The attribute keys of `SpanIds`, as the actors' spans already name them. */
export const SpanAttribute = {
  sessionId: "troupe.session_id",
  turnId: "troupe.turn_id",
  operationId: "troupe.operation_id",
  epoch: "troupe.lease_epoch"
} as const

/** Span attributes for the ids given (absent ones are left out). */
export const spanAttributes = (ids: SpanIds): Record<string, string | number> => {
  const attributes: Record<string, string | number> = { [SpanAttribute.sessionId]: ids.sessionId }
  if (ids.turnId !== undefined) attributes[SpanAttribute.turnId] = ids.turnId
  if (ids.operationId !== undefined) attributes[SpanAttribute.operationId] = ids.operationId
  if (ids.epoch !== undefined) attributes[SpanAttribute.epoch] = ids.epoch
  return attributes
}

/**
 * The tracer Effect runs with when none is set (`Layer.setTracer`,
 * `Effect.withTracer`; the OpenTelemetry layer sets one): its spans go
 * nowhere, so `inSpan` makes none under it (decision 0022).
 */
const builtInTracer: Tracer.Tracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/**
 * `Effect.withSpan` in fewer Effect steps (~17 instead of ~35; a tool turn
 * runs four spans): the span is made, made the parent by updating the fiber's
 * context in one step rather than through `provideService`'s `locally` (an
 * acquire/release of its own), and ended with the exit, all inside one
 * uninterruptible region so that the context is restored and the span ended
 * whatever happens.
 * Stack traces are never captured (always the same call site: they say
 * nothing, and capturing one costs ~0.05 ms a turn).
 * Under Effect's built-in tracer no span is made at all (one step, and no
 * span, attributes or context to allocate): nothing would ever read it.
 * `attributes` is only called when a span is made.
 */
const inSpan = <A, E, R>(self: Effect.Effect<A, E, R>, name: string, attributes: () => Record<string, unknown>) =>
  Effect.withFiberRuntime<A, E, R>((fiber) =>
    Context.get(fiber.currentDefaultServices, Tracer.Tracer) === builtInTracer ? self : traced(self, name, attributes()))

const traced = <A, E, R>(self: Effect.Effect<A, E, R>, name: string, attributes: Record<string, unknown>) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.makeSpan(name, { attributes, captureStackTrace: false }), (span) =>
      Effect.flatMap(
        FiberRef.getAndUpdate(FiberRef.currentContext, (context) => Context.add(context, Tracer.ParentSpan, span)),
        (outer) =>
          Effect.withFiberRuntime<A, E, R>((fiber) => {
            const timing = fiber.getFiberRef(FiberRef.currentTracerTimingEnabled)
            const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
            const end = (exit: Exit.Exit<A, E>) =>
              Effect.flatMap(FiberRef.set(FiberRef.currentContext, outer), () => {
                if (span.status._tag !== "Ended") span.end(timing ? clock.unsafeCurrentTimeNanos() : BigInt(0), exit)
                return exit
              })
            return Effect.matchCauseEffect(restore(self), {
              onFailure: (cause) => end(Exit.failCause(cause)),
              onSuccess: (value) => end(Exit.succeed(value))
            })
          })
      )))

/** Runs a turn in a `troupe.turn` span carrying session id, turn id and lease epoch. */
export const withTurnSpan: {
  (ids: SpanIds & { readonly turnId: string; readonly epoch: number }, attributes?: Record<string, unknown>): <A, E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    ids: SpanIds & { readonly turnId: string; readonly epoch: number },
    attributes?: Record<string, unknown>
  ): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(self: Effect.Effect<A, E, R>, ids: SpanIds, attributes?: Record<string, unknown>) =>
    inSpan(self, "troupe.turn", () => ({ ...attributes, ...spanAttributes(ids) }))
)

/**
 * Runs one operation in a `troupe.model_call` or `troupe.tool_call` span
 * carrying session id, turn id, operation id and lease epoch.
 */
export const withOperationSpan: {
  (
    kind: "model" | "tool",
    ids: OperationSpanIds,
    attributes?: Record<string, unknown>
  ): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    kind: "model" | "tool",
    ids: OperationSpanIds,
    attributes?: Record<string, unknown>
  ): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(self: Effect.Effect<A, E, R>, kind: "model" | "tool", ids: SpanIds, attributes?: Record<string, unknown>) =>
    inSpan(self, kind === "model" ? "troupe.model_call" : "troupe.tool_call", () => ({ ...attributes, ...spanAttributes(ids) }))
)
