/**
 * `--store`: where sessions are kept.
 *
 * - `sqlite:PATH`: a SQLite file (created, with its directory, when missing);
 *   `sqlite::memory:` for a private in-memory database.
 * - `postgres:URL` (or the URL itself, `postgres://…` / `postgresql://…`).
 * - `memory`: an in-process store, gone when the process exits.
 *
 * The default is `sqlite:$TROUPE_HOME/troupe.db` (`~/.troupe/troupe.db`).
 *
 * @since 0.1.0
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ConfigError from "effect/ConfigError"
import { existsSync, mkdirSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import * as Naming from "../protocol/Naming.js"
import type { StoreUnavailable } from "../schema/Errors.js"
import type { StoreKind } from "../schema/ProductEvent.js"
import type { SessionStore } from "../services/SessionStore.js"
import { layerNoop, type StoreSignals } from "../services/StoreSignals.js"

/** A parsed `--store` value. */
export type Store =
  | { readonly kind: "memory" }
  | { readonly kind: "sqlite"; readonly filename: string; readonly synchronous?: "normal" | "full" | undefined }
  | { readonly kind: "postgres"; readonly url: string }

const FORMS = "expected sqlite:PATH, postgres:URL or memory"

/** Parses a `--store` value, or says why it is not one. */
export const parse = (text: string): Either.Either<Store, string> => {
  const value = text.trim()
  if (value === "memory") return Either.right({ kind: "memory" })
  if (value.startsWith("sqlite:")) {
    const filename = value.slice("sqlite:".length)
    if (filename === "") return Either.left(`sqlite: needs a path (${FORMS})`)
    return Either.right({ kind: "sqlite", filename: filename === ":memory:" ? filename : resolve(filename) })
  }
  const url = value.startsWith("postgres:") && !value.startsWith("postgres://") ? value.slice("postgres:".length) : value
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    try {
      new URL(url)
    } catch {
      return Either.left(`${redact(url)} is not a valid URL`)
    }
    return Either.right({ kind: "postgres", url })
  }
  return Either.left(`${JSON.stringify(value.slice(0, 64))}: ${FORMS}`)
}

/** A URL with its password replaced, fit for messages. */
const redact = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return "postgres:…"
  }
}

/** The store as a user would write it, without a password. */
export const describe = (store: Store): string => {
  switch (store.kind) {
    case "memory":
      return "memory"
    case "sqlite":
      return `sqlite:${store.filename}`
    case "postgres":
      return `postgres:${redact(store.url)}`
  }
}

/** The store's kind, as `daemon.started` reports it. */
export const kindOf = (store: Store): StoreKind => store.kind

/** The default store: `sqlite:$TROUPE_HOME/troupe.db`. */
export const defaultStore: Effect.Effect<Store, ConfigError.ConfigError> = Effect.map(
  Naming.home,
  (home) => ({ kind: "sqlite", filename: join(resolve(home), "troupe.db") })
)

/** The `--store` value, or the default. */
export const resolveStore = (given: Option.Option<Store>): Effect.Effect<Store, ConfigError.ConfigError> =>
  Option.match(given, { onNone: () => defaultStore, onSome: Effect.succeed })

/**
 * The store layer; a SQLite file's directory is created first. Drivers (and the
 * errors' schemas) are loaded only when a store is opened: the client commands
 * and `--help` never need them.
 */
export const layer = (store: Store): Layer.Layer<SessionStore, StoreUnavailable> => {
  switch (store.kind) {
    case "memory":
      return Layer.unwrapEffect(Effect.promise(() => import("../layers/MemorySessionStore.js")).pipe(
        Effect.map((module) => module.layer)
      ))
    case "postgres":
      return Layer.unwrapEffect(Effect.promise(() => import("../layers/PgSessionStore.js")).pipe(
        Effect.map((module) => module.layer({ url: store.url }))
      ))
    case "sqlite":
      return Layer.unwrapEffect(
        Effect.promise(() => Promise.all([import("../schema/Errors.js"), import("../layers/SqliteSessionStore.js")])).pipe(
          Effect.flatMap(([{ StoreUnavailable }, module]) =>
            Effect.try({
              try: () => {
                if (store.filename !== ":memory:") makeDirectories(dirname(store.filename))
              },
              catch: (cause) => new StoreUnavailable({ operation: "open", cause })
            }).pipe(
              // The store and its signals on one connection (`signalsLayer` leaves SQLite's to it).
              Effect.as(module.layerWithSignals({ filename: store.filename, synchronous: store.synchronous }))
            )
          )
        )
      )
  }
}

/**
 * How commits by other processes on the store are signalled here: none for
 * memory, `LISTEN/NOTIFY` for PostgreSQL; a SQLite file's store layer brings its
 * own (`layer`: the change check on the store's connection).
 */
export const signalsLayer = (store: Store): Layer.Layer<StoreSignals> => {
  switch (store.kind) {
    case "memory":
    case "sqlite":
      return layerNoop
    case "postgres":
      return Layer.unwrapEffect(Effect.promise(() => import("../layers/PgStoreSignals.js")).pipe(
        Effect.map((module) => module.layer({ url: store.url }))
      ))
  }
}

/**
 * Creates a directory and its missing parents one level at a time. Node 20's
 * `mkdirSync(..., { recursive: true })` never returns for some paths (under
 * `/proc`, for one), which would hang the program instead of reporting a store
 * it cannot open.
 */
const makeDirectories = (directory: string): void => {
  const missing: Array<string> = []
  let current = directory
  while (!existsSync(current)) {
    missing.push(current)
    const parent = dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const path of missing.reverse()) mkdirSync(path)
}

/** The `--store` option. */
export const option: Options.Options<Option.Option<Store>> = Options.text("store").pipe(
  Options.withPseudoName("STORE"),
  Options.withDescription(
    "Where sessions are kept: sqlite:PATH, postgres:URL or memory (default: sqlite:$TROUPE_HOME/troupe.db)."
  ),
  Options.mapEffect((text) =>
    Either.match(parse(text), {
      onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--store: ${reason}`))),
      onRight: Effect.succeed
    })
  ),
  Options.optional
)

/** `--sqlite-sync`: when a SQLite store's commits are on disk (`SqliteSessionStore.Options.synchronous`). */
export const sqliteSync: Options.Options<"normal" | "full"> = Options.choice("sqlite-sync", ["normal", "full"]).pipe(
  Options.withDescription(
    "SQLite durability: normal (default; survives a crash of the process) or full (an fsync per commit; survives power loss)."
  ),
  Options.withDefault("normal" as const)
)

/** The store with `--sqlite-sync` applied (a SQLite store only; the others ignore it). */
export const withSync = (store: Store, synchronous: "normal" | "full"): Store =>
  store.kind === "sqlite" && synchronous !== "normal" ? { ...store, synchronous } : store
