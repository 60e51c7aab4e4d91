/**
 * A schema decoder compiled from the schema's AST into plain closures, for
 * payloads a client reads by the thousand (a replay streams `session.event`
 * frames at ~100k/s). `Schema.decodeUnknownEither` walks the AST through
 * `ParseResult` (an `Either` per node, issue bookkeeping, option lookups);
 * the compiled walk checks the same things and builds the same values
 * (fresh objects with the schema's keys only, refinements through the
 * schema's own filters, classes through the schema's own constructors), with
 * no bookkeeping.
 *
 * The compiled walk answers only when it is sure: anything it does not model
 * exactly (a missing required key, an object that is not a plain one, a node
 * kind it does not know, an ambiguous union member, a transformation that is
 * not synchronous) makes it give up, and the input goes through the schema's
 * own decoder, which decodes it or fails with its `ParseError`. So a decoder
 * from `make` returns what `Schema.decodeUnknownEither` returns, for every
 * input; test/client/CompiledDecoder.test.ts holds the two equal over
 * generated and malformed payloads.
 *
 * @since 0.1.0
 */
import * as AST from "effect/SchemaAST"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as ParseResult from "effect/ParseResult"

/** What the compiled walk returns when it gives the input up to the schema's own decoder. */
export const Miss: unique symbol = Symbol.for("troupe/CompiledDecoder/Miss")
/** @since 0.1.0 */
export type Miss = typeof Miss

/** The kinds of JavaScript value a node tells apart (a union picks its member by them). */
type Kind = "string" | "number" | "boolean" | "undefined" | "null" | "object" | "array" | "other"

const ALL_KINDS: ReadonlyArray<Kind> = ["string", "number", "boolean", "undefined", "null", "object", "array", "other"]

const kindOf = (u: unknown): Kind => {
  const type = typeof u
  switch (type) {
    case "string":
    case "number":
    case "boolean":
    case "undefined":
      return type
    case "object":
      return u === null ? "null" : Array.isArray(u) ? "array" : "object"
    default:
      return "other"
  }
}

interface Node {
  /** The decoded value, or `Miss`. */
  readonly run: (u: unknown) => unknown
  /** The kinds of input this node can accept; any other kind the schema rejects too. */
  readonly kinds: ReadonlySet<Kind>
  /** It returns its input unchanged, and `Miss` only for inputs the schema rejects. */
  readonly identity: boolean
}

const giveUp: Node = { run: () => Miss, kinds: new Set(ALL_KINDS), identity: false }

const predicate = (kinds: ReadonlyArray<Kind>, test: (u: unknown) => boolean): Node => ({
  run: (u) => (test(u) ? u : Miss),
  kinds: new Set(kinds),
  identity: true
})

const hasOwn = (u: object, key: string) => Object.prototype.hasOwnProperty.call(u, key)

