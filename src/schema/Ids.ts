/**
 * Branded identifiers. Every id is `<prefix>_<ulid>`: a 26-character Crockford
 * base32 ULID whose first ten characters are the creation time in milliseconds,
 * so ids of one kind sort by creation time as plain strings.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
const ULID_BODY = "[0-9A-HJKMNP-TV-Z]{26}"

const encodeTime = (ms: number): string => {
  let out = ""
  let t = ms
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[t % 32]! + out
    t = Math.floor(t / 32)
  }
  return out
}

// Monotonic within a process: ids minted in the same millisecond increment the
// random part, so creation order is never lost to ties.
let lastTime = -1
let lastRandom: Array<number> = []

// 80 random bits as sixteen base32 digits, drawn 40 bits (eight digits) at a time,
// from the one Random service read once (fewer Effect steps than a generator of `Random.nextIntBetween`).
const span = 2 ** 40
const digitsOf = (bits: number, digits: Array<number>) => {
  // Any number a fixed Random gives (negative, fractional, huge) still makes digits 0-31.
  for (let i = 7; i >= 0; i--) digits.push(((Math.floor(bits / 32 ** i) % 32) + 32) % 32)
  return digits
}

// Chained by hand: `Effect.zipWith` runs through `Effect.all`'s machinery (~15 Effect steps against 4).
const nextRandom = Effect.randomWith((random) =>
  Effect.flatMap(
    random.nextIntBetween(0, span),
    (high) => Effect.map(random.nextIntBetween(0, span), (low) => digitsOf(low, digitsOf(high, [])))
  )
)

const increment = (digits: ReadonlyArray<number>): Array<number> => {
  const out = digits.slice()
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i]! < 31) {
      out[i] = out[i]! + 1
      return out
    }
    out[i] = 0
  }
  return out
}

// The time part of the last body (as character codes), kept for the ids minted within its millisecond.
let encodedAt = -1
let encodedTime: ReadonlyArray<number> = []
const codeOf = Array.from(CROCKFORD, (c) => c.charCodeAt(0))

// One flat string: `+=` a character at a time leaves a chain of cons strings (about 16 heap objects per id, kept as long as the id is).
const body = (prefix: ReadonlyArray<number>, now: number) => {
  const time = Math.max(now, lastTime)
  if (time !== encodedAt) {
    encodedAt = time
    encodedTime = Array.from(encodeTime(time), (c) => c.charCodeAt(0))
  }
  const codes = [...prefix, ...encodedTime]
  for (const digit of lastRandom) codes.push(codeOf[digit]!)
  return String.fromCharCode.apply(null, codes)
}

/** A ULID body, after `prefix`, from the Effect `Clock` and `Random` services (see `ulid`). */
const ulidAfter = (prefixText: string): Effect.Effect<string> => {
  const prefix = Array.from(prefixText, (c) => c.charCodeAt(0))
  return Effect.clockWith((clock) => {
    // Whole milliseconds: a TestClock moved by fractional sleeps (the pool's jitter) reads fractions, which encodeTime cannot encode.
    const now = Math.floor(clock.unsafeCurrentTimeMillis())
    if (now <= lastTime) {
      lastRandom = increment(lastRandom)
      return Effect.succeed(body(prefix, now))
    }
    return Effect.map(nextRandom, (digits) => {
      // Another fiber may have minted meanwhile: the later time wins, and ties increment.
      if (now <= lastTime) {
        lastRandom = increment(lastRandom)
      } else {
        lastTime = now
        lastRandom = digits
      }
      return body(prefix, now)
    })
  })
}

/**
 * Mints a ULID body from the Effect `Clock` and `Random` services. Random
 * digits are drawn once per millisecond; ids minted within it increment them,
 * in one step without further Effects.
 */
export const ulid: Effect.Effect<string> = ulidAfter("")

/** The creation time (epoch milliseconds) encoded in an id. */
export const timestampOf = (id: string): number => {
  const body = id.slice(id.indexOf("_") + 1, id.indexOf("_") + 11)
  let ms = 0
  for (const c of body) ms = ms * 32 + CROCKFORD.indexOf(c)
  return ms
}

const prefixed = <const B extends string>(prefix: string, brand: B) =>
  Schema.String.pipe(
    Schema.pattern(new RegExp(`^${prefix}_${ULID_BODY}$`), {
      message: () => `expected a ${brand} (${prefix}_ followed by a 26-character ULID)`
    }),
    Schema.brand(brand)
  )

/** Identifies a session (the actor). */
export const SessionId = prefixed("ses", "SessionId")
/** @since 0.1.0 */
export type SessionId = typeof SessionId.Type

/** Identifies a turn of a session. */
export const TurnId = prefixed("turn", "TurnId")
/** @since 0.1.0 */
export type TurnId = typeof TurnId.Type

/** Identifies one model or tool call inside a turn. */
export const OperationId = prefixed("op", "OperationId")
/** @since 0.1.0 */
export type OperationId = typeof OperationId.Type

/** Identifies a callback (approval or client tool request). */
export const CallbackId = prefixed("cb", "CallbackId")
/** @since 0.1.0 */
export type CallbackId = typeof CallbackId.Type

/** Identifies an atomic append to a session's log. */
export const CommitId = prefixed("commit", "CommitId")
/** @since 0.1.0 */
export type CommitId = typeof CommitId.Type

/**
 * Identifies an inbox item. Clients choose it (it is the idempotency key of a
 * command), so any non-empty printable string up to 128 characters is allowed;
 * `InputId.make` mints a time-ordered one.
 */
export const InputId = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,128}$/, {
    message: () => "expected an InputId: 1 to 128 printable ASCII characters without spaces"
  }),
  Schema.brand("InputId")
)
/** @since 0.1.0 */
export type InputId = typeof InputId.Type

// A ULID minted here matches its id's pattern by construction: branding it
// without running the pattern check saves a schema validation per id.
// The prefix is put on as the body is made: no `Effect.map` step per id (a tool turn mints seven).
const mint = <A extends string>(prefix: string): Effect.Effect<A> => ulidAfter(`${prefix}_`) as Effect.Effect<A>

/** Mints a new `SessionId`. */
export const makeSessionId: Effect.Effect<SessionId> = mint("ses")
/** Mints a new `TurnId`. */
export const makeTurnId: Effect.Effect<TurnId> = mint("turn")
/** Mints a new `OperationId`. */
export const makeOperationId: Effect.Effect<OperationId> = mint("op")
/** Mints a new `CallbackId`. */
export const makeCallbackId: Effect.Effect<CallbackId> = mint("cb")
/** Mints a new `CommitId`. */
export const makeCommitId: Effect.Effect<CommitId> = mint("commit")
/** Mints a new `InputId`. */
export const makeInputId: Effect.Effect<InputId> = mint("in")
