/**
 * The options of `troupe inspect`, apart from the command: `InspectCommand`
 * parses them, and `Inspect` (loaded only when the command runs) takes what
 * they parse to, so neither imports the other's module: no import circle.
 *
 * @since 0.3.0
 */
import { type Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Address from "./Address.js"
import * as StoreOption from "./StoreOption.js"

/** Where the inspector listens when `--http` is not given: a free port on loopback. */
export const DEFAULT_HTTP = "127.0.0.1:0"

/** The options of `troupe inspect`. */
export const options = {
  store: StoreOption.option,
  http: Options.text("http").pipe(
    Options.withPseudoName("HOST:PORT"),
    Options.withDescription(
      "Where to serve the inspector and the HTTP API (default 127.0.0.1:0, a free port on loopback; the address is printed)."
    ),
    Options.withDefault(DEFAULT_HTTP),
    Options.mapEffect((text) =>
      Either.match(Address.parseHostPort(text), {
        onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--http: ${reason}`))),
        onRight: Effect.succeed
      })
    )
  ),
  tokens: Options.file("tokens", { exists: "yes" }).pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription(
      "Tokens and the principals they stand for (docs/configuration.md): every request then needs one, and sees that principal's sessions. Needed off loopback."
    ),
    Options.optional
  ),
  allowAnswers: Options.boolean("allow-answers").pipe(
    Options.withDescription(
      "Let the page (and any client of this address) answer pending callbacks; every other change stays refused. The daemon that drives the session applies the answer."
    )
  )
}

/** What `troupe inspect` was given. */
export type InspectOptions = Command.Command.ParseConfig<typeof options>