const isPlainObject = (u: unknown): u is Record<string, unknown> => {
  if (typeof u !== "object" || u === null) return false
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

/** The `TypeLiteral` a value of this node is first checked against, seen through transformations and refinements. */
const encodedTypeLiteral = (ast: AST.AST): AST.TypeLiteral | undefined => {
  switch (ast._tag) {
    case "TypeLiteral":
      return ast
    case "Transformation":
    case "Refinement":
      return encodedTypeLiteral(ast.from)
    default:
      return undefined
  }
}

/** The literal of a required property `key` of a member, when it has one. */
const literalAt = (member: AST.AST, key: string): AST.LiteralValue | undefined => {
  const literal = encodedTypeLiteral(member)?.propertySignatures.find((ps) => ps.name === key && !ps.isOptional)
  return literal !== undefined && AST.isLiteral(literal.type) ? literal.type.literal : undefined
}

/**
 * How a union decodes inputs of one kind: with its only member that accepts
 * that kind; with any of its members when they all leave inputs unchanged
 * (then the first that accepts gives the same value as any other); or, for
 * objects, with the member named by a required literal property (`_tag`)
 * whose value differs from member to member, or else with the one member
 * whose required keys are all present. Anything else gives up.
 */
const unionFor = (members: ReadonlyArray<AST.AST>, nodes: ReadonlyArray<Node>): ((u: unknown) => unknown) => {
  if (nodes.length === 0) return giveUp.run
  if (nodes.length === 1) return nodes[0]!.run
  if (nodes.every((node) => node.identity)) {
    const runs = nodes.map((node) => node.run)
    return (u) => {
      for (const run of runs) if (run(u) !== Miss) return u
      return Miss
    }
  }
  const first = encodedTypeLiteral(members[0]!)
  for (const ps of first?.propertySignatures ?? []) {
    if (typeof ps.name !== "string") continue
    const key = ps.name
    const byLiteral = new Map<unknown, (u: unknown) => unknown>()
    for (let i = 0; i < members.length; i++) {
      const literal = literalAt(members[i]!, key)
      if (literal === undefined || byLiteral.has(literal)) break
      byLiteral.set(literal, nodes[i]!.run)
    }
    if (byLiteral.size !== members.length) continue
    return (u) => {
      const run = isPlainObject(u) && hasOwn(u, key) ? byLiteral.get(u[key]) : undefined
      return run === undefined ? Miss : run(u)
    }
  }
  // Objects with no literal to tell them apart (a record's typed `input` or `detail`): a member
  // whose required keys the input lacks cannot decode it, so when exactly one member has all of
  // its keys there, the schema's choice is that one; anything else is left to the schema.
  const required = members.map((member) =>
    encodedTypeLiteral(member)?.propertySignatures.flatMap((ps) => typeof ps.name === "string" && !ps.isOptional ? [ps.name] : [])
  )
  if (required.every((keys) => keys !== undefined && keys.length > 0)) {
    const runs = nodes.map((node) => node.run)
    return (u) => {
      if (!isPlainObject(u)) return Miss
      let chosen = -1
      for (let i = 0; i < required.length; i++) {
        if (!required[i]!.every((key) => hasOwn(u, key))) continue
        if (chosen >= 0) return Miss
        chosen = i
      }
      return chosen < 0 ? Miss : runs[chosen]!(u)
    }
  }
  return giveUp.run
}

const compileUnion = (ast: AST.Union): Node => {
  const nodes = ast.types.map(compile)
  const byKind = new Map<Kind, (u: unknown) => unknown>()
  const kinds = new Set<Kind>()
  for (const kind of ALL_KINDS) {
    const members = ast.types.filter((_, i) => nodes[i]!.kinds.has(kind))
    if (members.length === 0) continue
    kinds.add(kind)
    byKind.set(kind, unionFor(members, nodes.filter((node) => node.kinds.has(kind))))
  }
  return {
    run: (u) => {
      const run = byKind.get(kindOf(u))
      return run === undefined ? Miss : run(u)
    },
    kinds,
    identity: nodes.every((node) => node.identity)
  }
}

const compileTypeLiteral = (ast: AST.TypeLiteral): Node => {
  // `ParseResult` hands such an input back as it is, when it is not null or undefined.
  if (ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0) {
    return predicate(["string", "number", "boolean", "object", "array", "other"], (u) => u !== null && u !== undefined)
  }
  if (ast.propertySignatures.some((ps) => typeof ps.name !== "string")) return giveUp
  const names = ast.propertySignatures.map((ps) => ps.name as string)
  const runs = ast.propertySignatures.map((ps) => compile(ps.type).run)
  const optional = ast.propertySignatures.map((ps) => ps.isOptional)
  // A name Object.prototype also has (`constructor`, `toString`, …) is read only after a check that the input owns it.
  const inherited = names.map((name) => name in Object.prototype)
  const count = names.length
  const known = new Set(names)
  if (ast.indexSignatures.length > 1) return giveUp
  const index = ast.indexSignatures[0]
  if (index !== undefined && index.parameter._tag !== "StringKeyword") return giveUp
  const indexRun = index === undefined ? undefined : compile(index.type).run
  return {
    run: (u) => {
      if (!isPlainObject(u)) return Miss
      const out: Record<string, unknown> = {}
      for (let i = 0; i < count; i++) {
        const name = names[i]!
        const input = inherited[i] ? (hasOwn(u, name) ? u[name] : undefined) : u[name]
        // The prototype of `u` is Object.prototype or null, so an undefined value of another name is an own
        // `undefined` or no key at all.
        if (input === undefined && !hasOwn(u, name)) {
          if (optional[i]) continue
          return Miss
        }
        const value = runs[i]!(input)
        if (value === Miss) return Miss
        out[name] = value
      }
      if (indexRun !== undefined) {
        for (const key of Object.keys(u)) {
          const value = indexRun(u[key])
          if (value === Miss) return Miss
          if (known.has(key)) continue
          if (key === "__proto__") return Miss
          out[key] = value
        }
      }
      return out
    },
    kinds: new Set(["object"]),
    identity: false
  }
}

/** An array of one element type (`Schema.Array`): a fresh array of the decoded elements, as `ParseResult` builds. */
const compileTupleType = (ast: AST.TupleType): Node => {
  if (ast.elements.length > 0 || ast.rest.length !== 1) return giveUp
  const element = compile(ast.rest[0]!.type).run
  return {
    run: (u) => {
      if (!Array.isArray(u)) return Miss
      const out: Array<unknown> = new Array(u.length)
      for (let i = 0; i < u.length; i++) {
        const value = element(u[i])
        if (value === Miss) return Miss
        out[i] = value
      }
      return out
    },
    kinds: new Set(["array"]),
    identity: false
  }
}

/** A synchronous step of a transformation: its value, or `Miss` when it fails or is not synchronous. */
const transformation = (ast: AST.Transformation): ((a: unknown, i: unknown) => unknown) | undefined => {
  const t = ast.transformation
  switch (t._tag) {
    case "ComposeTransformation":
      return (a) => a
    case "FinalTransformation":
      return (a, i) => {
        const result = t.decode(a, AST.defaultParseOption, ast, i)
        return Either.isEither(result) && Either.isRight(result) ? result.right : Miss
      }
    case "TypeLiteralTransformation":
      // As `ParseResult` does, on the fresh object the `from` side built.
      return (a) => {
        const out = a as Record<string, unknown>
        for (const pst of t.propertySignatureTransformations) {
          if (typeof pst.from !== "string" || typeof pst.to !== "string") return Miss
          const o = pst.decode(hasOwn(out, pst.from) ? Option.some(out[pst.from]) : Option.none())
          delete out[pst.from]
          if (Option.isSome(o)) out[pst.to] = o.value
        }
        return out
      }
  }
}

/**
 * How a `Schema.Class` builds an instance from its decoded fields, without
 * the generic constructor (a copy of the props, `_tag` deleted and put back
 * through `lazilyMergeDefaults`, then `Object.assign`; ~1–2 µs a class, two
 * or three classes an event): a fresh object of the class's prototype given
 * the same own properties in the same order, with the same constructor
 * defaults. Set up from the first value the constructor itself built, and
 * only when it gives back exactly that value (same prototype, same own keys
 * in the same order, the same values); otherwise the constructor keeps doing
 * it.
 */
type Build = (a: Record<string, unknown>) => unknown

const classBuild = (
  ast: AST.Transformation,
  a: Record<string, unknown>,
  built: unknown
): Build | undefined => {
  if (typeof built !== "object" || built === null) return undefined
  const proto: unknown = Object.getPrototypeOf(built)
  const ctor: unknown = typeof proto === "object" && proto !== null && hasOwn(proto, "constructor")
    ? (proto as { readonly constructor: unknown }).constructor
    : undefined
  // The class's own transformation (cached by `Schema.Class`), so its decode is `new ctor(a, true)`.
  if (typeof ctor !== "function" || !("fields" in ctor) || (ctor as { readonly ast?: unknown }).ast !== ast) return undefined
  const fields = (ctor as { readonly fields: unknown }).fields
  if (typeof fields !== "object" || fields === null) return undefined
  const defaults: Array<readonly [string, () => unknown]> = []
  for (const key of Reflect.ownKeys(fields)) {
    const field: unknown = (fields as Record<PropertyKey, unknown>)[key]
    if (!Schema.isPropertySignature(field)) continue
    const psAst = field.ast
    const defaultValue = psAst._tag === "PropertySignatureDeclaration" ? psAst.defaultValue : psAst.to.defaultValue
    if (defaultValue === undefined) continue
    if (typeof key !== "string" || key in Object.prototype) return undefined
    defaults.push([key, defaultValue])
  }
  // `Schema.TaggedClass` and its kin drop the given `_tag` and put back their own (last).
  const dropTag = defaults.some(([key]) => key === "_tag")
  const build: Build = (a) => {
    const out = Object.create(proto as object) as Record<string, unknown>
    for (const key of Object.keys(a)) {
      if (dropTag && key === "_tag") continue
      out[key] = a[key]
    }
    for (let i = 0; i < defaults.length; i++) {
      const [key, defaultValue] = defaults[i]!
      if ((dropTag && key === "_tag") || a[key] === undefined) out[key] = defaultValue()
    }
    return out
  }
  const direct = build(a)
  const keys = Reflect.ownKeys(built)
  const directKeys = Reflect.ownKeys(direct as object)
  if (keys.length !== directKeys.length) return undefined
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    if (directKeys[i] !== key) return undefined
    if (!Object.is((direct as Record<PropertyKey, unknown>)[key], (built as Record<PropertyKey, unknown>)[key])) return undefined
  }
  return build
}

