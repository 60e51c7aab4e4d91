/**
 * A check of the command line before @effect/cli parses it, for the mistakes
 * its own messages get wrong: an unknown command (it lists the top-level
 * commands even under `troupe sessions`), an unknown option (it names the
 * next argument instead), and an option given without its value (it takes
 * the next option, or runs with none). Each is one usage error that names
 * the word at fault and, where one is close, suggests the nearest command or
 * option. What passes is parsed by @effect/cli as before.
 *
 * @since 0.1.0
 */
import { Command, type Usage } from "@effect/cli"
import * as Option from "effect/Option"

/** A command as the check sees it: its options, or its subcommands. */
export type Tree =
  | { readonly _tag: "Leaf"; readonly options: ReadonlyMap<string, Option.Option<string>> }
  | { readonly _tag: "Group"; readonly children: ReadonlyMap<string, Tree> }

/** The options every command takes (@effect/cli's built-ins), and whether each takes a value. */
const GLOBAL: ReadonlyMap<string, Option.Option<string>> = new Map([
  ["--help", Option.none()],
  ["-h", Option.none()],
  ["--version", Option.none()],
  ["--wizard", Option.none()],
  ["--log-level", Option.some("LEVEL")],
  ["--completions", Option.some("SHELL")]
])

/** The named options of a usage, with the placeholder of the value each takes (none for a flag). */
const optionsOf = (usage: Usage.Usage, into: Map<string, Option.Option<string>>): Map<string, Option.Option<string>> => {
  switch (usage._tag) {
    case "Named":
      for (const name of usage.names) if (name.startsWith("-")) into.set(name, usage.acceptedValues)
      return into
    case "Optional":
    case "Repeated":
      return optionsOf(usage.usage, into)
    case "Alternation":
    case "Concat":
      optionsOf(usage.left, into)
      return optionsOf(usage.right, into)
    default:
      return into
  }
}

/** The check's view of a command with its own options. */
export const leaf = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>): Tree => ({
  _tag: "Leaf",
  options: optionsOf(Command.getUsage(command), new Map())
})

/** The check's view of a command made of subcommands. */
export const group = (children: Readonly<Record<string, Tree>>): Tree => ({
  _tag: "Group",
  children: new Map(Object.entries(children))
})

/** The edit distance between two words. */
export const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The nearest of `candidates` to `word`, when it is close enough to be what was meant. */
export const nearest = (word: string, candidates: Iterable<string>): Option.Option<string> => {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const d = distance(word, candidate)
    if (d < bestDistance || (d === bestDistance && best !== undefined && candidate.startsWith(word) && !best.startsWith(word))) {
      best = candidate
      bestDistance = d
    }
  }
  const close = best !== undefined &&
    (bestDistance <= Math.max(1, Math.floor(word.length / 3)) || (word.length >= 3 && best.startsWith(word)))
  return close ? Option.some(best!) : Option.none()
}

/** A usage error found by the check: what is wrong, and what to do about it. */
export interface Problem {
  readonly message: string
  readonly hint: string
}

const suggest = (word: string, candidates: Iterable<string>) =>
  Option.match(nearest(word, candidates), { onNone: () => "", onSome: (near) => `; did you mean ${near}?` })

/** The levels `--log-level` takes (@effect/cli's names). */
const LEVELS = ["all", "trace", "debug", "info", "warning", "error", "fatal", "none"]

/**
 * The choices an option's placeholder lists (`all | none`), or none when it
 * takes any value; `--log-level`'s levels are @effect/cli's, checked here too.
 */
const choicesOf = (name: string, placeholder: string): ReadonlyArray<string> | undefined =>
  name === "--log-level" ? LEVELS : placeholder.includes(" | ") ? placeholder.split(" | ") : undefined

/** A value outside its option's choices, named with the option (@effect/cli names neither). */
const badChoice = (name: string, placeholder: string, value: string | undefined, command: string): Option.Option<Problem> => {
  const choices = choicesOf(name, placeholder)
  if (choices === undefined || value === undefined || choices.includes(value)) return Option.none()
  return Option.some({
    message: `${name}: ${JSON.stringify(value)} is not one of ${choices.join(", ")}${suggest(value, choices)}`,
    hint: `\`${command} --help\` says what it takes`
  })
}

