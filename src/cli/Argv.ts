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
import { Option } from "effect"

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
    while (at < args.length && GLOBAL.has(args[at]!)) at += Option.isSome(GLOBAL.get(args[at]!)!) ? 2 : 1
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
    if (name !== word) continue // --name=value
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