/** Its compiled walk gives a fresh plain object (a struct, or a struct's optional keys' defaults applied to one). */
const buildsPlainObject = (ast: AST.AST): boolean =>
  ast._tag === "TypeLiteral" ||
  (ast._tag === "Transformation" && ast.transformation._tag === "TypeLiteralTransformation" &&
    ast.from._tag === "TypeLiteral")

const compileTransformation = (ast: AST.Transformation): Node => {
  const from = compile(ast.from)
  const to = compile(ast.to).run
  const transform = transformation(ast)
  if (transform === undefined) return giveUp
  const fromRun = from.run
  const generic = (a: unknown, u: unknown) => {
    const b = transform(a, u)
    return b === Miss ? Miss : to(b)
  }
  // A class's own transformation whose `from` side builds fresh plain objects: the first value decoded
  // through the constructor tells whether `classBuild` can build the next ones.
  let build: Build | "unknown" | "no" = ast.transformation._tag === "FinalTransformation" &&
      ast.to._tag === "Declaration" && buildsPlainObject(ast.from)
    ? "unknown"
    : "no"
  return {
    run: (u) => {
      const a = fromRun(u)
      if (a === Miss) return Miss
      if (typeof build === "function") return build(a as Record<string, unknown>)
      const b = generic(a, u)
      if (build === "unknown" && b !== Miss) build = classBuild(ast, a as Record<string, unknown>, b) ?? "no"
      return b
    },
    kinds: from.kinds,
    identity: false
  }
}

