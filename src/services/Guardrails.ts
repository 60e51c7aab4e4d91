/**
 * Guardrails: checks a host runs on a turn's message (input guardrails,
 * before its first model call) and on its final output (output guardrails).
 * An agent names the guardrails it wants (`inputGuardrails`,
 * `outputGuardrails`: frozen into the session as names); the host's
 * `Guardrails` holds the Effects that check, as the `Toolkit` holds tool
 * handlers. A check answers `allow` or `block(reason)`; a block ends the turn
 * as `failed` with `failureCode: "guardrail_blocked"`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { SessionId, TurnId } from "../schema/Ids.js"

/** What a guardrail answers. */
export type Verdict =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "Block"; readonly reason: string }

/** The text passes. */
export const allow: Verdict = { _tag: "Allow" }

/** The text does not pass, and why (recorded, and given to whoever awaits the turn). */
export const block = (reason: string): Verdict => ({ _tag: "Block", reason })

/** What a guardrail checks. */
export interface Subject {
  /** `input`: the turn's message; `output`: its final output (JSON text for an agent with an output schema). */
  readonly stage: "input" | "output"
  readonly text: string
  readonly sessionId: SessionId
  readonly turnId: TurnId
  /** The agent whose message or output it is. */
  readonly agentName: string
}

/** A named check; its failure (or defect) counts as a block: a check that cannot run does not let text through. */
export interface Guardrail {
  readonly name: string
  readonly check: (subject: Subject) => Effect.Effect<Verdict, unknown>
}

/** Defines a guardrail. */
export const make = (name: string, check: (subject: Subject) => Effect.Effect<Verdict, unknown>): Guardrail => ({
  name,
  check
})

/** The port. */
export class Guardrails extends Context.Tag("troupe/Guardrails")<
  Guardrails,
  {
    /** The guardrail named `name`, if this host has one. */
    readonly get: (name: string) => Guardrail | undefined
  }
>() {}

/** The host's guardrails; two of one name are a defect (an agent could not say which it meant). */
export const layer = (guardrails: ReadonlyArray<Guardrail>): Layer.Layer<Guardrails> =>
  Layer.effect(
    Guardrails,
    Effect.suspend(() => {
      const byName = new Map<string, Guardrail>()
      for (const guardrail of guardrails) {
        if (byName.has(guardrail.name)) return Effect.dieMessage(`Guardrails: two guardrails are named ${guardrail.name}`)
        byName.set(guardrail.name, guardrail)
      }
      return Effect.succeed(Guardrails.of({ get: (name) => byName.get(name) }))
    })
  )

/** A host with no guardrails (an agent that names one has its turns blocked). */
export const layerEmpty: Layer.Layer<Guardrails> = Layer.succeed(Guardrails, Guardrails.of({ get: () => undefined }))