/**
 * @effect/cli's message for a value of the wrong type (`'abc' is not a
 * integer`) with the option it was given to, found in `args`: `--limit: "abc"
 * is not an integer`. Other messages are returned as they are.
 */
export const nameBadValue = (message: string, args: ReadonlyArray<string>): string => {
  const match = /^'(.*)' is not an? (\w+)/.exec(message)
  if (match === null) return message
  const [, value, type] = match as unknown as [string, string, string]
  let name: string | undefined
  for (let i = 0; i < args.length && name === undefined; i++) {
    const word = args[i]!
    if (word.startsWith("--") && word.endsWith(`=${value}`)) name = word.slice(0, word.indexOf("="))
    else if (word.startsWith("-") && args[i + 1] === value) name = word
  }
  const what = `${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`
  return name === undefined ? `${JSON.stringify(value)} is not ${what}` : `${name}: ${JSON.stringify(value)} is not ${what}`
}

/** A value that can follow an option: a word that is not itself an option (a negative number is a value). */
const isValue = (word: string | undefined) => word !== undefined && (!word.startsWith("-") || /^-\d/.test(word) || word === "-")

/**
 * Checks `args` (the words after the program's name) against the command
 * tree; `none` when @effect/cli may parse them.
 */
export const check = (root: Tree, args: ReadonlyArray<string>): Option.Option<Problem> => {
  let node = root
  const path = ["troupe"]
  let at = 0
  // The command words, up to the command that takes options.
  while (node._tag === "Group") {
    while (at < args.length && GLOBAL.has(args[at]!)) {
      const bad = badChoice(args[at]!, "", args[at + 1], path.join(" "))
      if (Option.isSome(bad)) return bad
      at += Option.isSome(GLOBAL.get(args[at]!)!) ? 2 : 1
    }
    const word = args[at]
    if (word === undefined || word.startsWith("-")) return Option.none() // help, version, or @effect/cli's own message
    const child = node.children.get(word)
    if (child === undefined) {
      const where = path.join(" ")
      return Option.some({
        message: `unknown command ${JSON.stringify(word)} for ${where}${suggest(word, node.children.keys())}`,
        hint: `\`${where} --help\` lists the commands`
      })
    }
    path.push(word)
    node = child
    at++
  }
  const command = path.join(" ")
  const options = node.options
  for (; at < args.length; at++) {
    const word = args[at]!
    if (word === "--") break
    if (!word.startsWith("-") || word === "-" || /^-\d/.test(word)) continue
    const eq = word.indexOf("=")
    const name = word.startsWith("--") && eq > 0 ? word.slice(0, eq) : word
    const value = options.get(name) ?? GLOBAL.get(name)
    if (value === undefined) {
      return Option.some({
        message: `unknown option ${name} for ${command}${suggest(name, [...options.keys()].filter((o) => o.startsWith("--")))}`,
        hint: `\`${command} --help\` lists its options`
      })
    }
    if (Option.isNone(value)) continue
    if (name !== word) { // --name=value
      const bad = badChoice(name, value.value, word.slice(eq + 1), command)
      if (Option.isSome(bad)) return bad
      continue
    }
    const bad = badChoice(name, value.value, isValue(args[at + 1]) ? args[at + 1] : undefined, command)
    if (Option.isSome(bad)) return bad
    if (!isValue(args[at + 1])) {
      return Option.some({
        message: `${name} needs a value (${name} ${value.value})`,
        hint: `\`${command} --help\` says what it takes`
      })
    }
    at++
  }
  return Option.none()
}

/** The command words at the start of `args` (`["troupe", "sessions", "list"]`), as far as the tree knows them. */
export const commandPath = (root: Tree, args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const path = ["troupe"]
  let node = root
  for (const word of args) {
    if (node._tag !== "Group") break
    if (word.startsWith("-")) continue
    const child = node.children.get(word)
    if (child === undefined) break
    path.push(word)
    node = child
  }
  return path
}
