/**
 * Branded identifiers. Every id is `<prefix>_<ulid>`: a 26-character Crockford
 * base32 ULID whose first ten characters are the creation time in milliseconds,
 * so ids of one kind sort by creation time as plain strings.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
const ULID_BODY = "[0-9A-HJKMNP-TV-Z]{26}"

const CROCKFORD_CODES = Array.from(CROCKFORD, (c) => c.charCodeAt(0))

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
const nextRandom = (random: Random.Random) =>
  Effect.flatMap(
    random.nextIntBetween(0, span),
    (high) => Effect.map(random.nextIntBetween(0, span), (low) => digitsOf(low, digitsOf(high, [])))
  )

// In place: the digits are this module's own (drawn fresh per millisecond).
const increment = (digits: Array<number>): Array<number> => {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i]! < 31) {
      digits[i] = digits[i]! + 1
      return digits
    }
    digits[i] = 0
  }
  return digits
}

// The character codes of the last body: the time's ten (kept for the ids minted within its
// millisecond), then the random part's sixteen. A body is made of them as one flat string, rather
// than a string per character appended.
let encodedAt = -1
const bodyCodes: Array<number> = []

const body = (now: number) => {
  const time = Math.max(now, lastTime)
  if (time !== encodedAt) {
    encodedAt = time
    let t = time
    for (let i = 9; i >= 0; i--) {
      bodyCodes[i] = CROCKFORD_CODES[t % 32]!
      t = Math.floor(t / 32)
    }
  }
  bodyCodes.length = 10 + lastRandom.length
  for (let i = 0; i < lastRandom.length; i++) bodyCodes[10 + i] = CROCKFORD_CODES[lastRandom[i]!]!
  return String.fromCharCode.apply(null, bodyCodes)
}

/**
 * A ULID body, after `prefix`, from the Effect `Clock` and `Random` services (see `ulid`): both read
 * from the fiber's default services in the one step that reads the time.
 */
const ulidAfter = (prefix: string): Effect.Effect<string> =>
  Effect.withFiberRuntime((fiber) => {
    const services = fiber.getFiberRef(DefaultServices.currentServices)
    // Whole milliseconds: a TestClock moved by fractional sleeps (the pool's jitter) reads fractions, which the time's digits cannot encode.
    const now = Math.floor(Context.get(services, Clock.Clock).unsafeCurrentTimeMillis())
    if (now <= lastTime) {
      lastRandom = increment(lastRandom)
      return Effect.succeed(prefix + body(now))
    }
    return Effect.map(nextRandom(Context.get(services, Random.Random)), (digits) => {
      // Another fiber may have minted meanwhile: the later time wins, and ties increment.
      if (now <= lastTime) {
        lastRandom = increment(lastRandom)
      } else {
        lastTime = now
        lastRandom = digits
      }
      return prefix + body(now)
    })
  })

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
