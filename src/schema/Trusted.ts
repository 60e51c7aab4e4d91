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
import * as Schema from "effect/Schema"

type Fields = Readonly<Record<PropertyKey, unknown>>

/** A class made by `Schema.Class` or `Schema.TaggedClass`. */
export interface SchemaClass<A, P> {
  new(props: P, options?: boolean): A
  readonly fields: Fields
  readonly prototype: A
}

/** A default of the class's fields: its key and its thunk. */
type Default = readonly [PropertyKey, () => unknown]

/** Each class's fields with a constructor default, in the class's field order (found once). */
const defaults = new WeakMap<object, ReadonlyArray<Default>>()

const defaultOf = (field: unknown): (() => unknown) | undefined => {
  if (!Schema.isPropertySignature(field)) return undefined
  const ast = field.ast
  return ast._tag === "PropertySignatureDeclaration" ? ast.defaultValue : ast.to.defaultValue
}

const defaultsOf = (klass: SchemaClass<unknown, unknown>): ReadonlyArray<Default> => {
  let found = defaults.get(klass)
  if (found === undefined) {
    const list: Array<Default> = []
    for (const key of Reflect.ownKeys(klass.fields)) {
      const value = defaultOf(klass.fields[key])
      if (value !== undefined) list.push([key, value])
    }
    defaults.set(klass, found = list)
  }
  return found
}

/**
 * The instance `new klass(props, true)` would build. A class with no defaults (none is tagged:
 * a tag is a default) is one copy; the rest are kept out of line, so a caller that inlines
 * `make` does not inline them too.
 */
export const make = <A, P extends object>(klass: SchemaClass<A, P>, props: P): A => {
  const list = defaultsOf(klass as SchemaClass<unknown, unknown>)
  return list.length === 0
    ? Object.assign(Object.create(klass.prototype as object), props)
    : makeWithDefaults(klass, props, list)
}

/**
 * `make` for a class with defaults. Props that carry a tag of their own (which the
 * constructor drops and sets again) take the constructor.
 */
const makeWithDefaults = <A, P extends object>(klass: SchemaClass<A, P>, props: P, list: ReadonlyArray<Default>): A => {
  if (Object.prototype.hasOwnProperty.call(props, "_tag")) return new klass(props, true)
  const out = Object.assign(Object.create(klass.prototype as object), props)
  for (let i = 0; i < list.length; i++) {
    const field = list[i]!
    if (out[field[0]] === undefined) out[field[0]] = field[1]()
  }
  return out
}

/**
 * A copy of `instance` (made by `make` or its class's constructor) with `patch`'s fields replaced:
 * what `make(C, { ...instance, ...patch })` builds, in one copy instead of two. Its fields keep
 * their order; `patch` holds only fields of the class, each already valid.
 */
export const copy = <A extends object>(instance: A, patch: Partial<A>): A =>
  Object.assign(Object.create(Object.getPrototypeOf(instance) as object), instance, patch)
