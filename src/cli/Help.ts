/**
 * The help the program prints, tidied from what @effect/cli renders: its
 * generic sentences ("A user-defined piece of text.", "This setting is
 * optional.", "One of the following: …") are dropped, since every option says
 * what it takes in its own description; USAGE shows the whole command
 * (`$ troupe sessions answer …`, not `$ answer …`); each command's
 * description ends with examples (`describe`); the options every subcommand
 * of a group takes (the connection options of `troupe sessions`) are listed
 * once after its COMMANDS; and every line fits `WIDTH` columns.
 *
 * @since 0.1.0
 */
import { stripAnsi } from "./Output.js"

/** The sentences @effect/cli adds to an option's help whatever the option is. */
export const GENERIC: ReadonlyArray<RegExp> = [
  /^A true or false value\.$/,
  /^A date without a time-zone in the ISO-8601 format, such as 2007-12-03T10:15:30\.$/,
  /^A floating point number\.$/,
  /^An integer\.$/,
  /^(An existing|A) (file or directory|file|directory)( that must not exist)?\.$/,
  /^A user-defined piece of text( that is confidential)?\.$/,
  /^One of the following: .*$/,
  /^This setting is optional\.( Defaults to: .*)?$/,
  /^This option can be set from environment variables\.$/,
  /^This option can be repeated\.$/,
  /^This argument must be repeated at least \d+ times?\.$/
]

/** The examples of each command, by its description (the paragraph they follow in its help). */
const examplesOf = new Map<string, ReadonlyArray<readonly [command: string, does: string]>>()

/**
 * A command's description, with its examples (each a command line, then what
 * it does) shown after it in the command's help. The description stays one
 * paragraph, which is what the list of commands shows.
 */
export const describe = (description: string, examples: ReadonlyArray<readonly [command: string, does: string]>): string => {
  examplesOf.set(description, examples)
  return description
}

const renderExamples = (examples: ReadonlyArray<readonly [string, string]>) =>
  ["EXAMPLES", ...examples.map(([command, does]) => `  $ ${command}\n      ${does}`)].join("\n\n")

/**
 * Tidies one help text printed for the command `path` (`["troupe",
 * "sessions", "answer"]`): drops the generic sentences and the bare program
 * name heading, and writes the whole command in USAGE.
 */
export const tidy = (text: string, path: ReadonlyArray<string>): string => {
  const paragraphs = text.split(/\n\n/)
  const kept: Array<string> = []
  let first = true
  for (const paragraph of paragraphs) {
    const plain = stripAnsi(paragraph).trim()
    if (GENERIC.some((pattern) => pattern.test(plain))) continue
    // @effect/cli starts with the program's name on a line of its own, then "troupe 0.1.0".
    if (first && plain === "troupe") {
      first = false
      continue
    }
    first = false
    const usage = /^\$ (\S+)(.*)$/s.exec(plain)
    if (usage !== null && usage[1] === path[path.length - 1]) {
      kept.push(`$ ${path.join(" ")}${usage[2]}`)
      continue
    }
    kept.push(paragraph)
    const examples = examplesOf.get(plain)
    if (examples !== undefined) kept.push(renderExamples(examples))
  }
  return fit(commonOptionsOnce(kept.join("\n\n")))
}

/** The width help lines fit in. */
export const WIDTH = 80

/** The words of a line, an option in brackets (`[--tcp HOST:PORT]`, `[(-f, --follow)]`) being one. */
const atoms = (text: string): ReadonlyArray<string> => text.match(/\[[^\]]*\](\.\.\.)?|<[^>]*>(\.\.\.)?|\S+/g) ?? []

/**
 * One line wrapped at `WIDTH` columns between words (never inside an
 * option): continuation lines keep the indentation, four more after a
 * command line (`$ …`, `- …`).
 */
const wrap = (line: string): string => {
  const plain = stripAnsi(line)
  if (plain.length <= WIDTH) return line.trimEnd()
  const indent = /^ */.exec(line)![0]
  const more = /^ *(\$|-) /.test(plain) ? `${indent}    ` : indent
  const lines: Array<string> = []
  let current = indent
  for (const atom of atoms(line)) {
    const start = current.trim() === ""
    if (!start && stripAnsi(current).length + 1 + stripAnsi(atom).length > WIDTH) {
      lines.push(current)
      current = more + atom
    } else current = start ? current + atom : `${current} ${atom}`
  }
  lines.push(current)
  return lines.join("\n")
}

/** Every line of a help text within `WIDTH` columns, without trailing spaces. */
const fit = (text: string): string => text.split("\n").map(wrap).join("\n")

/**
 * The options every command of a COMMANDS list takes, said once after the
 * list instead of on each command's line; each command's description goes on
 * the line below it (@effect/cli pads the usages into a column).
 */
const commonOptionsOnce = (text: string): string => {
  const lines = text.split("\n")
  const commands = lines.flatMap((line, i) => (/^ {2}- \S+/.test(stripAnsi(line)) ? [i] : []))
  if (commands.length < 2) return text
  const parts = new Map(commands.map((i) => {
    const plain = stripAnsi(lines[i]!).trimEnd()
    const split = /^(.*?\S)\s{2,}(\S.*)$/.exec(plain)
    return [i, { usage: atoms(split === null ? plain : split[1]!), description: split === null ? "" : split[2]! }] as const
  }))
  const optionsOf = (i: number) => parts.get(i)!.usage.slice(2).filter((atom) => atom.startsWith("["))
  const common = optionsOf(commands[0]!).filter((option) => commands.every((i) => optionsOf(i).includes(option)))
  for (const i of commands) {
    const { description, usage } = parts.get(i)!
    const [dash, name, ...rest] = usage
    const kept = rest.filter((atom) => !common.includes(atom)).map((atom) => ` ${atom}`).join("")
    lines[i] = `  ${dash} ${name}${kept}${description === "" ? "" : `\n      ${description}`}`
  }
  if (common.length > 0) {
    lines.splice(commands[commands.length - 1]! + 1, 0, "", `  Every command also takes: ${common.join(" ")}`)
  }
  return lines.join("\n")
}
