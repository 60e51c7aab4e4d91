/**
 * Trusted construction of a Schema class: what `new C(props, true)` builds, for
 * the hot path's records and receipts, at a third of the cost.
 *
 * `new C(props, true)` skips validation but still copies `props` twice (a spread,
 * then `Data.Class`'s `Object.assign`) and walks every field of the class for
 * constructor defaults. `make(C, props)` copies once onto `C.prototype` and fills
 * only the fields that have a default (found once per class). The instance is
 * the same: the same own keys in the same order (a tagged class's `_tag` last,
 * as the constructor puts it, so `JSON.stringify` writes the same text), the same
 * prototype, equal by `Equal.equals`. `test/schema/Trusted.test.ts` holds it to
 * that for the classes that use it.
 *
 * Only for classes made by `Schema.Class` or `Schema.TaggedClass` with no
 * constructor or instance fields of their own (those would not run), from props
 * the caller vouches for, as with `new C(props, true)`.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

type Fields = Readonly<Record<PropertyKey, unknown>>

/** A class made by `Schema.Class` or `Schema.TaggedClass`. */
export interface SchemaClass<A, P> {
  new(props: P, options?: boolean): A
  readonly fields: Fields
  readonly prototype: A
}

interface Plan {
  readonly prototype: object
  /** The fields with a constructor default, in the class's field order. */
  readonly defaults: ReadonlyArray<readonly [PropertyKey, () => unknown]>
}

const plans = new WeakMap<object, Plan>()

const defaultOf = (field: unknown): (() => unknown) | undefined => {
  if (!Schema.isPropertySignature(field)) return undefined
  const ast = field.ast
  return ast._tag === "PropertySignatureDeclaration" ? ast.defaultValue : ast.to.defaultValue
}

const planOf = (klass: SchemaClass<unknown, unknown>): Plan => {
  let plan = plans.get(klass)
  if (plan === undefined) {
    const defaults: Array<readonly [PropertyKey, () => unknown]> = []
    for (const key of Reflect.ownKeys(klass.fields)) {
      const value = defaultOf(klass.fields[key])
      if (value !== undefined) defaults.push([key, value])
    }
    plan = { prototype: klass.prototype as object, defaults }
    plans.set(klass, plan)
  }
  return plan
}

/**
 * The instance `new klass(props, true)` would build. Props that carry a tag of
 * their own (which the constructor drops and sets again) take the constructor.
 */
export const make = <A, P extends object>(klass: SchemaClass<A, P>, props: P): A => {
  if (Object.prototype.hasOwnProperty.call(props, "_tag")) return new klass(props, true)
  const plan = planOf(klass as SchemaClass<unknown, unknown>)
  const out = Object.assign(Object.create(plan.prototype), props)
  for (const [key, value] of plan.defaults) if (out[key] === undefined) out[key] = value()
  return out
}
