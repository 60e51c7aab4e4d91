/**
 * Running an agent's guardrails on one text of a turn: each named guardrail
 * in order, each result a `guardrail_checked` record, stopping at the first
 * block. A guardrail this host does not have, or one that fails or dies,
 * blocks: a check that cannot run lets nothing through.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import { GuardrailChecked } from "../schema/Record.js"
import type { Guardrails, Subject } from "../services/Guardrails.js"

/** The first block, when there was one. */
export interface Blocked {
  readonly guardrail: string
  readonly stage: Subject["stage"]
  readonly reason: string
}

/** What checking found: the records to write, and the block that ends the turn (if any). */
export interface Checked {
  readonly records: ReadonlyArray<GuardrailChecked>
  readonly blocked: Blocked | undefined
}

/** Checks `subject` with the guardrails `names` of `guardrails`. */
export const check = (
  guardrails: Guardrails["Type"],
  names: ReadonlyArray<string>,
  subject: Subject
): Effect.Effect<Checked> =>
  Effect.gen(function*() {
    const records: Array<GuardrailChecked> = []
    for (const name of names) {
      const guardrail = guardrails.get(name)
      const reason = guardrail === undefined
        ? `no guardrail named ${name} on this host`
        : yield* guardrail.check(subject).pipe(
          Effect.map((verdict) => (verdict._tag === "Allow" ? undefined : verdict.reason)),
          Effect.catchAllCause((cause) => Effect.succeed(`the guardrail failed: ${Cause.squash(cause)}`))
        )
      records.push(
        new GuardrailChecked({
          turnId: subject.turnId,
          stage: subject.stage,
          guardrail: name,
          allowed: reason === undefined,
          ...(reason === undefined ? {} : { reason })
        }, true)
      )
      if (reason !== undefined) return { records, blocked: { guardrail: name, stage: subject.stage, reason } }
    }
    return { records, blocked: undefined }
  })