const compileRefinement = (ast: AST.Refinement): Node => {
  const from = compile(ast.from)
  const fromRun = from.run
  return {
    run: (u) => {
      const a = fromRun(u)
      return a === Miss || Option.isSome(ast.filter(a, AST.defaultParseOption, ast)) ? Miss : a
    },
    kinds: from.kinds,
    identity: from.identity
  }
}

const compileDeclaration = (ast: AST.Declaration): Node => {
  const parse = ast.decodeUnknown(...ast.typeParameters)
  return {
    run: (u) => {
      const result = parse(u, AST.defaultParseOption, ast)
      return Either.isEither(result) && Either.isRight(result) ? result.right : Miss
    },
    kinds: new Set(ALL_KINDS),
    identity: false
  }
}

const compiled = new WeakMap<AST.AST, Node>()

const compile = (ast: AST.AST): Node => {
  let node = compiled.get(ast)
  if (node === undefined) {
    node = compileNode(ast)
    compiled.set(ast, node)
  }
  return node
}

const compileNode = (ast: AST.AST): Node => {
  switch (ast._tag) {
    case "StringKeyword":
      return predicate(["string"], (u) => typeof u === "string")
    case "NumberKeyword":
      return predicate(["number"], (u) => typeof u === "number")
    case "BooleanKeyword":
      return predicate(["boolean"], (u) => typeof u === "boolean")
    case "UndefinedKeyword":
      return predicate(["undefined"], (u) => u === undefined)
    case "UnknownKeyword":
    case "AnyKeyword":
      return predicate(ALL_KINDS, () => true)
    case "Literal": {
      const literal = ast.literal
      return predicate([kindOf(literal)], (u) => u === literal)
    }
    case "Union":
      return compileUnion(ast)
    case "TypeLiteral":
      return compileTypeLiteral(ast)
    case "TupleType":
      return compileTupleType(ast)
    case "Refinement":
      return compileRefinement(ast)
    case "Transformation":
      return compileTransformation(ast)
    case "Declaration":
      return compileDeclaration(ast)
    default:
      return giveUp
  }
}

/**
 * The compiled walk alone: the decoded value, or `Miss` when it gives the
 * input up (the schema's decoder then has the last word). For tests and for
 * callers that report a failure their own way.
 */
export const fast = <A, I>(schema: Schema.Schema<A, I>): (input: unknown) => A | Miss => {
  const run = compile(schema.ast).run
  return run as (input: unknown) => A | Miss
}

/** `Schema.decodeUnknownEither(schema)`, through the compiled walk first. */
export const make = <A, I>(schema: Schema.Schema<A, I>): (input: unknown) => Either.Either<A, ParseResult.ParseError> => {
  const run = fast(schema)
  const full = Schema.decodeUnknownEither(schema)
  return (input) => {
    const value = run(input)
    return value === Miss ? full(input) : Either.right(value)
  }
}
